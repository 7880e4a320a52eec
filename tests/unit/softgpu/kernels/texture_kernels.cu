// Texture and surface kernels run by texture_test.cc. Compiled to PTX (compute_75) at build time.
// Each lookup kernel reads the coordinates of thread i from device arrays and stores the four
// components it got, so that the test can compare any coordinate list with its CPU reference.
#include <cuda_runtime.h>

extern "C" __global__ void fetch_linear_f4(cudaTextureObject_t t, float4* out, int first, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float4>(t, first + i);
}

extern "C" __global__ void fetch_linear_i1(cudaTextureObject_t t, int* out, int first, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<int>(t, first + i);
}

extern "C" __global__ void lookup_1d(cudaTextureObject_t t, const float* x, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1D<float4>(t, x[i]);
}

extern "C" __global__ void lookup_2d(cudaTextureObject_t t, const float* x, const float* y,
                                     float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float4>(t, x[i], y[i]);
}

extern "C" __global__ void lookup_2d_int(cudaTextureObject_t t, const float* x, const float* y,
                                         int4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<int4>(t, x[i], y[i]);
}

extern "C" __global__ void lookup_2d_lod_grad(cudaTextureObject_t t, const float* x, const float* y,
                                              float4* lod, float4* grad, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    lod[i] = tex2DLod<float4>(t, x[i], y[i], 0.0f);
    grad[i] = tex2DGrad<float4>(t, x[i], y[i], make_float2(1, 0), make_float2(0, 1));
  }
}

extern "C" __global__ void lookup_3d(cudaTextureObject_t t, const float* x, const float* y,
                                     const float* z, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex3D<float4>(t, x[i], y[i], z[i]);
}

extern "C" __global__ void lookup_2d_layered(cudaTextureObject_t t, const float* x, const float* y,
                                             const int* layer, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2DLayered<float4>(t, x[i], y[i], layer[i]);
}

extern "C" __global__ void lookup_1d_layered(cudaTextureObject_t t, const float* x,
                                             const int* layer, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1DLayered<float4>(t, x[i], layer[i]);
}

extern "C" __global__ void lookup_cube(cudaTextureObject_t t, const float* x, const float* y,
                                       const float* z, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = texCubemap<float4>(t, x[i], y[i], z[i]);
}

extern "C" __global__ void lookup_cube_layered(cudaTextureObject_t t, const float* x,
                                               const float* y, const float* z, const int* layer,
                                               float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = texCubemapLayered<float4>(t, x[i], y[i], z[i], layer[i]);
}

extern "C" __global__ void gather_2d(cudaTextureObject_t t, const float* x, const float* y,
                                     float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    // One result per component: out[4 * i + c].
    out[4 * i + 0] = tex2Dgather<float4>(t, x[i], y[i], 0);
    out[4 * i + 1] = tex2Dgather<float4>(t, x[i], y[i], 1);
    out[4 * i + 2] = tex2Dgather<float4>(t, x[i], y[i], 2);
    out[4 * i + 3] = tex2Dgather<float4>(t, x[i], y[i], 3);
  }
}

// txq through inline PTX (CUDA C++ has no query functions for texture objects).
extern "C" __global__ void query(cudaTextureObject_t t, cudaSurfaceObject_t s, unsigned* out) {
  unsigned w, h, d, layers, norm, filter, mode0, sw, sh;
  asm("txq.width.b32 %0, [%1];" : "=r"(w) : "l"(t));
  asm("txq.height.b32 %0, [%1];" : "=r"(h) : "l"(t));
  asm("txq.depth.b32 %0, [%1];" : "=r"(d) : "l"(t));
  asm("txq.array_size.b32 %0, [%1];" : "=r"(layers) : "l"(t));
  asm("txq.normalized_coords.b32 %0, [%1];" : "=r"(norm) : "l"(t));
  asm("txq.filter_mode.b32 %0, [%1];" : "=r"(filter) : "l"(t));
  asm("txq.addr_mode_0.b32 %0, [%1];" : "=r"(mode0) : "l"(t));
  asm("suq.width.b32 %0, [%1];" : "=r"(sw) : "l"(s));
  asm("suq.height.b32 %0, [%1];" : "=r"(sh) : "l"(s));
  out[0] = w;
  out[1] = h;
  out[2] = d;
  out[3] = layers;
  out[4] = norm;
  out[5] = filter;
  out[6] = mode0;
  out[7] = sw;
  out[8] = sh;
}

// out(x, y) = 2 * in(x, y) + x, through surfaces (x in bytes).
extern "C" __global__ void surface_scale(cudaSurfaceObject_t in, cudaSurfaceObject_t out, int w,
                                         int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) {
    float v = surf2Dread<float>(in, x * 4, y);
    surf2Dwrite(2 * v + x, out, x * 4, y);
  }
}

// Reads float element (x, y) of a surface with each boundary mode; out: clamp, zero.
extern "C" __global__ void surface_modes(cudaSurfaceObject_t s, const int* x, const int* y,
                                         float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[2 * i] = surf2Dread<float>(s, x[i] * 4, y[i], cudaBoundaryModeClamp);
    out[2 * i + 1] = surf2Dread<float>(s, x[i] * 4, y[i], cudaBoundaryModeZero);
  }
}

extern "C" __global__ void surface_trap_read(cudaSurfaceObject_t s, int x, int y, float* out) {
  *out = surf2Dread<float>(s, x * 4, y);
}

// uchar4 elements of a 3D surface and of a 2D layered one: value + (1, 2, 3, 4).
extern "C" __global__ void surface_3d_and_layered(cudaSurfaceObject_t s3, cudaSurfaceObject_t sl,
                                                  int w, int h, int d) {
  int x = threadIdx.x, y = threadIdx.y, z = threadIdx.z;
  if (x < w && y < h && z < d) {
    uchar4 v = surf3Dread<uchar4>(s3, x * 4, y, z);
    surf3Dwrite(make_uchar4(v.x + 1, v.y + 2, v.z + 3, v.w + 4), s3, x * 4, y, z);
    uchar4 u = surf2DLayeredread<uchar4>(sl, x * 4, y, z);
    surf2DLayeredwrite(make_uchar4(u.x + 1, u.y + 2, u.z + 3, u.w + 4), sl, x * 4, y, z);
  }
}

// 1D surface of float2 and 1D layered surface of short: out = in * 3 (element-wise).
extern "C" __global__ void surface_1d(cudaSurfaceObject_t s1, cudaSurfaceObject_t sl, int w,
                                      int layers) {
  int x = threadIdx.x;
  if (x < w) {
    float2 v = surf1Dread<float2>(s1, x * 8);
    surf1Dwrite(make_float2(v.x * 3, v.y * 3), s1, x * 8);
    for (int l = 0; l < layers; ++l) {
      short s = surf1DLayeredread<short>(sl, x * 2, l);
      surf1DLayeredwrite<short>(s * 3, sl, x * 2, l);
    }
  }
}

// A texture read whose result is stored: used with destroyed or foreign objects.
extern "C" __global__ void read_one(cudaTextureObject_t t, float* out) {
  *out = tex2D<float>(t, 0.5f, 0.5f);
}

// Mipmapped textures (mipmap_test.cc): explicit levels of detail and gradients. Gradients are
// passed per thread as dPdx then dPdy.
extern "C" __global__ void lookup_1d_lod(cudaTextureObject_t t, const float* x, const float* lod,
                                         float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1DLod<float4>(t, x[i], lod[i]);
}

extern "C" __global__ void lookup_1d_grad(cudaTextureObject_t t, const float* x, const float2* g,
                                          float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1DGrad<float4>(t, x[i], g[i].x, g[i].y);
}

extern "C" __global__ void lookup_2d_lod(cudaTextureObject_t t, const float* x, const float* y,
                                         const float* lod, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2DLod<float4>(t, x[i], y[i], lod[i]);
}

extern "C" __global__ void lookup_2d_grad(cudaTextureObject_t t, const float* x, const float* y,
                                          const float4* g, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] =
        tex2DGrad<float4>(t, x[i], y[i], make_float2(g[i].x, g[i].y), make_float2(g[i].z, g[i].w));
  }
}

extern "C" __global__ void lookup_3d_lod(cudaTextureObject_t t, const float* x, const float* y,
                                         const float* z, const float* lod, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex3DLod<float4>(t, x[i], y[i], z[i], lod[i]);
}

// g: six floats per thread (dPdx, dPdy).
extern "C" __global__ void lookup_3d_grad(cudaTextureObject_t t, const float* x, const float* y,
                                          const float* z, const float* g, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float* d = g + 6 * i;
    out[i] = tex3DGrad<float4>(t, x[i], y[i], z[i], make_float4(d[0], d[1], d[2], 0),
                               make_float4(d[3], d[4], d[5], 0));
  }
}

extern "C" __global__ void lookup_1d_layered_lod(cudaTextureObject_t t, const float* x,
                                                 const int* layer, const float* lod, float4* out,
                                                 int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1DLayeredLod<float4>(t, x[i], layer[i], lod[i]);
}

extern "C" __global__ void lookup_2d_layered_lod(cudaTextureObject_t t, const float* x,
                                                 const float* y, const int* layer, const float* lod,
                                                 float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2DLayeredLod<float4>(t, x[i], y[i], layer[i], lod[i]);
}

extern "C" __global__ void lookup_2d_layered_grad(cudaTextureObject_t t, const float* x,
                                                  const float* y, const int* layer, const float4* g,
                                                  float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = tex2DLayeredGrad<float4>(t, x[i], y[i], layer[i], make_float2(g[i].x, g[i].y),
                                      make_float2(g[i].z, g[i].w));
  }
}

extern "C" __global__ void lookup_cube_lod(cudaTextureObject_t t, const float* x, const float* y,
                                           const float* z, const float* lod, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = texCubemapLod<float4>(t, x[i], y[i], z[i], lod[i]);
}

extern "C" __global__ void lookup_cube_layered_lod(cudaTextureObject_t t, const float* x,
                                                   const float* y, const float* z, const int* layer,
                                                   const float* lod, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = texCubemapLayeredLod<float4>(t, x[i], y[i], z[i], layer[i], lod[i]);
}

// g: six floats per thread (dPdx, dPdy).
extern "C" __global__ void lookup_cube_grad(cudaTextureObject_t t, const float* x, const float* y,
                                            const float* z, const float* g, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float* d = g + 6 * i;
    out[i] = texCubemapGrad<float4>(t, x[i], y[i], z[i], make_float4(d[0], d[1], d[2], 0),
                                    make_float4(d[3], d[4], d[5], 0));
  }
}

// tex.level with integer texel coordinates and an integer level (inline PTX: CUDA C++ has no
// such call).
extern "C" __global__ void fetch_2d_level(cudaTextureObject_t t, const int* x, const int* y,
                                          const int* lod, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float4 v;
    asm("tex.level.2d.v4.f32.s32 {%0, %1, %2, %3}, [%4, {%5, %6}], %7;"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(t), "r"(x[i]), "r"(y[i]), "r"(lod[i]));
    out[i] = v;
  }
}

// Mipmap queries: levels, width and height, and txq.level at levels 0, 1, 2 and 99.
extern "C" __global__ void query_levels(cudaTextureObject_t t, unsigned* out) {
  unsigned levels, w, h, w0, w1, w2, h1, h2, w99;
  asm("txq.num_mipmap_levels.b32 %0, [%1];" : "=r"(levels) : "l"(t));
  asm("txq.width.b32 %0, [%1];" : "=r"(w) : "l"(t));
  asm("txq.height.b32 %0, [%1];" : "=r"(h) : "l"(t));
  asm("txq.level.width.b32 %0, [%1], %2;" : "=r"(w0) : "l"(t), "r"(0));
  asm("txq.level.width.b32 %0, [%1], %2;" : "=r"(w1) : "l"(t), "r"(1));
  asm("txq.level.width.b32 %0, [%1], %2;" : "=r"(w2) : "l"(t), "r"(2));
  asm("txq.level.height.b32 %0, [%1], %2;" : "=r"(h1) : "l"(t), "r"(1));
  asm("txq.level.height.b32 %0, [%1], %2;" : "=r"(h2) : "l"(t), "r"(2));
  asm("txq.level.width.b32 %0, [%1], %2;" : "=r"(w99) : "l"(t), "r"(99));
  out[0] = levels;
  out[1] = w;
  out[2] = h;
  out[3] = w0;
  out[4] = w1;
  out[5] = w2;
  out[6] = h1;
  out[7] = h2;
  out[8] = w99;
}
