// The floor for one GPU call from C++: replaying a CUDA graph and waiting for it, timed on
// the host clock exactly as the reference runner times an Ember execute. Two graphs: an
// empty one, and one holding a single trivial kernel; and that kernel launched without a
// graph, to tell whether a program of one kernel would wait less launched that way.
// bench/run_bench.py builds this with nvcc and runs it.
//
//   graph_replay [ITERATIONS]
//
// Prints, per form: "graph replay us: <name> median M p10 A p90 B n N".
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

__global__ void touch(float* value) { value[0] += 1.0f; }

bool ok(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "error: %s: %s\n", what, cudaGetErrorString(status));
    return false;
  }
  return true;
}

// Times `call` (which enqueues work on `stream`) and a wait for the stream, after 100
// untimed calls, and prints the line above.
template <typename Call>
bool measure_calls(const char* name, Call call, cudaStream_t stream, int iterations) {
  for (int i = 0; i < 100; ++i) {
    call();
    if (!ok(cudaStreamSynchronize(stream), name)) return false;
  }
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    cudaStreamSynchronize(stream);
    const auto stop = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  if (!ok(cudaGetLastError(), name)) return false;
  std::sort(us.begin(), us.end());
  const size_t n = us.size();
  const double median = n % 2 ? us[n / 2] : (us[n / 2 - 1] + us[n / 2]) / 2;
  std::printf("graph replay us: %s median %.2f p10 %.2f p90 %.2f n %zu\n", name, median,
              us[(n - 1) / 10], us[(n - 1) * 9 / 10], n);
  return true;
}

bool measure(const char* name, cudaGraph_t graph, cudaStream_t stream, int iterations) {
  cudaGraphExec_t exec = nullptr;
  if (!ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate")) return false;
  const bool measured =
      measure_calls(name, [&] { cudaGraphLaunch(exec, stream); }, stream, iterations);
  cudaGraphExecDestroy(exec);
  return measured;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1000;
  cudaStream_t stream = nullptr;
  if (!ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;

  cudaGraph_t empty = nullptr;
  if (!ok(cudaGraphCreate(&empty, 0), "cudaGraphCreate") ||
      !measure("empty", empty, stream, iterations)) {
    return 1;
  }

  float* value = nullptr;
  cudaGraph_t one_kernel = nullptr;
  if (!ok(cudaMalloc(&value, sizeof(float)), "cudaMalloc") ||
      !ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture")) {
    return 1;
  }
  touch<<<1, 1, 0, stream>>>(value);
  if (!ok(cudaStreamEndCapture(stream, &one_kernel), "cudaStreamEndCapture") ||
      !measure("one_kernel", one_kernel, stream, iterations) ||
      !measure_calls("one_kernel_direct", [&] { touch<<<1, 1, 0, stream>>>(value); }, stream,
                     iterations)) {
    return 1;
  }
  cudaFree(value);
  return 0;
}
