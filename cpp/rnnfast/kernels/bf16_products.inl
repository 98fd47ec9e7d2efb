// bf16 products for float32 calls (mixed-precision training, issue 40): both operands rounded
// to bf16 (round to nearest even) and multiplied pairwise by VDPBF16PS, the sums in float32.
// Included by simd_kernels.inl, inside its anonymous namespace, for the avx512 target alone.
// These functions carry the avx512bf16 target of their own, so the rest of that translation
// unit never uses the extension, and runtime/products.cpp lets them run only where the CPU
// has it. The table they go into is the avx512 float table with pack_b and gemm_block swapped
// (products.cpp): the gate functions and the cells' epilogues stay float32.
//
// B's panels keep the float table's places (panel p at p * K * NR floats: team_gemm offsets its
// blocks so), each filled to half: (K + 1) / 2 pair rows of NR 32-bit words, word j of pair row
// q holding column j's values at k = 2q (low half) and 2q + 1 (high half, zero past K), the
// pairs VDPBF16PS multiplies. A is packed per M-block and k-block the same way: slivers of kMR
// rows (the last one shorter), MR words per pair of k's, so a tile broadcasts one word per row.

#define RNNFAST_BF16_TARGET __attribute__((target("avx512bf16")))

// A 32-bit word that may alias the float buffers the packed operands live in.
typedef unsigned int Bf16Pair __attribute__((may_alias));

// x rounded to bf16, to nearest even, as its 16 bits; a NaN stays a (quiet) NaN. The scalar
// model runtime/products.cpp rounds with is the same.
inline unsigned bf16_bits(float x) {
    unsigned u;
    std::memcpy(&u, &x, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// The pair (x[0], x[step]) as one word, or (x[0], 0) past the end.
inline unsigned bf16_pair(const float* x, index step, bool both) {
    return bf16_bits(x[0]) | (both ? bf16_bits(x[step]) << 16 : 0u);
}

// Panels [p0, p1) of B (K x N) as bf16 pairs, at the float table's places.
void pack_b_bf16(MatView<float> B, index K, index N, index p0, index p1, float* dst) {
    constexpr index nr = Simd<float>::NR;
    const index pairs = (K + 1) / 2;
    for (index p = p0; p < p1; ++p) {
        Bf16Pair* panel = reinterpret_cast<Bf16Pair*>(dst + p * K * nr);
        const index j0 = p * nr;
        const index cols = N - j0 < nr ? N - j0 : nr;
        for (index q = 0; q < pairs; ++q) {
            Bf16Pair* out = panel + q * nr;
            const float* row = B.p + 2 * q * B.rs + j0 * B.cs;
            const bool both = 2 * q + 1 < K;
            for (index j = 0; j < cols; ++j)
                out[j] = bf16_pair(row + j * B.cs, B.rs, both);
            for (index j = cols; j < nr; ++j)
                out[j] = 0;
        }
    }
}

// Rows [m0, m1) x columns [k0, k0 + kc) of A as bf16 pairs, in slivers of kMR rows.
void pack_a_bf16(MatView<float> A, index m0, index m1, index k0, index kc, Bf16Pair* dst) {
    const index pairs = (kc + 1) / 2;
    for (index i = m0; i < m1; i += kMR) {
        const index h = m1 - i < kMR ? m1 - i : kMR;
        Bf16Pair* out = dst + (i - m0) * pairs;
        for (index r = 0; r < h; ++r) {
            const float* row = A.p + (i + r) * A.rs + k0 * A.cs;
            for (index q = 0; q < pairs; ++q)
                out[q * h + r] = bf16_pair(row + 2 * q * A.cs, A.cs, 2 * q + 1 < kc);
        }
    }
}

// One pair row q of a tile: acc[i][v] += A's pair of row i times the panel's pairs.
template <int MR>
RNNFAST_BF16_TARGET inline void bf16_pair_row(__m512 (&acc)[MR][kNV], const Bf16Pair* a,
                                              const Bf16Pair* panel, index q) {
    constexpr int NR = Simd<float>::NR;
    __m512bh b[kNV];
    for (int v = 0; v < kNV; ++v)
        b[v] = (__m512bh)_mm512_loadu_si512(panel + q * NR + v * 16);
    for (int i = 0; i < MR; ++i) {
        const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[q * MR + i]));
        for (int v = 0; v < kNV; ++v)
            acc[i][v] = _mm512_dpbf16_ps(acc[i][v], x, b[v]);
    }
}

// acc[MR][kNV] = the sliver's rows times the panel over `pairs` pair rows, then the pass's
// epilogue (finish_tile, the float tile's). As the float tile, k runs over `U` interleaved
// accumulator sets where a short tile would otherwise wait on its own latency chain.
template <int MR>
RNNFAST_BF16_TARGET inline void bf16_tile(const GemmTask<float>& t, const KPass<float>& pass,
                                          index i0, const Bf16Pair* a, const Bf16Pair* panel,
                                          index pairs, int cols, index j0, bool far) {
    using V = typename Simd<float>::vec;
    constexpr int NR = Simd<float>::NR;
    constexpr int U = interleave<MR>();
    __m512 acc[U][MR][kNV];
    for (int u = 0; u < U; ++u)
        for (int i = 0; i < MR; ++i)
            for (int v = 0; v < kNV; ++v)
                acc[u][i][v] = _mm512_setzero_ps();
    if (MR >= kPrefetchMinRows && 2 * pairs >= kPrefetchSteps<float>)
        prefetch_tile_rows<float, MR>(t.C + i0 * t.ldc + j0, t.ldc);
    index q = 0;
    for (; q + U <= pairs; q += U)
        for (int u = 0; u < U; ++u) {
            if (MR >= kPrefetchMinRows || far)
                prefetch_panel<float>(
                    reinterpret_cast<const float*>(panel + (q + u + kPrefetchSteps<float>)*NR));
            bf16_pair_row<MR>(acc[u], a, panel, q + u);
        }
    for (; q < pairs; ++q)
        bf16_pair_row<MR>(acc[0], a, panel, q);
    V sums[MR][kNV];
    for (int i = 0; i < MR; ++i)
        for (int v = 0; v < kNV; ++v) {
            __m512 s = acc[0][i][v];
            for (int u = 1; u < U; ++u)
                s = _mm512_add_ps(s, acc[u][i][v]);
            sums[i][v] = (V)s;
        }
    finish_tile<float, MR>(t, pass, i0, sums, cols, j0);
}

template <int MR = kMR - 1>
RNNFAST_BF16_TARGET inline void bf16_short_tile(int rows, const GemmTask<float>& t,
                                                const KPass<float>& pass, index i0,
                                                const Bf16Pair* a, const Bf16Pair* panel,
                                                index pairs, int cols, index j0, bool far) {
    if constexpr (MR > 0) {
        if (rows == MR) return bf16_tile<MR>(t, pass, i0, a, panel, pairs, cols, j0, far);
        bf16_short_tile<MR - 1>(rows, t, pass, i0, a, panel, pairs, cols, j0, far);
    }
}

// gemm_block's loops (k-blocks of whole pairs, M-blocks, panels, register tiles), A always
// packed: its values are rounded to bf16 once per block, not once per panel. The k-blocks
// follow the task's M, not this thread's share, so the sums' order does not depend on the
// thread count (as the float table's).
RNNFAST_BF16_TARGET void gemm_block_bf16(const GemmTask<float>& t, index m0, index m1, index p0,
                                         index p1) {
    constexpr int NR = Simd<float>::NR;
    const GemmBlocking bk = blocking<float>();
    const index kb = ((t.M < kPackRows ? bk.kc_step : bk.kc) + 1) / 2 * 2;
    const index mc = m1 - m0 < bk.mc ? m1 - m0 : bk.mc;
    const index kcmax = t.K < kb ? t.K : kb;
    const bool far = double(t.K) * double(t.N) * 2.0 > double(cache_sizes().l1d);
    Bf16Pair* packed = m1 > m0 && t.K > 0
                           ? static_cast<Bf16Pair*>(thread_scratch(sizeof(Bf16Pair) * size_t(mc) *
                                                                   size_t((kcmax + 1) / 2)))
                           : nullptr;
    index k0 = 0;
    do {  // at least once: K == 0 still runs the epilogue
        const index kc = t.K - k0 < kb ? t.K - k0 : kb;
        const index pairs = (kc + 1) / 2;
        const bool last = k0 + kc >= t.K;
        const KPass<float> pass{k0, kc, t.accumulate || k0 > 0, k0 == 0 ? t.bias : nullptr,
                                last ? t.op : Epilogue::none};
        for (index mb = m0; mb < m1; mb += bk.mc) {
            const index me = m1 - mb < bk.mc ? m1 : mb + bk.mc;
            if (kc > 0) pack_a_bf16(t.A, mb, me, k0, kc, packed);
            for (index p = p0; p < p1; ++p) {
                const index j0 = p * NR;
                const int cols = static_cast<int>(t.N - j0 < NR ? t.N - j0 : NR);
                const Bf16Pair* panel =
                    reinterpret_cast<const Bf16Pair*>(t.packed_b + p * t.K * NR) + k0 / 2 * NR;
                index i = mb;
                for (; i + kMR <= me; i += kMR)
                    bf16_tile<kMR>(t, pass, i, packed + (i - mb) * pairs, panel, pairs, cols, j0,
                                   far);
                if (i < me)
                    bf16_short_tile(static_cast<int>(me - i), t, pass, i, packed + (i - mb) * pairs,
                                    panel, pairs, cols, j0, far);
            }
        }
        k0 += kc;
    } while (k0 < t.K);
}

#undef RNNFAST_BF16_TARGET
