// The SIMD kernels compiled for the avx512 target (flags set in CMakeLists.txt).
#define RNNFAST_ISA_NS isa_avx512
#define RNNFAST_ISA_NAME "avx512"
#define RNNFAST_VECTOR_BYTES 64
#define RNNFAST_VECTOR_REGISTERS 32  // vector registers the ISA names (x86-64)
// and the bf16 products of mixed-precision training (bf16_products.inl), on their own target
#define RNNFAST_BF16_PRODUCTS 1
#include "simd_kernels.inl"
