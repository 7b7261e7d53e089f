// reference_runner: runs a .pte through ExecuTorch's Module API from C++, with Ember
// linked through its CMake package and nothing else (no header of ours: linking
// ember::executorch_backend registers EmberBackend when the program starts).
//
//   reference_runner MODEL.pte [--method forward] [--iterations N] [--inputs FILE]
//                    [--outputs FILE] [--device-resident] [--expect-no-host-device-copies]
//
// --device-resident (builds with the CUDA toolkit only): for a program exported to keep
// its method inputs and outputs on the GPU (examples/export_device_resident.py), this
// runner owns device buffers for every input and output, as an application would: it
// uploads the inputs once, binds the buffers with Device{CUDA, 0} tensors (outputs through
// Module::set_output), and downloads the outputs after the timed iterations.
//
// Input dtypes and shapes come from the method's metadata. Inputs are read from FILE (the
// raw bytes of every input, concatenated in order) or filled with a fixed pattern. The
// outputs of the last iteration are printed (shape, dtype, first values) and, with
// --outputs, written as raw bytes in the same layout, so a script can compare them with
// PyTorch. The median execute time over the iterations is printed.
//
// Copies between host and device over the timed iterations are read from EmberBackend's
// counters through ExecuTorch's get_option (no Ember header): what Ember's engine copied
// to stage host-bound inputs and outputs, and what ExecuTorch copied through the CUDA
// device allocator (its et_copy boundary operators). They are printed per execute, and
// --expect-no-host-device-copies makes any non-zero count an error (exit 3).
//
// Any ExecuTorch error is printed with its code, and the exit status is non-zero.

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <variant>
#include <vector>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/platform/runtime.h>

#if defined(EMBER_RUNNER_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace {

using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::extension::Module;
using executorch::extension::TensorPtr;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::MethodMeta;
using executorch::runtime::Tag;

constexpr const char kEmberBackend[] = "EmberBackend";

struct Options {
  std::string model;
  std::string method = "forward";
  long iterations = 10;
  std::string inputs;
  std::string outputs;
  bool device_resident = false;
  bool expect_no_copies = false;
};

void usage() {
  std::cerr << "usage: reference_runner MODEL.pte [--method forward] [--iterations N]\n"
               "                        [--inputs FILE] [--outputs FILE] [--device-resident]\n"
               "                        [--expect-no-host-device-copies]\n";
}

bool parse_options(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "-h" || arg == "--help") {
      return false;
    } else if (arg == "--method" && has_value) {
      options->method = argv[++i];
    } else if (arg == "--iterations" && has_value) {
      char* end = nullptr;
      options->iterations = std::strtol(argv[++i], &end, 10);
      if (end == nullptr || *end != '\0' || options->iterations < 1) {
        std::cerr << "error: --iterations takes a positive integer\n";
        return false;
      }
    } else if (arg == "--inputs" && has_value) {
      options->inputs = argv[++i];
    } else if (arg == "--outputs" && has_value) {
      options->outputs = argv[++i];
    } else if (arg == "--device-resident") {
#if defined(EMBER_RUNNER_WITH_CUDA)
      options->device_resident = true;
#else
      std::cerr << "error: --device-resident needs a runner built with the CUDA toolkit "
                   "(CMake found no CUDAToolkit when this one was configured)\n";
      return false;
#endif
    } else if (arg == "--expect-no-host-device-copies") {
      options->expect_no_copies = true;
    } else if (!arg.empty() && arg[0] != '-' && options->model.empty()) {
      options->model = arg;
    } else {
      std::cerr << "error: unexpected argument '" << arg << "'\n";
      return false;
    }
  }
  if (options->model.empty()) {
    std::cerr << "error: no model given\n";
    return false;
  }
  return true;
}

// "ExecuTorch error 0x12 (InvalidArgument)"
std::string describe(Error error) {
  char buffer[96];
  std::snprintf(buffer, sizeof(buffer), "ExecuTorch error 0x%x (%s)",
                static_cast<unsigned>(error), executorch::runtime::to_string(error));
  return buffer;
}

int fail(const std::string& what, Error error) {
  std::cerr << "error: " << what << " failed: " << describe(error) << "\n";
  return 1;
}

std::string shape_string(const std::vector<SizesType>& sizes) {
  std::string text = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(sizes[i]);
  }
  return text + "]";
}

// A deterministic pattern: floats in [-1, 1), small non-negative integers, alternating
// booleans. The same generator is cheap to reproduce in Python if needed.
void fill_pattern(ScalarType type, size_t index, void* data, size_t numel) {
  uint32_t state = 0x9E3779B9u ^ static_cast<uint32_t>(index * 0x85EBCA6Bu);
  auto next_unit = [&state]() {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  };
  for (size_t i = 0; i < numel; ++i) {
    switch (type) {
      case ScalarType::Float:
        static_cast<float*>(data)[i] = next_unit();
        break;
      case ScalarType::Double:
        static_cast<double*>(data)[i] = next_unit();
        break;
      case ScalarType::Half:
        static_cast<executorch::aten::Half*>(data)[i] = executorch::aten::Half(next_unit());
        break;
      case ScalarType::BFloat16:
        static_cast<executorch::aten::BFloat16*>(data)[i] =
            executorch::aten::BFloat16(next_unit());
        break;
      case ScalarType::Long:
        static_cast<int64_t*>(data)[i] = static_cast<int64_t>(i % 4);
        break;
      case ScalarType::Int:
        static_cast<int32_t*>(data)[i] = static_cast<int32_t>(i % 4);
        break;
      case ScalarType::Short:
        static_cast<int16_t*>(data)[i] = static_cast<int16_t>(i % 4);
        break;
      case ScalarType::Char:
        static_cast<int8_t*>(data)[i] = static_cast<int8_t>(i % 4);
        break;
      case ScalarType::Byte:
        static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(i % 4);
        break;
      case ScalarType::Bool:
        static_cast<bool*>(data)[i] = (i % 2) == 0;
        break;
      default:
        return;  // rejected before we get here
    }
  }
}

bool pattern_supported(ScalarType type) {
  switch (type) {
    case ScalarType::Float:
    case ScalarType::Double:
    case ScalarType::Half:
    case ScalarType::BFloat16:
    case ScalarType::Long:
    case ScalarType::Int:
    case ScalarType::Short:
    case ScalarType::Char:
    case ScalarType::Byte:
    case ScalarType::Bool:
      return true;
    default:
      return false;
  }
}

double element_as_double(ScalarType type, const void* data, size_t i) {
  switch (type) {
    case ScalarType::Float:
      return static_cast<const float*>(data)[i];
    case ScalarType::Double:
      return static_cast<const double*>(data)[i];
    case ScalarType::Half:
      return static_cast<float>(static_cast<const executorch::aten::Half*>(data)[i]);
    case ScalarType::BFloat16:
      return static_cast<float>(static_cast<const executorch::aten::BFloat16*>(data)[i]);
    case ScalarType::Long:
      return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case ScalarType::Int:
      return static_cast<const int32_t*>(data)[i];
    case ScalarType::Short:
      return static_cast<const int16_t*>(data)[i];
    case ScalarType::Char:
      return static_cast<const int8_t*>(data)[i];
    case ScalarType::Byte:
      return static_cast<const uint8_t*>(data)[i];
    case ScalarType::Bool:
      return static_cast<const bool*>(data)[i] ? 1.0 : 0.0;
    default:
      return 0.0;
  }
}

bool read_file(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return false;
  }
  out->assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  return !file.bad();
}

void print_registered_backends() {
  const size_t count = executorch::runtime::get_num_registered_backends();
  std::cout << "registered backends:";
  for (size_t i = 0; i < count; ++i) {
    const auto name = executorch::runtime::get_backend_name(i);
    std::cout << (i == 0 ? " " : ", ") << (name.ok() ? name.get() : "?");
  }
  std::cout << "\n";
}

// EmberBackend's counters (see delegate/ember_backend.cpp), read through ExecuTorch's
// backend options. Values are decimal strings; a key the backend does not fill stays "".
constexpr const char* kCounterKeys[] = {
    "ember.bytes_host_to_device",
    "ember.bytes_device_to_host",
    "device_allocator.bytes_host_to_device",
    "device_allocator.bytes_device_to_host",
    "ember.runs",
};
constexpr size_t kNumCounters = sizeof(kCounterKeys) / sizeof(kCounterKeys[0]);

struct Counters {
  bool ok = false;
  std::string allocator;  // who serves ExecuTorch's CUDA device allocator
  uint64_t values[kNumCounters] = {};
};

Counters read_counters() {
  using executorch::runtime::BackendOption;
  using executorch::runtime::kMaxOptionValueLength;
  BackendOption options[kNumCounters + 1];
  for (size_t i = 0; i <= kNumCounters; ++i) {
    const char* key = i < kNumCounters ? kCounterKeys[i] : "device_allocator";
    std::snprintf(options[i].key, sizeof(options[i].key), "%s", key);
    options[i].value = std::array<char, kMaxOptionValueLength>{};
  }
  Counters counters;
  const Error error = executorch::runtime::get_option(
      kEmberBackend, executorch::runtime::Span<BackendOption>(options, kNumCounters + 1));
  if (error != Error::Ok) {
    return counters;
  }
  counters.ok = true;
  for (size_t i = 0; i <= kNumCounters; ++i) {
    const auto* text = std::get_if<std::array<char, kMaxOptionValueLength>>(&options[i].value);
    if (text == nullptr || (*text)[0] == '\0') {
      counters.ok = false;
      continue;
    }
    if (i == kNumCounters) {
      counters.allocator = text->data();
    } else {
      counters.values[i] = std::strtoull(text->data(), nullptr, 10);
    }
  }
  return counters;
}

#if defined(EMBER_RUNNER_WITH_CUDA)
// Device memory the runner owns for the whole run, freed at exit.
struct DeviceBuffers {
  std::vector<void*> pointers;
  ~DeviceBuffers() {
    for (void* pointer : pointers) {
      cudaFree(pointer);
    }
  }
  void* allocate(size_t nbytes) {
    void* pointer = nullptr;
    if (cudaMalloc(&pointer, std::max<size_t>(nbytes, 1)) != cudaSuccess) {
      return nullptr;
    }
    pointers.push_back(pointer);
    return pointer;
  }
};

bool cuda_ok(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    std::cerr << "error: " << what << ": " << cudaGetErrorString(status) << "\n";
    return false;
  }
  return true;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse_options(argc, argv, &options)) {
    usage();
    return 2;
  }

  executorch::runtime::runtime_init();
  print_registered_backends();
  // The point of this runner: linking ember::executorch_backend alone must register it.
  if (executorch::runtime::get_backend_class(kEmberBackend) == nullptr) {
    std::cerr << "error: " << kEmberBackend
              << " is not registered; was libexecutorch_backend_ember.so linked with "
                 "ember::executorch_backend (which keeps it with --no-as-needed)?\n";
    return 1;
  }

  Module module(options.model, Module::LoadMode::Mmap);
  if (const Error error = module.load(); error != Error::Ok) {
    return fail("loading " + options.model, error);
  }
  const auto meta = module.method_meta(options.method);
  if (!meta.ok()) {
    return fail("reading the metadata of method '" + options.method + "'", meta.error());
  }
  // Loading here rather than inside the first execute keeps init errors (a bad plan, a
  // missing device) apart from execute errors and out of the timings.
#if defined(EMBER_RUNNER_WITH_CUDA)
  // An application that keeps its tensors on the GPU has its CUDA context before it loads
  // a model; creating it here keeps that one-time cost out of the load_method time.
  if (options.device_resident && !cuda_ok(cudaFree(nullptr), "initializing CUDA")) {
    return 1;
  }
#endif
  const auto load_start = std::chrono::steady_clock::now();
  if (const Error error = module.load_method(options.method); error != Error::Ok) {
    return fail("loading method '" + options.method + "'", error);
  }
  // init of every delegate (for Ember: plan checks, device memory, constants uploaded,
  // GEMM algorithms chosen, one warm-up run, the CUDA graph built).
  std::printf("load_method ms: %.3f\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                        load_start)
                  .count());

  // Inputs: dtype and shape from the metadata.
  std::vector<uint8_t> input_file;
  if (!options.inputs.empty() && !read_file(options.inputs, &input_file)) {
    std::cerr << "error: cannot read " << options.inputs << "\n";
    return 1;
  }
  size_t input_offset = 0;
#if defined(EMBER_RUNNER_WITH_CUDA)
  DeviceBuffers device_buffers;
#endif
  std::vector<std::vector<uint8_t>> input_storage(meta->num_inputs());
  std::vector<TensorPtr> input_tensors;
  std::vector<EValue> inputs;
  for (size_t i = 0; i < meta->num_inputs(); ++i) {
    const auto tag = meta->input_tag(i);
    if (!tag.ok()) {
      return fail("reading input " + std::to_string(i) + "'s kind", tag.error());
    }
    if (tag.get() != Tag::Tensor) {
      std::cerr << "error: input " << i << " is not a tensor (tag "
                << static_cast<unsigned>(tag.get()) << "); this runner feeds tensors only\n";
      return 1;
    }
    const auto tensor_meta = meta->input_tensor_meta(i);
    if (!tensor_meta.ok()) {
      return fail("reading input " + std::to_string(i) + "'s metadata", tensor_meta.error());
    }
    const ScalarType type = tensor_meta->scalar_type();
    const auto sizes_span = tensor_meta->sizes();
    std::vector<SizesType> sizes(sizes_span.begin(), sizes_span.end());
    const size_t nbytes = tensor_meta->nbytes();
    const size_t element_size = executorch::runtime::elementSize(type);
    const size_t numel = element_size == 0 ? 0 : nbytes / element_size;

    std::vector<uint8_t>& storage = input_storage[i];
    storage.resize(std::max<size_t>(nbytes, 1));
    if (!options.inputs.empty()) {
      if (input_file.size() - input_offset < nbytes) {
        std::cerr << "error: " << options.inputs << " holds " << input_file.size()
                  << " bytes; input " << i << " needs bytes " << input_offset << ".."
                  << input_offset + nbytes << "\n";
        return 1;
      }
      std::memcpy(storage.data(), input_file.data() + input_offset, nbytes);
      input_offset += nbytes;
    } else if (pattern_supported(type)) {
      fill_pattern(type, i, storage.data(), numel);
    } else {
      std::cerr << "error: input " << i << " has dtype "
                << executorch::runtime::toString(type)
                << ", which this runner cannot fill; pass --inputs\n";
      return 1;
    }
    std::cout << "input " << i << ": " << executorch::runtime::toString(type) << " "
              << shape_string(sizes) << (options.device_resident ? " on cuda:0" : "") << "\n";
#if defined(EMBER_RUNNER_WITH_CUDA)
    if (options.device_resident) {
      void* device = device_buffers.allocate(nbytes);
      if (device == nullptr ||
          !cuda_ok(cudaMemcpy(device, storage.data(), nbytes, cudaMemcpyHostToDevice),
                   "uploading input " + std::to_string(i))) {
        std::cerr << "error: could not place input " << i << " in device memory\n";
        return 1;
      }
      input_tensors.push_back(executorch::extension::make_tensor_ptr(
          sizes, device, type, executorch::aten::Device(executorch::aten::DeviceType::CUDA, 0)));
      inputs.emplace_back(input_tensors.back());
      continue;
    }
#endif
    input_tensors.push_back(executorch::extension::from_blob(storage.data(), sizes, type));
    inputs.emplace_back(input_tensors.back());
  }
  if (!options.inputs.empty() && input_offset != input_file.size()) {
    std::cerr << "error: " << options.inputs << " holds " << input_file.size()
              << " bytes; the method's inputs take " << input_offset << "\n";
    return 1;
  }

#if defined(EMBER_RUNNER_WITH_CUDA)
  // Outputs: the caller's device buffers, bound once.
  std::vector<TensorPtr> output_tensors;
  if (options.device_resident) {
    for (size_t i = 0; i < meta->num_outputs(); ++i) {
      const auto tensor_meta = meta->output_tensor_meta(i);
      if (!tensor_meta.ok()) {
        return fail("reading output " + std::to_string(i) + "'s metadata", tensor_meta.error());
      }
      const auto sizes_span = tensor_meta->sizes();
      std::vector<SizesType> sizes(sizes_span.begin(), sizes_span.end());
      void* device = device_buffers.allocate(tensor_meta->nbytes());
      if (device == nullptr) {
        std::cerr << "error: could not allocate device memory for output " << i << "\n";
        return 1;
      }
      output_tensors.push_back(executorch::extension::make_tensor_ptr(
          sizes, device, tensor_meta->scalar_type(),
          executorch::aten::Device(executorch::aten::DeviceType::CUDA, 0)));
      if (const Error error = module.set_output(options.method, output_tensors.back(), i);
          error != Error::Ok) {
        return fail("binding device output " + std::to_string(i), error);
      }
    }
  }
#endif

  // Run.
  const Counters before = read_counters();
  std::vector<double> milliseconds;
  std::vector<EValue> outputs;
  for (long iteration = 0; iteration < options.iterations; ++iteration) {
    const auto start = std::chrono::steady_clock::now();
    auto result = module.execute(options.method, inputs);
    const auto stop = std::chrono::steady_clock::now();
    if (!result.ok()) {
      return fail("executing method '" + options.method + "' (iteration " +
                      std::to_string(iteration) + ")",
                  result.error());
    }
    milliseconds.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    outputs = std::move(result.get());
  }
  const Counters after = read_counters();
  bool copies_seen = false;
  if (before.ok && after.ok) {
    const auto per_execute = [&](size_t i) {
      return static_cast<double>(after.values[i] - before.values[i]) /
             static_cast<double>(options.iterations);
    };
    for (size_t i = 0; i < 4; ++i) {
      copies_seen = copies_seen || after.values[i] != before.values[i];
    }
    std::printf("device allocator: %s\n", after.allocator.c_str());
    std::printf("host<->device bytes per execute: ember h2d %.0f d2h %.0f; "
                "device allocator h2d %.0f d2h %.0f (%llu ember delegate runs over %ld executes)\n",
                per_execute(0), per_execute(1), per_execute(2), per_execute(3),
                static_cast<unsigned long long>(after.values[4] - before.values[4]),
                options.iterations);
  } else {
    std::printf("host<->device bytes per execute: unknown (EmberBackend's counters could not be "
                "read)\n");
  }

  // Report and write the outputs of the last iteration.
  std::ofstream output_file;
  if (!options.outputs.empty()) {
    output_file.open(options.outputs, std::ios::binary | std::ios::trunc);
    if (!output_file) {
      std::cerr << "error: cannot write " << options.outputs << "\n";
      return 1;
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const EValue& value = outputs[i];
    if (!value.isTensor()) {
      std::cout << "output " << i << ": not a tensor (tag "
                << static_cast<unsigned>(value.tag) << "), not written\n";
      continue;
    }
    const auto& tensor = value.toTensor();
    const void* host_data = tensor.const_data_ptr();
    std::vector<uint8_t> downloaded;
#if defined(EMBER_RUNNER_WITH_CUDA)
    if (tensor.device_type() == executorch::aten::DeviceType::CUDA) {
      downloaded.resize(tensor.nbytes());
      if (!cuda_ok(cudaMemcpy(downloaded.data(), host_data, tensor.nbytes(),
                              cudaMemcpyDeviceToHost),
                   "downloading output " + std::to_string(i))) {
        return 1;
      }
      host_data = downloaded.data();
    }
#endif
    const auto sizes_ref = tensor.sizes();
    const std::vector<SizesType> sizes(sizes_ref.begin(), sizes_ref.end());
    const size_t numel = static_cast<size_t>(tensor.numel());
    std::cout << "output " << i << ": " << executorch::runtime::toString(tensor.scalar_type())
              << " " << shape_string(sizes) << " first values:";
    for (size_t k = 0; k < std::min<size_t>(numel, 8); ++k) {
      std::printf(" %.6g", element_as_double(tensor.scalar_type(), host_data, k));
    }
    std::cout << (numel > 8 ? " ..." : "") << std::endl;
    if (output_file.is_open()) {
      output_file.write(static_cast<const char*>(host_data),
                        static_cast<std::streamsize>(tensor.nbytes()));
    }
  }
  if (output_file.is_open()) {
    output_file.close();
    if (!output_file) {
      std::cerr << "error: writing " << options.outputs << " failed\n";
      return 1;
    }
  }

  std::vector<double> sorted = milliseconds;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
  std::printf("median execute time: %.4g ms over %zu iterations\n", median, n);
  // The same in microseconds with the spread, for benchmarks to parse.
  const auto at = [&](double q) { return sorted[static_cast<size_t>(q * static_cast<double>(n - 1))]; };
  std::printf("execute us: median %.2f p10 %.2f p90 %.2f min %.2f n %zu\n", median * 1e3,
              at(0.1) * 1e3, at(0.9) * 1e3, sorted.front() * 1e3, n);
  if (options.expect_no_copies && (copies_seen || !before.ok || !after.ok)) {
    std::fprintf(stderr, "error: --expect-no-host-device-copies: %s\n",
                 copies_seen ? "the executes copied between host and device"
                             : "EmberBackend's counters could not be read");
    return 3;
  }
  return 0;
}
