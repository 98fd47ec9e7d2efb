// The quantized kernels compiled for the baseline path (flags set in CMakeLists.txt).
#define RNNFAST_QPATH_NS qpath_baseline
#define RNNFAST_QPATH_NAME "baseline"
#define RNNFAST_QINT8 1
#define RNNFAST_QBF16 1
#define RNNFAST_QVECTOR_BYTES 16
#include "qkernels.inl"
