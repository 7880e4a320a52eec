// CUresult names and human-readable descriptions.
#pragma once

namespace softgpu {

// Sets *name to the enumerator name of `code` ("CUDA_ERROR_INVALID_VALUE"); false if unknown.
bool ErrorName(int code, const char** name);
// Sets *text to a one-line description of `code`; false if unknown.
bool ErrorText(int code, const char** text);

}  // namespace softgpu
