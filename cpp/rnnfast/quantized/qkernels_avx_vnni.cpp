// The quantized kernels compiled for the avx_vnni path (flags set in CMakeLists.txt).
#define RNNFAST_QPATH_NS qpath_avx_vnni
#define RNNFAST_QPATH_NAME "avx_vnni"
#define RNNFAST_QINT8 3
#define RNNFAST_QBF16 0
#define RNNFAST_QVECTOR_BYTES 32
#include "qkernels.inl"
