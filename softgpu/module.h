// Loaded code: a Program decoded once per image, instantiated per context as a Module (its
// global variables allocated in that context's memory), and the CUDA library objects
// (context-independent code that is instantiated lazily in each context that uses it).
#pragma once

#include <cuda.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "softgpu/program.h"

namespace softgpu {

class Context;
class Module;

// Turns an image given to cuModuleLoadData/cuLibraryLoadData (fat-binary wrapper, container,
// PTX text or cubin) into a decoded program. Identical PTX is decoded once per process. Of a fat
// binary's several PTX entries it takes the newest at or below softgpu's compute capability
// that it decodes completely, falling back to older ones, then newer ones (ImagePtx's order).
// Errors: CUDA_ERROR_NO_BINARY_FOR_GPU (no usable PTX; a line on stderr explains why),
// CUDA_ERROR_INVALID_PTX (parse/decode failure, explained on stderr), CUDA_ERROR_INVALID_IMAGE.
// The explanation is also stored in *error when given.
CUresult LoadProgram(const void* image, std::shared_ptr<const Program>* program,
                     std::string* error = nullptr);

// The PTX text an image carries (the one LoadProgram would decode): PTX text itself, or the
// best PTX entry of a fat binary. Same errors as LoadProgram, short of decoding.
CUresult ImagePtx(const void* image, std::string* ptx, std::string* error = nullptr);

// CUfunction: a function of a module instance.
struct FunctionHandle {
  Module* module = nullptr;
  uint32_t index = 0;
  int max_dynamic_shared = 0;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  int preferred_carveout = -1;
  int cache_config = CU_FUNC_CACHE_PREFER_NONE;
  // Cluster attributes set at run time (a shape compiled in with .reqnctapercluster wins).
  uint32_t required_cluster[3] = {0, 0, 0};  // CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_*
  bool non_portable_cluster_size = false;    // CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
  int cluster_scheduling_policy = CU_CLUSTER_SCHEDULING_POLICY_DEFAULT;
};

class Module {
 public:
  // Instantiates `program` in `context`: allocates and initialises its global variables. With
  // `at` (a restore: as many addresses as VariableRanges lists, in its order), each variable's
  // memory is allocated at its address (AddressSpace::AllocateAt): CUDA_ERROR_INVALID_VALUE for a
  // wrong count, CUDA_ERROR_ALREADY_MAPPED when an address is in use, CUDA_ERROR_NOT_SUPPORTED
  // for native __managed__ variables.
  static CUresult Create(Context* context, std::shared_ptr<const Program> program,
                         std::shared_ptr<Module>* out, const std::vector<uint64_t>* at = nullptr);
  ~Module() = default;

  Context* context() const { return context_; }
  const Program& program() const { return *program_; }
  const std::shared_ptr<const Program>& program_ptr() const { return program_; }
  const std::vector<uint64_t>& consts() const { return consts_; }
  // The handle of function `name` (an entry), or null.
  std::shared_ptr<FunctionHandle> Function(const std::string& name) const;
  const std::vector<std::shared_ptr<FunctionHandle>>& functions() const { return functions_; }
  // Device address and size of global `name`; false if there is none.
  bool Global(const std::string& name, uint64_t* address, uint64_t* size) const;
  // Bytes of device memory its global and constant variables hold.
  uint64_t DeviceBytes() const;
  // The device memory its variables occupy, one (base, bytes) range per variable in the
  // program's order (what a checkpoint copies, and where Create's `at` puts them back).
  std::vector<std::pair<uint64_t, uint64_t>> VariableRanges() const;
  // Frees the global variables (module unload).
  void Release();

 private:
  Context* context_ = nullptr;
  std::shared_ptr<const Program> program_;
  std::vector<uint64_t> consts_;
  std::vector<uint64_t> global_addresses_;
  std::vector<uint64_t> global_allocations_;  // what to free (a managed variable's starts lower)
  std::vector<std::shared_ptr<FunctionHandle>> functions_;  // entries only, by function index
  bool released_ = false;
};

class Library;

// CUkernel: a kernel of a library, valid in every context.
struct KernelHandle {
  Library* library = nullptr;
  uint32_t index = 0;
};

class Library {
 public:
  explicit Library(std::shared_ptr<const Program> program);
  const Program& program() const { return *program_; }
  std::shared_ptr<KernelHandle> Kernel(const std::string& name) const;
  const std::vector<std::shared_ptr<KernelHandle>>& kernels() const { return kernels_; }
  // The instance of this library in `context`, created (and registered) on first use.
  CUresult Instance(Context* context, std::shared_ptr<Module>* out);
  // Forgets the instance for `context` (context teardown); returns it.
  std::shared_ptr<Module> DropInstance(Context* context);
  // Forgets every instance (library unload).
  std::vector<std::shared_ptr<Module>> DropAll();

 private:
  std::shared_ptr<const Program> program_;
  std::vector<std::shared_ptr<KernelHandle>> kernels_;
  std::mutex mu_;
  std::unordered_map<Context*, std::shared_ptr<Module>> instances_;
};

}  // namespace softgpu
