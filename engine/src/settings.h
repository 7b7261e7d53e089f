/* Process-wide settings from the environment, read once (pthread_once) in this one place
 * and never again, so behaviour cannot change under a running program and no other file
 * calls getenv.
 *
 *   EMBER_EXECUTOR=cpu|cuda|auto   forces the executor of every program created after
 *                                  it is read, over ember_program_options.executor.
 *   EMBER_CUDA_GRAPHS=0|1          0: the CUDA executor launches each step on its stream
 *                                  instead of replaying a CUDA graph (default 1). For
 *                                  debugging and measurement.
 *   EMBER_CUDA_WGMMA=0|1           0: convs that take the implicit-GEMM kernel run on its
 *                                  mma.sync form even on a GPU with wgmma (default 1),
 *                                  and EMBER_CUDA_GEMM_WGMMA is off. For testing that
 *                                  form on Hopper, and measurement.
 *   EMBER_CUDA_GEMM_WGMMA=0|1|auto a LINEAR of many rows (float16 or bfloat16, with
 *                                  the activation after it or none) runs as one
 *                                  gemm_wgmma kernel on Hopper instead of a cuBLASLt
 *                                  GEMM (and a kernel for an activation cuBLASLt cannot
 *                                  fuse). auto (the default): in a program that then
 *                                  loads no cuBLASLt, wherever it can (create skips
 *                                  cuBLASLt's load and heuristics: mlp_tanh at batch
 *                                  4096 and the encoder at batch 32 in 19-46 ms instead
 *                                  of 190-230, at 1-4% more time a call); elsewhere with
 *                                  an activation cuBLASLt lacks (GELU's erf form,
 *                                  SIGMOID, TANH, SILU) where its tiles fit in one wave of
 *                                  the GPU's SMs (the MLP's 4096 x 1024 x 1024). 1:
 *                                  wherever it can, 0: never (nor the narrow kernel), for
 *                                  measurement, and for the last percent of speed where
 *                                  create's time does not matter.
 *   EMBER_CUDA_GEMM_NARROW=0|1|auto a LINEAR of few rows (float16 or bfloat16, with any
 *                                  activation after it or none) runs as one narrow GEMM
 *                                  kernel on Hopper (64 outputs by 16-128 rows a block:
 *                                  gemm_wgmma.cu) instead of a cuBLASLt GEMM. auto (the
 *                                  default): where its blocks fit in one wave of the
 *                                  GPU's SMs (the encoder's 128-row LINEARs ran as fast
 *                                  as cuBLASLt's: bench/RESULTS.md). 1: wherever it can,
 *                                  0: never; for measurement. A program whose GEMMs all
 *                                  take it skips cuBLASLt's load and heuristics at create
 *                                  (the encoder at batch 1: 24 ms instead of 216).
 *   EMBER_CUDA_GEMM_CHAIN=0|1      1: LINEARs on gemm_wgmma that read one another's
 *                                  outputs (the MLP's four) run as one persistent chain
 *                                  kernel rather than a kernel each (default 0: on an
 *                                  H100 it ran the MLP at batch 4096 1-2 us slower than
 *                                  the four kernels; bench/RESULTS.md).
 *   EMBER_CUDA_CONV_NHWC_GEMM=0|1  0: convs too small for the implicit-GEMM kernel run as
 *                                  im2col + GEMM in NCHW only, not channels last with
 *                                  the output channels as M (default 1). For measurement.
 *   EMBER_CUDA_CONV_FOLD=0|1       0: a stride-2 conv of at most 4 channels (resnet's
 *                                  stem) does not read its input space-to-depth on the
 *                                  wgmma kernel; it runs as im2col + GEMM (default 1).
 *                                  For measurement.
 *   EMBER_CUDA_CONV_HALO=0|1       0: stride-1 convs of 64·k channels stay on the wgmma
 *                                  implicit GEMM rather than the halo kernel (default 1).
 *                                  For measurement.
 *   EMBER_CUDA_CONV_SPLIT_K=0|1    0: a conv the wgmma kernel could run but with fewer
 *                                  output tiles than it needs to fill the GPU (resnet18
 *                                  at batch 1) runs as im2col + cuBLASLt GEMM, not on
 *                                  that kernel with its K split over blocks (default 1).
 *                                  For measurement.
 *   EMBER_CUDA_BRANCHES=0|1        0: every step of the CUDA graph waits for the one
 *                                  before it (default 1: a conv that shares no written
 *                                  bytes with the conv before it, resnet's downsampling
 *                                  1x1 beside its block's first 3x3, runs beside it).
 *                                  For measurement.
 *   EMBER_CUDA_PDL=0|1|auto        on a GPU of compute capability 9.0 or newer, whether
 *                                  each kernel step that follows a kernel step in the
 *                                  graph is launched under programmatic dependent launch
 *                                  (scheduled while the one before drains; it waits in
 *                                  griddepcontrol.wait for its results before it reads or
 *                                  writes memory). auto (the default): prepare builds the
 *                                  graph both ways, times replays of each and keeps the
 *                                  faster (PDL gains up to 7% on chains of small kernels
 *                                  and costs 2-3% on resnet18's persistent convs, on the
 *                                  H200). 1: always, 0: never; for measurement.
 *   EMBER_CUDA_PROFILE=0|1         1: the CUDA executor times each step of every run with
 *                                  CUDA events (steps launched one by one, no graph) and
 *                                  prints where the time went to stderr when the program
 *                                  is destroyed (default 0).
 *
 * An unrecognized value is not guessed at: program creation reports it (invalid_message). */
#ifndef EMBER_SRC_SETTINGS_H_
#define EMBER_SRC_SETTINGS_H_

#include <stdbool.h>

#include "ember/ember.h"

/* A 0|1|auto variable (EMBER_CUDA_PDL, EMBER_CUDA_GEMM_WGMMA, EMBER_CUDA_GEMM_NARROW). */
typedef enum ember_mode { EMBER_MODE_OFF, EMBER_MODE_ON, EMBER_MODE_AUTO } ember_mode;

typedef struct ember_settings {
  /* Whether EMBER_EXECUTOR was set (to a valid value), and to what. */
  bool executor_forced;
  ember_executor_kind executor;
  bool cuda_graphs;
  bool cuda_wgmma;
  ember_mode cuda_gemm_wgmma;
  ember_mode cuda_gemm_narrow;
  bool cuda_gemm_chain;
  bool cuda_conv_nhwc_gemm;
  bool cuda_conv_fold;
  bool cuda_conv_halo;
  bool cuda_conv_split_k;
  bool cuda_branches;
  ember_mode cuda_pdl;
  bool cuda_profile;
  /* Non-empty when a variable holds a value that means nothing: the error to report. */
  char invalid_message[160];
} ember_settings;

/* The settings, read on first call. Never NULL; valid for the life of the process. */
const ember_settings* ember_settings_get(void);

#endif /* EMBER_SRC_SETTINGS_H_ */
