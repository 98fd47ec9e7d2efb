// The quantized kernels compiled for the avx2 path (flags set in CMakeLists.txt).
#define RNNFAST_QPATH_NS qpath_avx2
#define RNNFAST_QPATH_NAME "avx2"
#define RNNFAST_QINT8 2
#define RNNFAST_QBF16 2
#define RNNFAST_QVECTOR_BYTES 32
#include "qkernels.inl"
