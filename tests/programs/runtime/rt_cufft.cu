// NVIDIA's cuFFT, unmodified, through the driver: single- and double-precision complex transforms
// of sizes whose plans take different kernels (powers of two, mixed radices, a large prime that
// cuFFT does by Bluestein's algorithm), batched, inverse, real-to-complex and back, 2D, and a
// plan on a stream of the program's own; each compared with a direct DFT on the CPU. cuFFT
// enumerates the kernel of every module it loads through the driver's CUEXP_FUNCTION export table
// (docs/export_tables.md) and runs its sm_75/compute_120 PTX kernels.
#include <cufft.h>

#include <cmath>
#include <complex>
#include <vector>

#include "rt_check.h"

// Checks that a cuFFT call returns CUFFT_SUCCESS.
#define CHECK_CUFFT(call)                                                              \
  do {                                                                                 \
    cufftResult check_fft_ = (call);                                                   \
    if (check_fft_ != CUFFT_SUCCESS) {                                                 \
      fprintf(stderr, "%s:%d: %s failed: cufftResult %d\n", __FILE__, __LINE__, #call, \
              (int)check_fft_);                                                        \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

using Complex = std::complex<double>;

// The unnormalised DFT of x (length n, stride 1): sign -1 forward, +1 inverse, as cuFFT defines it.
std::vector<Complex> Dft(const std::vector<Complex>& x, int sign) {
  const size_t n = x.size();
  std::vector<Complex> y(n);
  for (size_t k = 0; k < n; ++k) {
    Complex s = 0;
    for (size_t j = 0; j < n; ++j) {
      const double angle = sign * 2.0 * M_PI * (double)((k * j) % n) / (double)n;
      s += x[j] * Complex(cos(angle), sin(angle));
    }
    y[k] = s;
  }
  return y;
}

// A deterministic signal with no symmetry a wrong index or twiddle could hide behind.
std::vector<Complex> Signal(size_t n, int seed) {
  std::vector<Complex> x(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = Complex(sin(0.37 * (double)i + seed) + 0.25 * (double)((i * 7 + seed) % 5),
                   cos(0.11 * (double)i * (double)i + seed) - 0.5);
  }
  return x;
}

// Compares got with want: the largest error relative to the largest magnitude of want.
void ExpectClose(const char* what, size_t n, const std::vector<Complex>& got,
                 const std::vector<Complex>& want, double tolerance) {
  double scale = 0, error = 0;
  size_t worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    const double e = std::abs(got[i] - want[i]);
    if (e > error) error = e, worst = i;
  }
  EXPECT(error <= tolerance * scale,
         "%s (n=%zu): error %g at [%zu] (got %g%+gi, want %g%+gi), scale %g", what, n, error, worst,
         got[worst].real(), got[worst].imag(), want[worst].real(), want[worst].imag(), scale);
}

// Batched single-precision C2C forward and inverse transforms of length n.
void ComplexFloat(int n, int batch) {
  std::vector<cufftComplex> host(n * batch);
  std::vector<std::vector<Complex>> signals;
  for (int b = 0; b < batch; ++b) {
    signals.push_back(Signal(n, b));
    for (int i = 0; i < n; ++i) {
      host[b * n + i] =
          make_cuFloatComplex((float)signals[b][i].real(), (float)signals[b][i].imag());
    }
  }
  cufftComplex* data;
  CHECK(cudaMalloc(&data, host.size() * sizeof(cufftComplex)));
  CHECK(cudaMemcpy(data, host.data(), host.size() * sizeof(cufftComplex), cudaMemcpyHostToDevice));
  cufftHandle plan;
  CHECK_CUFFT(cufftPlan1d(&plan, n, CUFFT_C2C, batch));
  CHECK_CUFFT(cufftExecC2C(plan, data, data, CUFFT_FORWARD));
  std::vector<cufftComplex> out(host.size());
  CHECK(cudaMemcpy(out.data(), data, out.size() * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
  for (int b = 0; b < batch; ++b) {
    std::vector<Complex> got(n);
    for (int i = 0; i < n; ++i) got[i] = Complex(out[b * n + i].x, out[b * n + i].y);
    ExpectClose("C2C forward", n, got, Dft(signals[b], -1), 2e-5 * log2(n + 1.0));
  }
  // Inverse of the forward: n times the signal.
  CHECK_CUFFT(cufftExecC2C(plan, data, data, CUFFT_INVERSE));
  CHECK(cudaMemcpy(out.data(), data, out.size() * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
  for (int b = 0; b < batch; ++b) {
    std::vector<Complex> got(n), want(n);
    for (int i = 0; i < n; ++i) {
      got[i] = Complex(out[b * n + i].x, out[b * n + i].y);
      want[i] = signals[b][i] * (double)n;
    }
    ExpectClose("C2C round trip", n, got, want, 4e-5 * log2(n + 1.0));
  }
  CHECK_CUFFT(cufftDestroy(plan));
  CHECK(cudaFree(data));
}

// A double-precision Z2Z forward transform, out of place.
void ComplexDouble(int n) {
  const std::vector<Complex> signal = Signal(n, 3);
  std::vector<cufftDoubleComplex> host(n);
  for (int i = 0; i < n; ++i) host[i] = make_cuDoubleComplex(signal[i].real(), signal[i].imag());
  cufftDoubleComplex *in, *out;
  CHECK(cudaMalloc(&in, n * sizeof(cufftDoubleComplex)));
  CHECK(cudaMalloc(&out, n * sizeof(cufftDoubleComplex)));
  CHECK(cudaMemcpy(in, host.data(), n * sizeof(cufftDoubleComplex), cudaMemcpyHostToDevice));
  cufftHandle plan;
  CHECK_CUFFT(cufftPlan1d(&plan, n, CUFFT_Z2Z, 1));
  CHECK_CUFFT(cufftExecZ2Z(plan, in, out, CUFFT_FORWARD));
  CHECK(cudaMemcpy(host.data(), out, n * sizeof(cufftDoubleComplex), cudaMemcpyDeviceToHost));
  std::vector<Complex> got(n);
  for (int i = 0; i < n; ++i) got[i] = Complex(host[i].x, host[i].y);
  ExpectClose("Z2Z forward", n, got, Dft(signal, -1), 1e-12 * log2(n + 1.0));
  CHECK_CUFFT(cufftDestroy(plan));
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
}

// Real-to-complex (n/2+1 outputs) and back (n times the signal), on a stream of the program's own.
void RealFloat(int n) {
  std::vector<float> real(n);
  std::vector<Complex> signal(n);
  for (int i = 0; i < n; ++i) {
    real[i] = (float)(sin(0.29 * i) + 0.1 * (i % 7));
    signal[i] = real[i];
  }
  const int bins = n / 2 + 1;
  float* dreal;
  cufftComplex* dspectrum;
  CHECK(cudaMalloc(&dreal, n * sizeof(float)));
  CHECK(cudaMalloc(&dspectrum, bins * sizeof(cufftComplex)));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  CHECK(cudaMemcpyAsync(dreal, real.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));
  cufftHandle forward, inverse;
  CHECK_CUFFT(cufftPlan1d(&forward, n, CUFFT_R2C, 1));
  CHECK_CUFFT(cufftPlan1d(&inverse, n, CUFFT_C2R, 1));
  CHECK_CUFFT(cufftSetStream(forward, stream));
  CHECK_CUFFT(cufftSetStream(inverse, stream));
  CHECK_CUFFT(cufftExecR2C(forward, dreal, dspectrum));
  std::vector<cufftComplex> spectrum(bins);
  CHECK(cudaMemcpyAsync(spectrum.data(), dspectrum, bins * sizeof(cufftComplex),
                        cudaMemcpyDeviceToHost, stream));
  CHECK(cudaStreamSynchronize(stream));
  const std::vector<Complex> full = Dft(signal, -1);
  std::vector<Complex> got(bins), want(full.begin(), full.begin() + bins);
  for (int i = 0; i < bins; ++i) got[i] = Complex(spectrum[i].x, spectrum[i].y);
  ExpectClose("R2C", n, got, want, 2e-5 * log2(n + 1.0));
  CHECK_CUFFT(cufftExecC2R(inverse, dspectrum, dreal));
  std::vector<float> back(n);
  CHECK(cudaMemcpyAsync(back.data(), dreal, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CHECK(cudaStreamSynchronize(stream));
  std::vector<Complex> round(n), scaled(n);
  for (int i = 0; i < n; ++i) round[i] = back[i], scaled[i] = signal[i] * (double)n;
  ExpectClose("C2R round trip", n, round, scaled, 4e-5 * log2(n + 1.0));
  CHECK_CUFFT(cufftDestroy(forward));
  CHECK_CUFFT(cufftDestroy(inverse));
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(dreal));
  CHECK(cudaFree(dspectrum));
}

// A 2D C2C forward transform (rows x cols, row-major), against row then column DFTs.
void TwoDimensional(int rows, int cols) {
  std::vector<Complex> signal = Signal((size_t)rows * cols, 5);
  std::vector<cufftComplex> host(signal.size());
  for (size_t i = 0; i < signal.size(); ++i) {
    host[i] = make_cuFloatComplex((float)signal[i].real(), (float)signal[i].imag());
  }
  cufftComplex* data;
  CHECK(cudaMalloc(&data, host.size() * sizeof(cufftComplex)));
  CHECK(cudaMemcpy(data, host.data(), host.size() * sizeof(cufftComplex), cudaMemcpyHostToDevice));
  cufftHandle plan;
  CHECK_CUFFT(cufftPlan2d(&plan, rows, cols, CUFFT_C2C));
  CHECK_CUFFT(cufftExecC2C(plan, data, data, CUFFT_FORWARD));
  CHECK(cudaMemcpy(host.data(), data, host.size() * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
  std::vector<Complex> want(signal.size());
  for (int r = 0; r < rows; ++r) {
    std::vector<Complex> row(signal.begin() + r * cols, signal.begin() + (r + 1) * cols);
    row = Dft(row, -1);
    for (int c = 0; c < cols; ++c) want[r * cols + c] = row[c];
  }
  for (int c = 0; c < cols; ++c) {
    std::vector<Complex> column(rows);
    for (int r = 0; r < rows; ++r) column[r] = want[r * cols + c];
    column = Dft(column, -1);
    for (int r = 0; r < rows; ++r) want[r * cols + c] = column[r];
  }
  std::vector<Complex> got(signal.size());
  for (size_t i = 0; i < got.size(); ++i) got[i] = Complex(host[i].x, host[i].y);
  ExpectClose("2D C2C forward", (size_t)rows * cols, got, want, 2e-5 * log2(rows * cols + 1.0));
  CHECK_CUFFT(cufftDestroy(plan));
  CHECK(cudaFree(data));
}

int main() {
  int version = 0;
  CHECK_CUFFT(cufftGetVersion(&version));
  // Powers of two, mixed radices (60 = 2^2*3*5, 1001 = 7*11*13), a prime (Bluestein's algorithm).
  for (int n : {8, 64, 60, 1024, 1001, 1031}) ComplexFloat(n, 3);
  for (int n : {256, 97}) ComplexDouble(n);
  for (int n : {128, 100}) RealFloat(n);
  TwoDimensional(32, 48);
  printf("rt_cufft: OK (cuFFT %d)\n", version);
  return 0;
}
