// The quantized kernels compiled for the avx512_bf16 path (flags set in CMakeLists.txt).
#define RNNFAST_QPATH_NS qpath_avx512_bf16
#define RNNFAST_QPATH_NAME "avx512_bf16"
#define RNNFAST_QINT8 0
#define RNNFAST_QBF16 3
#define RNNFAST_QVECTOR_BYTES 64
#include "qkernels.inl"
