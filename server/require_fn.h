// REQUIRE_FN(fn), for Session's handlers (server/session_*.cc): fails the call with
// CUDA_ERROR_NOT_SUPPORTED, naming the entry point in cs.detail, when the backend library lacks
// driver entry point `fn` (server/driver_api.def marks which ones a backend may lack).
#pragma once

#define REQUIRE_FN(fn)                  \
  do {                                  \
    if (drv_.fn == nullptr) {           \
      cs.detail = "backend lacks " #fn; \
      return CUDA_ERROR_NOT_SUPPORTED;  \
    }                                   \
  } while (0)
