// Pieces shared by the backward drivers (rnn_backward.cpp, rnn_backward_masked.cpp).
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>

#include "rnn.hpp"
#include "types.hpp"

namespace rnnfast {

// Rows (steps x batch) of deltas kept at once: enough for the weight-gradient GEMMs to run at
// full speed, small enough that the working memory does not grow with T.
constexpr index kChunkRows = 1024;

template <class T>
void copy_or_zero(T* dst, const T* src, index n) {
    if (n <= 0) return;
    if (src)
        std::memcpy(dst, src, sizeof(T) * static_cast<size_t>(n));
    else
        std::memset(dst, 0, sizeof(T) * static_cast<size_t>(n));
}

// db[j] (+)= sum over rows of delta[r, j]; columns split between threads, rows summed in
// order, so the result does not depend on the thread count.
template <class T>
void add_column_sums(const T* delta, index rows, index cols, T* db, bool accumulate, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (index j0 = 0; j0 < cols; j0 += 64) {
        const index j1 = std::min(cols, j0 + 64);
        if (!accumulate)
            for (index j = j0; j < j1; ++j)
                db[j] = T(0);
        for (index r = 0; r < rows; ++r)
            for (index j = j0; j < j1; ++j)
                db[j] += delta[r * cols + j];
    }
}

// Working memory that every use writes in full before reading it: left uninitialised, as
// zeroing it would be one more pass over it per call.
template <class T>
std::unique_ptr<T[]> scratch(index n) {
    return std::unique_ptr<T[]>(new T[static_cast<size_t>(n)]);
}

// The backward of the masked drivers (general step masks, recurrent dropout); rnn_backward
// calls it when the arguments have either, after handling the empty cases.
template <class T>
void rnn_backward_masked(const BackwardArgs<T>& args);

}  // namespace rnnfast
