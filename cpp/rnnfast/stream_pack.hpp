// The layout of KernelTable::matvec's B (the recurrent weights of a batch of one), written by
// the thread that owns the columns: no kernel of its own, as it runs once per call.
#pragma once

#include <algorithm>

#include "kernel_table.hpp"

namespace rnnfast {

// Elements of a stream-packed K x N matrix.
template <class T>
index stream_packed_size(const KernelTable<T>& kt, index K, index N) {
    return K * ((N + kt.nr - 1) / kt.nr * kt.nr);
}

// Packs columns [c0, c1) of B (K x N, c0 a multiple of nr) into dst + c0 * K, as matvec reads
// them from there (n = c1 - c0): groups of stream_nr columns, each K rows of its width rounded
// up to nr, zero-padded. B is read 16 rows at a time, so a transposed view (cs > 1) is read a
// cache line per column and block.
template <class T>
void stream_pack(const KernelTable<T>& kt, MatView<T> B, index K, index c0, index c1, T* dst) {
    constexpr index kRows = 16;
    T* out = dst + c0 * K;
    const index n = c1 - c0;
    for (index j = 0; j < n; j += kt.stream_nr) {
        const index cols = std::min<index>(kt.stream_nr, n - j);
        const index width = (cols + kt.nr - 1) / kt.nr * kt.nr;
        T* group = out + j * K;
        for (index k0 = 0; k0 < K; k0 += kRows) {
            const index k1 = std::min(K, k0 + kRows);
            for (index c = 0; c < width; ++c)
                for (index k = k0; k < k1; ++k)
                    group[k * width + c] = c < cols ? B.p[k * B.rs + (c0 + j + c) * B.cs] : T(0);
        }
    }
}

}  // namespace rnnfast
