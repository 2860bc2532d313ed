// The driver's own cost of a kernel launch, from C: the floor under symmkit's Kernel.launch, which adds
// argument packing and one FFI call on top. Same kernel shape as `symmkit bench launch` (4 arguments,
// 1 block of 32 threads, a non-blocking stream).
//   nvcc -O2 -o /tmp/launch_floor bench/native/launch_floor.c -lcuda && /tmp/launch_floor
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(call)                                                      \
  do {                                                                   \
    CUresult r_ = (call);                                                \
    if (r_ != CUDA_SUCCESS) {                                            \
      const char* s_ = "?";                                              \
      cuGetErrorName(r_, &s_);                                           \
      fprintf(stderr, "%s failed: %s\n", #call, s_);                     \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

static const char* PTX =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry args_kernel(.param .u64 p, .param .u64 n, .param .u32 a, .param .f32 b) { ret; }\n";

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(void) {
  enum { LAUNCHES = 10000, ROUNDS = 15 };
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  CUstream stream;
  CUdeviceptr buf;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuModuleLoadData(&mod, PTX));
  CHECK(cuModuleGetFunction(&fn, mod, "args_kernel"));
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CHECK(cuMemAlloc(&buf, 64));
  unsigned long long n = 16;
  int a = 0;
  float b = 1.5f;
  void* params[] = {&buf, &n, &a, &b};
  CUlaunchConfig cfg = {1, 1, 1, 32, 1, 1, 0, stream, NULL, 0};

  for (int variant = 0; variant < 2; variant++) {
    double per[ROUNDS];
    for (int r = -2; r < ROUNDS; r++) {
      double t0 = now_us();
      for (int i = 0; i < LAUNCHES; i++) {
        if (variant == 0) CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, NULL));
        else CHECK(cuLaunchKernelEx(&cfg, fn, params, NULL));
      }
      double t1 = now_us();
      CHECK(cuStreamSynchronize(stream));
      if (r >= 0) per[r] = (t1 - t0) / LAUNCHES;
    }
    qsort(per, ROUNDS, sizeof per[0], cmp);
    printf("{\"call\": \"%s\", \"hostUsPerLaunch\": %.3f}\n", variant == 0 ? "cuLaunchKernel" : "cuLaunchKernelEx", per[ROUNDS / 2]);
  }
  return 0;
}
