"""The model families of issue 5, in plain torch.nn (torchvision is not importable beside
this torch): a resnet built from BasicBlocks, nn.TransformerEncoder, and a GPT-style
decoder block. Each builder takes a size; `small` configurations run in CI, the full
sizes (resnet18 at 224x224, the encoder of 4 layers at d_model 768, the decoder at
d_model 1024) only with EMBER_SLOW_TESTS=1.

Batch norm statistics are set to non-trivial values (a freshly built network has
mean 0, var 1, which would hide a wrong fold), with a fixed seed.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- resnet ------------------------------------------------------------------------------


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + identity)


class ResNet(nn.Module):
    """torchvision's resnet18 topology for widths (64, 128, 256, 512) and blocks (2, 2, 2,
    2): 7x7/2 stem, 3x3/2 max pool, four stages of BasicBlocks, global average pool, fc."""

    def __init__(self, widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2), classes=1000,
                 extras: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], widths[0]
        for i, (width, count) in enumerate(zip(widths, blocks)):
            for j in range(count):
                layers.append(BasicBlock(cin, width, 2 if (i > 0 and j == 0) else 1))
                cin = width
        self.layers = nn.Sequential(*layers)
        # extras: a depthwise dilated conv with a bias, an average pool and a ReLU6, to
        # cover what the yardstick does not (used by the small configuration).
        self.extras = None
        if extras:
            self.extras = nn.Sequential(
                nn.Conv2d(cin, cin, 3, 1, 2, dilation=2, groups=cin), nn.BatchNorm2d(cin),
                nn.ReLU6(), nn.AvgPool2d(3, 1, 1, count_include_pad=False))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layers(x)
        if self.extras is not None:
            x = x + self.extras(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def randomize_batch_norms(model: nn.Module, seed: int = 0) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.rand(c, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
            m.bias.data.copy_(torch.rand(c, generator=g) - 0.5)
    return model


def resnet(size: str) -> nn.Module:
    torch.manual_seed(0)
    if size == "full":
        model = ResNet()
    else:
        model = ResNet(widths=(8, 16, 24, 32), blocks=(1, 1, 1, 1), classes=10, extras=True)
    return randomize_batch_norms(model).eval()


def resnet_input(size: str, batch: int = 2) -> torch.Tensor:
    torch.manual_seed(1)
    side = 224 if size == "full" else 32
    return torch.randn(batch if size != "full" else 1, 3, side, side)


# ---- transformer encoder -----------------------------------------------------------------


def encoder(size: str, norm_first: bool = False, activation: str = "relu") -> nn.Module:
    torch.manual_seed(0)
    if size == "full":
        d, heads, ff, layers = 768, 12, 3072, 4
    else:
        d, heads, ff, layers = 32, 4, 64, 2
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.1, activation=activation,
                                       batch_first=True, norm_first=norm_first)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()


def encoder_input(size: str) -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(1, 128, 768) if size == "full" else torch.randn(2, 8, 32)


# ---- GPT-style decoder block -------------------------------------------------------------


class RMSNorm(nn.Module):
    """Written out: x * rsqrt(mean(x^2) + eps) * w."""

    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int, max_len: int, mask: str) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.mask = mask
        if mask == "buffer":
            self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len,
                                                                 dtype=torch.bool)))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.mask == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
            if self.mask == "buffer":
                allowed = self.causal[:t, :t]
            else:  # built in forward
                allowed = torch.tril(torch.ones(t, t, dtype=torch.bool))
            scores = scores.masked_fill(~allowed, float("-inf"))
            y = torch.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class DecoderBlock(nn.Module):
    """Token embedding, then one pre-norm block (RMSNorm, causal attention, SiLU-gated MLP,
    residuals), a final RMSNorm and a tied-free LM head."""

    def __init__(self, vocab: int, d: int, heads: int, hidden: int, max_len: int,
                 mask: str = "sdpa") -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.norm1 = RMSNorm(d)
        self.attn = CausalSelfAttention(d, heads, max_len, mask)
        self.norm2 = RMSNorm(d)
        self.mlp = SwiGLU(d, hidden)
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        x = x + self.attn(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return self.head(self.norm(x))


def decoder(size: str, mask: str = "sdpa") -> nn.Module:
    torch.manual_seed(0)
    if size == "full":
        model = DecoderBlock(vocab=8192, d=1024, heads=16, hidden=2816, max_len=128, mask=mask)
    else:
        model = DecoderBlock(vocab=64, d=32, heads=4, hidden=96, max_len=16, mask=mask)
    for norm in (model.norm1, model.norm2, model.norm):
        norm.weight.data.uniform_(0.5, 1.5)
    return model.eval()


def decoder_input(size: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    if size == "full":
        return torch.randint(0, 8192, (1, 128), generator=g)
    return torch.randint(0, 64, (2, 12), generator=g)
