/* The control of nvcc_checked.cmake (cuda.check_wgmma_advisories): a wgmma under a
 * branch, around which ptxas injects fences and reports it only as infos (here C7519; in
 * the narrow GEMM's first form, C7520: every wgmma of the kernel serialized), so the check
 * must fail this module's build. Never run. */
#include "wgmma.cuh"

extern "C" __global__ void wgmma_in_branch(int n, float* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  float acc[8] = {0};
  const uint64_t a = ember::wgmma_descriptor(0), b = ember::wgmma_descriptor(1024);
  ember::wgmma_fence();
  for (int i = 0; i < n; ++i) {
    if (i < 3) ember::wgmma_mma<__half, 16>(acc, a, b);
  }
  ember::wgmma_commit();
  ember::wgmma_wait_all();
  for (int i = 0; i < 8; ++i) out[i] = acc[i];
#else
  (void)n;
  (void)out;
#endif
}
