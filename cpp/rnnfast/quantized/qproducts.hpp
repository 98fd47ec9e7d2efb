// The quantized products the bindings' dense layer and the recurrent forward share: activations
// prepared (quantized or rounded to bf16) for a packed matrix, their raw products, the
// dequantizing epilogue, and the parallel projection of many rows. The contract's number
// formats: qops.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "qops.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "rnnfast/runtime/types.hpp"

namespace rnnfast::quantized {

constexpr int kShareRows = 4;  // rows granule when threads split rows

// An uninitialised buffer: every value is written before it is read, and zero-filling
// megabytes per call (then faulting the pages in) showed in profiles.
template <class T>
struct Buffer {
    std::unique_ptr<T[]> p;
    void resize(index n) { p.reset(n > 0 ? new T[static_cast<size_t>(n)] : nullptr); }
    T* data() const { return p.get(); }
};

// Activations of up to `capacity` rows prepared for products with `w` (its kind and K): int8
// rows (leading dimension w.pcols) with their scales, or bf16 rows.
struct Prepared {
    const PackedMatrix* w;
    const QuantKernels* k;
    index lda;
    Buffer<std::int8_t> q;
    Buffer<std::uint16_t> b;
    Buffer<float> scale;

    // The padding of each row, columns [K, lda), is zeroed here once: prepare() writes [0, K).
    Prepared(const PackedMatrix& m, const QuantKernels& kernels, index capacity)
        : w(&m), k(&kernels), lda(m.pcols) {
        const auto pad = static_cast<size_t>(lda - m.cols);
        if (m.kind == Kind::int8) {
            q.resize(capacity * lda);
            scale.resize(capacity);
            for (index r = 0; r < capacity; ++r)
                std::memset(q.data() + r * lda + m.cols, 0, pad);
        } else {
            b.resize(capacity * lda);
            for (index r = 0; r < capacity; ++r)
                std::memset(b.data() + r * lda + m.cols, 0, pad * sizeof(std::uint16_t));
        }
    }
    // Rows [m0, m1) of x (leading dimension ldx); a tanh layer's recurrent input takes the fixed
    // scale where it can.
    void prepare(const float* x, index ldx, index m0, index m1, bool tanh_state) {
        if (m1 <= m0) return;
        if (w->kind == Kind::int8)
            k->rows.quantize(x + m0 * ldx, ldx, m1 - m0, w->cols, q.data() + m0 * lda, lda,
                             scale.data() + m0, tanh_state);
        else
            k->rows.to_bf16(x + m0 * ldx, ldx, m1 - m0, w->cols, b.data() + m0 * lda, lda);
    }
};

// The raw products (int32 or float) of up to `capacity` rows, leading dimension w.prows: row i
// holds prepared row r0 + i of the last compute().
struct Products {
    index ldc;
    Buffer<std::int32_t> acc;
    Buffer<float> out;

    Products(const PackedMatrix& m, index capacity) : ldc(m.prows) {
        if (m.kind == Kind::int8)
            acc.resize(capacity * ldc);
        else
            out.resize(capacity * ldc);
    }
    // Rows [r0, r1) of `a` times panels [p0, p1) of its matrix.
    void compute(const Prepared& a, index r0, index r1, index p0, index p1) {
        if (r0 >= r1 || p0 >= p1) return;
        if (a.w->kind == Kind::int8)
            a.k->int8_block(Int8Task{a.q.data() + r0 * a.lda, a.lda, a.w, acc.data(), ldc}, 0,
                            r1 - r0, p0, p1);
        else
            a.k->bf16_block(Bf16Task{a.b.data() + r0 * a.lda, a.lda, a.w, out.data(), ldc}, 0,
                            r1 - r0, p0, p1);
    }
    // dst[r, j] = dequantized product + add[r * add_rs + j] (add may be dst itself, or null)
    // for rows r of blk (those of the last compute) and its columns; the contract's order:
    // float(acc) * (s_a * s_w), then the addition.
    void finish(const Prepared& a, index r0, const float* add, index add_rs, float* dst, index ldd,
                const Block& blk) const {
        const index n = blk.c1 - blk.c0, rows = blk.m1 - blk.m0;
        if (n <= 0 || rows <= 0) return;
        const index i = blk.m0 - r0;  // the block's first row in this buffer
        const float* ad = add ? add + blk.m0 * add_rs + blk.c0 : nullptr;
        float* d = dst + blk.m0 * ldd + blk.c0;
        if (a.w->kind == Kind::int8)
            a.k->rows.finish_int8(acc.data() + i * ldc + blk.c0, ldc, rows, a.scale.data() + blk.m0,
                                  a.w->scale.data() + blk.c0, ad, add_rs, d, ldd, n);
        else
            a.k->rows.finish_bf16(out.data() + i * ldc + blk.c0, ldc, rows, ad, add_rs, d, ldd, n);
    }
};

inline Block columns_of(const Share& s, index N) {
    return Block{s.m0, s.m1, std::min(N, s.p0 * kPanel), std::min(N, s.p1 * kPanel)};
}

// dst (M x N, leading dimension ldd) = Q(x) . w^T + add (see Products::finish), in parallel
// (a region of its own: call it outside any); `a` holds at least M rows. Each thread runs its
// share in blocks of rows, so its raw products stay small whatever M is.
void project(Prepared& a, const float* x, index M, const float* add, index add_rs, float* dst,
             index ldd);

}  // namespace rnnfast::quantized
