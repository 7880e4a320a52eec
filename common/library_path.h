// Where a shared library's companions are: the folder of the library that holds some code.
#pragma once

#include <string>

namespace rgpu {

// The path of `file_name` in the folder of the loaded library (or program) that contains
// `anchor`, an address of its code; `file_name` alone (for the loader's search) when that folder
// cannot be found. Thread-safe.
std::string BesideLibraryOf(const void* anchor, const char* file_name);

}  // namespace rgpu
