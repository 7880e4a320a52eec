// NVIDIA's cuDNN, unmodified, through the runtime: a handle (cudnnCreate maps pinned memory and
// asks for cluster occupancy), ReLU and softmax forward, and a 2D convolution forward with the
// algorithm cuDNN picks from its heuristics; each result compared with the CPU.
#include <cudnn.h>

#include <cmath>
#include <vector>

#include "rt_check.h"

#define CHECK_DNN(call) CHECK_LIBRARY(call, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)

int main() {
  cudnnHandle_t handle;
  CHECK_DNN(cudnnCreate(&handle));

  // ReLU and softmax over one 4x8 image.
  cudnnTensorDescriptor_t small;
  CHECK_DNN(cudnnCreateTensorDescriptor(&small));
  CHECK_DNN(cudnnSetTensor4dDescriptor(small, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 4, 8));
  std::vector<float> x(32), y(32);
  for (int i = 0; i < 32; ++i) x[i] = 0.25f * (i - 16);
  float *dx, *dy;
  CHECK(cudaMalloc(&dx, 32 * sizeof(float)));
  CHECK(cudaMalloc(&dy, 32 * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), 32 * sizeof(float), cudaMemcpyHostToDevice));
  cudnnActivationDescriptor_t relu;
  CHECK_DNN(cudnnCreateActivationDescriptor(&relu));
  CHECK_DNN(cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0));
  const float one = 1, zero = 0;
  CHECK_DNN(cudnnActivationForward(handle, relu, &one, small, dx, &zero, small, dy));
  CHECK(cudaMemcpy(y.data(), dy, 32 * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 32; ++i) {
    EXPECT(y[i] == std::fmax(x[i], 0.0f), "relu[%d] = %g", i, y[i]);
  }
  CHECK_DNN(cudnnSoftmaxForward(handle, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &one,
                                small, dx, &zero, small, dy));
  CHECK(cudaMemcpy(y.data(), dy, 32 * sizeof(float), cudaMemcpyDeviceToHost));
  double total = 0;
  for (int i = 0; i < 32; ++i) total += std::exp(static_cast<double>(x[i]));
  for (int i = 0; i < 32; ++i) {
    const double want = std::exp(static_cast<double>(x[i])) / total;
    EXPECT(std::fabs(y[i] - want) <= 1e-5 + 1e-4 * want, "softmax[%d] = %g, want %g", i, y[i],
           want);
  }

  // Convolution: 2 images of 3 channels, 12x10, 4 filters of 3x3, padding 1, stride 1.
  const int n = 2, c = 3, h = 12, w = 10, k = 4, r = 3, s = 3;
  cudnnTensorDescriptor_t in_desc, out_desc;
  cudnnFilterDescriptor_t filter_desc;
  cudnnConvolutionDescriptor_t conv;
  CHECK_DNN(cudnnCreateTensorDescriptor(&in_desc));
  CHECK_DNN(cudnnCreateTensorDescriptor(&out_desc));
  CHECK_DNN(cudnnCreateFilterDescriptor(&filter_desc));
  CHECK_DNN(cudnnCreateConvolutionDescriptor(&conv));
  CHECK_DNN(cudnnSetTensor4dDescriptor(in_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  CHECK_DNN(
      cudnnSetFilter4dDescriptor(filter_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, s));
  CHECK_DNN(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT));
  int on, oc, oh, ow;
  CHECK_DNN(cudnnGetConvolution2dForwardOutputDim(conv, in_desc, filter_desc, &on, &oc, &oh, &ow));
  EXPECT(on == n && oc == k && oh == h && ow == w, "output %dx%dx%dx%d", on, oc, oh, ow);
  CHECK_DNN(cudnnSetTensor4dDescriptor(out_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, h, w));
  std::vector<float> image(n * c * h * w), filter(k * c * r * s), out(n * k * h * w);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>((i * 37) % 17) / 8 - 1;
  for (size_t i = 0; i < filter.size(); ++i)
    filter[i] = static_cast<float>((i * 11) % 7) / 4 - 0.75f;
  float *d_image, *d_filter, *d_out;
  CHECK(cudaMalloc(&d_image, image.size() * sizeof(float)));
  CHECK(cudaMalloc(&d_filter, filter.size() * sizeof(float)));
  CHECK(cudaMalloc(&d_out, out.size() * sizeof(float)));
  CHECK(cudaMemcpy(d_image, image.data(), image.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_filter, filter.data(), filter.size() * sizeof(float), cudaMemcpyHostToDevice));
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  int returned = 0;
  CHECK_DNN(cudnnGetConvolutionForwardAlgorithm_v7(handle, in_desc, filter_desc, conv, out_desc, 8,
                                                   &returned, perf));
  EXPECT(returned > 0, "no convolution algorithm");
  // The first the heuristics rank that reports success, as applications pick.
  int chosen = -1;
  for (int i = 0; i < returned && chosen < 0; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS) chosen = i;
  }
  EXPECT(chosen >= 0, "no usable convolution algorithm among %d", returned);
  size_t workspace_bytes = 0;
  CHECK_DNN(cudnnGetConvolutionForwardWorkspaceSize(handle, in_desc, filter_desc, conv, out_desc,
                                                    perf[chosen].algo, &workspace_bytes));
  void* workspace = nullptr;
  if (workspace_bytes > 0) CHECK(cudaMalloc(&workspace, workspace_bytes));
  CHECK_DNN(cudnnConvolutionForward(handle, &one, in_desc, d_image, filter_desc, d_filter, conv,
                                    perf[chosen].algo, workspace, workspace_bytes, &zero, out_desc,
                                    d_out));
  CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int b = 0; b < n; ++b) {
    for (int f = 0; f < k; ++f) {
      for (int i = 0; i < h; ++i) {
        for (int j = 0; j < w; ++j) {
          double want = 0;
          for (int ch = 0; ch < c; ++ch) {
            for (int di = 0; di < r; ++di) {
              for (int dj = 0; dj < s; ++dj) {
                const int y0 = i + di - 1, x0 = j + dj - 1;
                if (y0 < 0 || y0 >= h || x0 < 0 || x0 >= w) continue;
                want += static_cast<double>(image[((b * c + ch) * h + y0) * w + x0]) *
                        filter[((f * c + ch) * r + di) * s + dj];
              }
            }
          }
          const float got = out[((b * k + f) * h + i) * w + j];
          EXPECT(std::fabs(got - want) <= 1e-3, "conv[%d,%d,%d,%d] = %g, want %g (algorithm %d)", b,
                 f, i, j, got, want, static_cast<int>(perf[chosen].algo));
        }
      }
    }
  }
  if (workspace != nullptr) CHECK(cudaFree(workspace));
  CHECK(cudaFree(d_image));
  CHECK(cudaFree(d_filter));
  CHECK(cudaFree(d_out));
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  CHECK_DNN(cudnnDestroy(handle));
  printf("rt_cudnn: OK (convolution algorithm %d)\n", static_cast<int>(perf[chosen].algo));
  return 0;
}
