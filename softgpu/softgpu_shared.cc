// libsoftgpu-cuda.so is softgpu_core linked whole; this file only gives the target a source.
