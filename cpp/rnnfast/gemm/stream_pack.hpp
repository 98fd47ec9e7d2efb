// The layout of KernelTable::matvec's B (the recurrent weights of a batch of one), written by
// the thread that owns the columns: no kernel of its own, as it runs once per call.
#pragma once

#include <algorithm>

#include "rnnfast/runtime/kernel_table.hpp"

namespace rnnfast {

// Whether a recurrent step over `batch` rows with H hidden units runs on matvec: a batch of one
// whose W_hh fits 32 KiB (H <= 90 floats, 64 doubles). There the step's chain of dependent FMAs
// is what it waits on, and matvec's 8-16 independent chains beat the GEMM's one-row tile
// (1.06-1.15x at H = 64); from H = 256 floats (AVX2 from 128) the tile measured faster.
// (Not where the products round their operands: KernelTable::rounds_operands.)
template <class T>
bool streams(const KernelTable<T>& kt, index batch, index H) {
    return batch == 1 && H * H * static_cast<index>(sizeof(T)) <= 32768 && !kt.rounds_operands;
}

// Elements of a stream-packed K x N matrix.
template <class T>
index stream_packed_size(const KernelTable<T>& kt, index K, index N) {
    return K * ((N + kt.nr - 1) / kt.nr * kt.nr);
}

// Packs columns [c0, c1) of B (K x N, c0 a multiple of nr) into dst + c0 * K, as matvec reads
// them from there (n = c1 - c0): groups of stream_nr columns, each K rows of its width rounded
// up to nr, zero-padded. A view with contiguous rows is copied row by row; a transposed one
// (cs > 1) 16 rows at a time, so each column's run of 16 values is read in one cache line.
template <class T>
void stream_pack(const KernelTable<T>& kt, MatView<T> B, index K, index c0, index c1, T* dst) {
    constexpr index kRows = 16;
    T* out = dst + c0 * K;
    const index n = c1 - c0;
    for (index j = 0; j < n; j += kt.stream_nr) {
        const index cols = std::min<index>(kt.stream_nr, n - j);
        const index width = (cols + kt.nr - 1) / kt.nr * kt.nr;
        T* group = out + j * K;
        for (index k = 0; k < K; ++k)  // the padding
            std::fill(group + k * width + cols, group + (k + 1) * width, T(0));
        if (B.cs == 1) {
            for (index k = 0; k < K; ++k)
                std::copy(B.p + k * B.rs + c0 + j, B.p + k * B.rs + c0 + j + cols,
                          group + k * width);
            continue;
        }
        for (index k0 = 0; k0 < K; k0 += kRows) {
            const index k1 = std::min(K, k0 + kRows);
            for (index c = 0; c < cols; ++c) {
                const T* column = B.p + (c0 + j + c) * B.cs;
                for (index k = k0; k < k1; ++k)
                    group[k * width + c] = column[k * B.rs];
            }
        }
    }
}

}  // namespace rnnfast
