// The quantized kernels compiled for the avx512_vnni path (flags set in CMakeLists.txt).
#define RNNFAST_QPATH_NS qpath_avx512_vnni
#define RNNFAST_QPATH_NAME "avx512_vnni"
#define RNNFAST_QINT8 4
#define RNNFAST_QBF16 0
#define RNNFAST_QVECTOR_BYTES 64
#include "qkernels.inl"
