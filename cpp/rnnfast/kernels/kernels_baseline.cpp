// The SIMD kernels compiled for the baseline target (flags set in CMakeLists.txt).
#define RNNFAST_ISA_NS isa_baseline
#define RNNFAST_ISA_NAME "baseline"
#define RNNFAST_VECTOR_BYTES 16
#include "simd_kernels.inl"
