#include "common/library_path.h"

#include <dlfcn.h>

namespace rgpu {

std::string BesideLibraryOf(const void* anchor, const char* file_name) {
  Dl_info info;
  if (dladdr(anchor, &info) != 0 && info.dli_fname != nullptr) {
    const std::string path = info.dli_fname;
    const size_t slash = path.rfind('/');
    if (slash != std::string::npos) return path.substr(0, slash + 1) + file_name;
  }
  return file_name;
}

}  // namespace rgpu
