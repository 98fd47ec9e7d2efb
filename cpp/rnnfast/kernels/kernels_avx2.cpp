// The SIMD kernels compiled for the avx2 target (flags set in CMakeLists.txt).
#define RNNFAST_ISA_NS isa_avx2
#define RNNFAST_ISA_NAME "avx2"
#define RNNFAST_VECTOR_BYTES 32
#define RNNFAST_VECTOR_REGISTERS 16  // vector registers the ISA names (x86-64)
#include "simd_kernels.inl"
