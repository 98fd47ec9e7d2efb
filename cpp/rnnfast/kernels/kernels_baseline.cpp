// The SIMD kernels compiled for the baseline target (flags set in CMakeLists.txt).
#define RNNFAST_ISA_NS isa_baseline
#define RNNFAST_ISA_NAME "baseline"
#define RNNFAST_VECTOR_BYTES 16
#define RNNFAST_VECTOR_REGISTERS 16  // vector registers the ISA names (x86-64)
#include "simd_kernels.inl"
