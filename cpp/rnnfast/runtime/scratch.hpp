// A per-thread scratch buffer for the kernels (the GEMM's packed A block). It lives in an
// ordinary translation unit so that the per-ISA kernel sources use no standard-library template
// (see simd_kernels.inl), and per thread so that the threads of a team never share it.
#pragma once

#include <cstddef>

namespace rnnfast {

// At least `bytes` bytes, 64-byte aligned, owned by the calling thread until its next call
// (which may move it) or its exit. Grows as needed and is kept between calls.
void* thread_scratch(std::size_t bytes);

}  // namespace rnnfast
