// The JIT linker's driver API: cuLinkCreate, cuLinkAddData, cuLinkAddFile, cuLinkComplete,
// cuLinkDestroy. Inputs are PTX text or fat binaries (their PTX); the output is the linked PTX
// (softgpu/ptx_link.h), which cuModuleLoadData loads like any PTX. Cubins, objects, libraries and
// NVVM IR are refused (the software GPU runs PTX only). Log buffers and CU_JIT_WALL_TIME given to
// cuLinkCreate receive the link's messages and time when it completes or an input is refused.
#include <cuda.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "softgpu/api_util.h"
#include "softgpu/module.h"
#include "softgpu/ptx_decoder.h"
#include "softgpu/ptx_link.h"
#include "softgpu/ptx_parser.h"
#include "softgpu/program.h"

// The driver's opaque link-state type, defined by softgpu.
struct CUlinkState_st {
  std::vector<std::string> inputs;  // PTX texts
  std::string output;               // the linked image, valid until cuLinkDestroy
  // The program's options, written back as the driver does (they must outlive the state).
  unsigned num_options = 0;
  CUjit_option* options = nullptr;
  void** values = nullptr;
  std::vector<size_t> capacities;  // each option's value at creation (log sizes are overwritten)
  double seconds = 0;              // spent linking
};

namespace softgpu {
namespace {

std::mutex g_links_mu;
std::set<CUlinkState>& Links() {
  static auto* links = new std::set<CUlinkState>();  // never destroyed: used until exit
  return *links;
}

bool Live(CUlinkState state) {
  std::lock_guard lock(g_links_mu);
  return Links().count(state) != 0;
}

// Writes `text` into the log buffer option `buffer_option` names (with its size option), and
// the bytes written (with the NUL) into the size option's value, as the driver does.
void WriteLog(CUlinkState s, CUjit_option buffer_option, CUjit_option size_option,
              const std::string& text) {
  for (unsigned i = 0; i < s->num_options; ++i) {
    if (s->options[i] != buffer_option) continue;
    for (unsigned k = 0; k < s->num_options; ++k) {
      if (s->options[k] != size_option) continue;
      const size_t capacity = s->capacities[k];
      char* buffer = static_cast<char*>(s->values[i]);
      if (buffer == nullptr || capacity == 0) return;
      const size_t n = std::min(text.size(), capacity - 1);
      memcpy(buffer, text.data(), n);
      buffer[n] = '\0';
      s->values[k] = reinterpret_cast<void*>(static_cast<uintptr_t>(n + 1));
      return;
    }
  }
}

void Report(CUlinkState s, const std::string& error, const std::string& info) {
  WriteLog(s, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, error);
  WriteLog(s, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, info);
  for (unsigned i = 0; i < s->num_options; ++i) {
    if (s->options[i] != CU_JIT_WALL_TIME) continue;
    const float ms = static_cast<float>(s->seconds * 1000.0);
    memcpy(&s->values[i], &ms, sizeof ms);  // the value slot holds the float itself
  }
}

// Adds one input: its PTX, checked to parse (so a bad input is refused here, as the driver's
// compiler refuses it when it is added).
CUresult AddInput(CUlinkState state, CUjitInputType type, const void* data, size_t size,
                  const char* name) {
  if (data == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  const std::string label = name != nullptr && *name != '\0' ? name : "input";
  std::string ptx;
  switch (type) {
    case CU_JIT_INPUT_PTX: {
      const char* text = static_cast<const char*>(data);
      ptx.assign(text, strnlen(text, size));
      break;
    }
    case CU_JIT_INPUT_FATBINARY: {
      std::string error;
      if (CUresult r = ImagePtx(data, &ptx, &error); r != CUDA_SUCCESS) {
        Report(state, label + ": " + error, "");
        return r;
      }
      break;
    }
    case CU_JIT_INPUT_CUBIN:
    case CU_JIT_INPUT_OBJECT:
    case CU_JIT_INPUT_LIBRARY:
      Report(state, label + ": the software GPU links PTX only (no SASS inputs)", "");
      return CUDA_ERROR_NO_BINARY_FOR_GPU;
    default:
      Report(state, label + ": input type " + std::to_string(type) + " is not supported", "");
      return CUDA_ERROR_NOT_SUPPORTED;
  }
  ptx::Module parsed;
  if (rgpu::Status s = ptx::ParseModule(ptx, &parsed); !s.ok()) {
    Report(state, label + ": " + s.message(), "");
    return CUDA_ERROR_INVALID_PTX;
  }
  state->inputs.push_back(std::move(ptx));
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace softgpu

using softgpu::Guard;

extern "C" {

SOFTGPU_EXPORT CUresult CUDAAPI cuLinkCreate_v2(unsigned int numOptions, CUjit_option* options,
                                                void** optionValues, CUlinkState* stateOut) {
  return Guard([&] {
    if (CUresult r = softgpu::CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (stateOut == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (numOptions != 0 && (options == nullptr || optionValues == nullptr)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    std::shared_ptr<softgpu::Context> ctx;
    if (CUresult r = softgpu::CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
    auto* state = new CUlinkState_st;
    state->num_options = numOptions;
    state->options = options;
    state->values = optionValues;
    for (unsigned i = 0; i < numOptions; ++i) {
      state->capacities.push_back(reinterpret_cast<uintptr_t>(optionValues[i]));
    }
    std::lock_guard lock(softgpu::g_links_mu);
    softgpu::Links().insert(state);
    *stateOut = state;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void* data,
                                                 size_t size, const char* name, unsigned int,
                                                 CUjit_option*, void**) {
  return Guard([&] {
    if (!softgpu::Live(state)) return CUDA_ERROR_INVALID_HANDLE;
    return softgpu::AddInput(state, type, data, size, name);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState state, CUjitInputType type,
                                                 const char* path, unsigned int, CUjit_option*,
                                                 void**) {
  return Guard([&] {
    if (!softgpu::Live(state)) return CUDA_ERROR_INVALID_HANDLE;
    if (path == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::ifstream file(path, std::ios::binary);
    if (!file) return CUDA_ERROR_FILE_NOT_FOUND;
    std::stringstream contents;
    contents << file.rdbuf();
    std::string data = contents.str();
    data.push_back('\0');
    return softgpu::AddInput(state, type, data.data(), data.size(), path);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuLinkComplete(CUlinkState state, void** cubinOut,
                                               size_t* sizeOut) {
  return Guard([&] {
    if (!softgpu::Live(state)) return CUDA_ERROR_INVALID_HANDLE;
    if (cubinOut == nullptr || sizeOut == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (state->inputs.empty()) {
      softgpu::Report(state, "nothing to link", "");
      return CUDA_ERROR_INVALID_VALUE;
    }
    const auto start = std::chrono::steady_clock::now();
    std::string linked;
    rgpu::Status s = softgpu::LinkPtx(state->inputs, &linked);
    if (s.ok()) {
      // The result must be a program the software GPU can load.
      softgpu::Program program;
      s = softgpu::CompilePtx(linked, &program);
    }
    state->seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!s.ok()) {
      softgpu::Report(state, "link failed: " + s.message(), "");
      return CUDA_ERROR_INVALID_PTX;
    }
    state->output = std::move(linked);
    softgpu::Report(state, "",
                    "softgpu: linked " + std::to_string(state->inputs.size()) + " input(s) into " +
                        std::to_string(state->output.size()) + " bytes of PTX");
    *cubinOut = state->output.data();
    *sizeOut = state->output.size() + 1;  // with its NUL
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuLinkDestroy(CUlinkState state) {
  return Guard([&] {
    {
      std::lock_guard lock(softgpu::g_links_mu);
      if (softgpu::Links().erase(state) == 0) return CUDA_ERROR_INVALID_HANDLE;
    }
    delete state;
    return CUDA_SUCCESS;
  });
}

}  // extern "C"
