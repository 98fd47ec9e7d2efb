#include "embedding.hpp"

#include <algorithm>

#include "rnnfast/runtime/threads.hpp"

namespace rnnfast {

template <class T>
void embedding_backward_columns(const std::int64_t* ids, index n, const T* rows, index dim, T* grad,
                                index c0, index c1) {
    for (index i = 0; i < n; ++i) {
        T* dst = grad + ids[i] * dim;
        const T* src = rows + i * dim;
        for (index c = c0; c < c1; ++c)
            dst[c] += src[c];
    }
}

template <class T>
void embedding_backward(const std::int64_t* ids, index n, const T* rows, index dim, T* grad) {
    constexpr index kColumns = 16;  // one 64-byte line of floats per thread and row
    const index blocks = (dim + kColumns - 1) / kColumns;
    const int threads = threads_for(double(n) * double(dim), blocks, Sync::fork_join);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (index b = 0; b < blocks; ++b) {
        const index c0 = b * kColumns;
        embedding_backward_columns(ids, n, rows, dim, grad, c0, std::min(dim, c0 + kColumns));
    }
}

#define RNNFAST_INSTANTIATE(T)                                                                \
    template void embedding_backward(const std::int64_t*, index, const T*, index, T*);        \
    template void embedding_backward_columns(const std::int64_t*, index, const T*, index, T*, \
                                             index, index);
RNNFAST_INSTANTIATE(float)
RNNFAST_INSTANTIATE(double)
#undef RNNFAST_INSTANTIATE

}  // namespace rnnfast
