// cuModuleGetLoadingMode honours CUDA_MODULE_LOADING: argv[1] is the mode the environment asks
// for (EAGER or LAZY) and the driver must report exactly that.
#include <cstring>

#include "check.h"

int main(int argc, char** argv) {
  CHECK(cuInit(0));
  CUmoduleLoadingMode mode;
  CHECK(cuModuleGetLoadingMode(&mode));
  const bool eager = argc > 1 && strcmp(argv[1], "EAGER") == 0;
  EXPECT_TRUE(mode == (eager ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING));
  printf("loading_mode: %s as asked\n", eager ? "eager" : "lazy");
  return 0;
}
