/* The CUDA executor (cuda_executor.c; docs/cuda-executor.md describes it whole).
 *
 * prepare does everything that can be done once: loads the driver, and cuBLASLt when the
 * plan has a GEMM (at run time: no link dependency), retains device 0's primary context,
 * creates the program's stream, loads the kernel modules, allocates the arena, the constants, a staging buffer
 * per input and output and the GEMM workspace, uploads the constants, chooses every GEMM
 * algorithm, runs the program once to warm up, and builds and instantiates one CUDA
 * graph of the whole run.
 *
 * run binds each input and output: device memory (the driver says so) of this device,
 * aligned as the GEMMs assume, is used in place; anything else goes through the staging
 * buffer (host memory by a host<->device copy, counted; other device memory by a device
 * copy, not counted). Then it replays the graph, updating only the nodes whose bound
 * pointers changed since the last replay, and waits for the stream. It allocates nothing.
 *
 * A prepare that cannot find what it needs (no driver, no device, no cuBLASLt for a plan
 * with GEMMs, a device the kernels were not built for, a GEMM cuBLASLt cannot do) fails
 * with EMBER_UNAVAILABLE, which EMBER_EXECUTOR_AUTO takes as "use the CPU". */
#ifndef EMBER_SRC_CUDA_CUDA_EXECUTOR_H_
#define EMBER_SRC_CUDA_CUDA_EXECUTOR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "executor.h"

extern const ember_executor_vtable ember_cuda_executor_vtable;

/* What prepare made of a plan and what runs have done to the graph, for tests and
 * debugging (not part of the public API). */
typedef struct ember_cuda_executor_info {
  uint32_t steps;                /* kernel launches and GEMMs per run */
  uint32_t gemms;                /* cuBLASLt GEMMs */
  uint32_t fused_biases;         /* GEMMs whose bias is added in the cuBLASLt epilogue */
  uint32_t fused_activations;    /* activation ops done by a GEMM's epilogue, a gemv kernel or
                                    a binary kernel */
  uint32_t bias_act_kernels;     /* epilogues cuBLASLt could not fuse, done by a kernel */
  uint32_t relocated_tensors;    /* fused activation outputs moved past the plan's arena */
  uint32_t conv_gemms;           /* CONV2D ops run as im2col + GEMM (the rest: direct) */
  uint32_t conv_gemms_flat;      /* of those, run as one GEMM over all images */
  uint32_t conv_gemms_nhwc;      /* of those, run channels last (im2col from channels last,
                                    the output channels as the GEMM's M) */
  uint32_t conv_gemm_chunks;     /* their im2col + GEMM pairs (a conv takes its images a chunk
                                    at a time when their col would not stay in L2) */
  uint32_t conv_igemms;          /* CONV2D ops run as the implicit-GEMM tensor-core kernel */
  uint32_t conv_wgmmas;          /* of those, on its wgmma (Hopper) variant */
  uint32_t conv_folds;           /* of those, reading their input packed space-to-depth (a
                                    stride-2 conv of at most 4 channels: resnet's stem) */
  uint32_t conv_fold_rows;       /* of those, packed rows of its output at a time through
                                    shared memory (1 or 3 channels: an image's) */
  uint32_t conv_halos;           /* of those, on the halo kernel (stride 1, channels a
                                    multiple of 64: conv_halo.cu) */
  uint32_t conv_halo_units;      /* of those, on its resident-weights form (64 channels in
                                    and out: ember_conv_halo_units<n>) */
  uint32_t conv_halo_stacked;    /* of those, with whole images stacked in a strip */
  uint32_t conv_splits;          /* of those, with too few tiles for the wgmma kernel and K
                                    split over its blocks, their sums added by a second
                                    kernel (ember_conv_split_sum) */
  uint32_t conv_halo_kernels;    /* the halo kernels they ran on: bit w for the streaming
                                    form's width index w (EMBER_K_CONV_HALO_WIDTHS), bit 8 +
                                    2·w + c16 for the resident-weights form's */
  bool conv_halo;                /* this executor takes the halo kernel (compute capability 9.0,
                                    EMBER_CUDA_WGMMA and EMBER_CUDA_CONV_HALO not 0) */
  bool conv_wgmma;               /* this executor takes that variant (compute capability 9.0,
                                    EMBER_CUDA_WGMMA not 0) */
  bool conv_split_k;             /* it also takes convs of too few tiles for it, splitting K
                                    where they have enough (EMBER_CUDA_CONV_SPLIT_K not 0),
                                    rather than im2col + cuBLASLt GEMM */
  uint32_t fused_residuals;      /* ADDs of a conv's output and a residual done by that kernel */
  uint32_t conv_packs;           /* NCHW -> channels-last copies of those convs' inputs */
  uint32_t channels_last_tensors; /* tensors kept channels last between them: no copy */
  uint32_t pools_channels_last;   /* MAX_POOL2Ds between such tensors (a stem's max pool),
                                     reading and writing channels last */
  uint32_t pools_in_conv;         /* of those, done in the epilogue of the halo conv before
                                     them (resnet's stem) */
  uint32_t pools_shared_rows;     /* of the others, 3 x 3 ones with their input rows in
                                     shared memory (a block an output row) */
  uint32_t reduce_columns;        /* REDUCEs whose outputs are contiguous columns of x (a
                                     channels-last global average pool), 32 a block */
  uint32_t reduce_column_vectors; /* of those, 16 bytes of columns a lane (32·16 bytes a
                                     block) */
  uint32_t norm_adds;             /* ADDs done by the LAYER_NORM right after them */
  uint32_t gemv_kernels;         /* LINEAR ops of few rows run as the gemv kernel, not cuBLASLt */
  uint32_t gemm_wgmmas;          /* LINEAR ops run (with the activation after them, if any)
                                    on the gemm_wgmma kernel */
  uint32_t gemm_wgmmas_small;    /* of those, in tiles of EMBER_K_GEMM_WGMMA_BN_SMALL columns */
  bool gemm_wgmma;               /* this executor uses that kernel (compute capability 9.0,
                                    EMBER_CUDA_GEMM_WGMMA=1, EMBER_CUDA_WGMMA not 0) */
  uint32_t gemm_narrows;         /* LINEAR ops of few rows run on the narrow GEMM kernel (with
                                    the activation after them, if any) */
  uint32_t gemm_chains;          /* runs of gemm_wgmma LINEARs, each reading the one before's
                                    output, merged into one chain kernel each */
  uint32_t gemm_chain_layers;    /* the LINEARs in those */
  bool gemm_narrow;              /* this executor uses that kernel (compute capability 9.0,
                                    EMBER_CUDA_GEMM_NARROW not 0, EMBER_CUDA_WGMMA not 0) */
  uint32_t sdpa_flash;           /* SDPA ops run as the tensor-core flash kernel */
  uint32_t folded_layout_ops;    /* layout copies (PERMUTE, SLICE, RESHAPE) around those SDPAs
                                    folded into the kernel's strides: no step */
  bool cublaslt;                 /* the program has a cuBLASLt handle (it has GEMMs) */
  uint32_t heuristic_cache_hits; /* GEMM heuristic questions the process's cache answered */
  uint32_t heuristic_cache_misses; /* those cuBLASLt answered (then cached) */
  uint32_t gemm_candidates_timed; /* algorithms the GEMM search timed at prepare */
  bool graph;                    /* runs replay a CUDA graph */
  bool pdl;                      /* its kernel-to-kernel edges are programmatic
                                    (compute capability 9.0 or newer; EMBER_CUDA_PDL=1,
                                    or auto and faster) */
  uint32_t programmatic_edges;   /* how many such edges the graph has */
  uint32_t beside_steps;         /* steps the graph runs beside the step before them, with
                                    no edge between the two (EMBER_CUDA_BRANCHES: resnet's
                                    downsampling conv beside its block's first) */
  bool pdl_timed;                /* EMBER_CUDA_PDL=auto timed the graph with and without
                                    them at prepare (a graph with such edges to time) */
  float pdl_off_us, pdl_on_us;   /* then the median replay of each, in microseconds */
  uint64_t graph_node_updates;   /* graph nodes updated for changed bound pointers */
  uint64_t graph_rebuilds;       /* whole-graph rebuilds (an update the driver refused) */
  size_t workspace_bytes;        /* GEMM workspace */
} ember_cuda_executor_info;

/* Fills `out_info` for a CUDA executor (one whose kind is EMBER_EXECUTOR_CUDA). Call it
 * under the program's run mutex, or when no run is in flight. */
void ember_cuda_executor_get_info(const ember_executor* executor,
                                  ember_cuda_executor_info* out_info);

#endif /* EMBER_SRC_CUDA_CUDA_EXECUTOR_H_ */
