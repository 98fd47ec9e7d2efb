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

// An AMX tile multiplies 16 rows by 32 k's (16 pair rows of B, 64 bytes of each). Below
// kAmxMinK values of k the panel's place has no room for a whole tile of B (VDPBF16PS runs
// those), and a product of one row runs on VDPBF16PS too: the LSTM 100xBx256x256 forward ran
// 1.11x float32 so at B = 1, 1.01x on tiles; at B = 2 and 4 tiles gave 1.9x, VDPBF16PS 1.7x and
// 1.2x (one thread, this Xeon with AMX; VDPBF16PS runs one product a cycle here, no faster than
// float32's two FMAs).
constexpr index kTilePairs = 16;
constexpr index kTileK = 2 * kTilePairs;
constexpr index kAmxMinK = kTileK;
constexpr index kAmxMinRows = 2;

// 16 pairs from two vectors: word i = (lo[i], hi[i]) rounded to bf16, VDPBF16PS's order.
RNNFAST_BF16_TARGET inline __m512i bf16_pairs(__m512 lo, __m512 hi) {
    const __m512i interleave =
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}
// The 16 values from x (16 - `tail` of them, zeros after), and x's 32 values as 16 pairs in
// their own order (word i = (x[2i], x[2i + 1])), zeros past n.
RNNFAST_BF16_TARGET inline __m512 load_first(const float* x, index n) {
    return _mm512_maskz_loadu_ps(n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1), x);
}
RNNFAST_BF16_TARGET inline __m512i bf16_run(const float* x, index n) {
    return (__m512i)_mm512_cvtne2ps_pbh(load_first(x + 16, n > 16 ? n - 16 : 0), load_first(x, n));
}

// Panels [p0, p1) of B (K x N) as bf16 pairs, at the float table's places.
// A row-major B: 16 columns of two k-rows a vector. A transposed one (the weights read as W^T):
// each column's k-run converts 32 values at once and its 16 pairs scatter down the panel.
RNNFAST_BF16_TARGET void pack_panel_rows(MatView<float> B, index K, index j0, index cols,
                                         Bf16Pair* panel) {
    constexpr index nr = Simd<float>::NR;
    for (index q = 0; 2 * q < K; ++q)
        for (index j = 0; j < nr; j += 16) {
            const index n = cols - j > 0 ? cols - j : 0;
            const float* row = B.p + 2 * q * B.rs + j0 + j;
            const __m512 lo = load_first(row, n);
            const __m512 hi = 2 * q + 1 < K ? load_first(row + B.rs, n) : _mm512_setzero_ps();
            _mm512_storeu_si512(panel + q * nr + j, bf16_pairs(lo, hi));
        }
}
RNNFAST_BF16_TARGET void pack_panel_columns(MatView<float> B, index K, index j0, index cols,
                                            Bf16Pair* panel) {
    constexpr index nr = Simd<float>::NR;
    const __m512i down =
        _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_epi32(static_cast<int>(nr)));
    for (index j = 0; j < nr; ++j) {
        const float* column = B.p + (j0 + j) * B.cs;
        for (index k = 0; k < K; k += 32) {
            const index n = K - k < 32 ? K - k : 32, words = (n + 1) / 2;
            const __m512i w = j < cols ? bf16_run(column + k, n) : _mm512_setzero_si512();
            _mm512_mask_i32scatter_epi32(panel + (k / 2) * nr + j,
                                         __mmask16(words >= 16 ? 0xffff : (1u << words) - 1), down,
                                         w, 4);
        }
    }
}

void pack_b_bf16(MatView<float> B, index K, index N, index p0, index p1, float* dst) {
    constexpr index nr = Simd<float>::NR;
    const index pairs = (K + 1) / 2;
    for (index p = p0; p < p1; ++p) {
        Bf16Pair* panel = reinterpret_cast<Bf16Pair*>(dst + p * K * nr);
        const index j0 = p * nr;
        const index cols = N - j0 < nr ? N - j0 : nr;
        if (B.cs == 1)
            pack_panel_rows(B, K, j0, cols, panel);
        else if (B.rs == 1)
            pack_panel_columns(B, K, j0, cols, panel);
        else
            for (index q = 0; q < pairs; ++q) {
                Bf16Pair* out = panel + q * nr;
                const float* row = B.p + 2 * q * B.rs + j0 * B.cs;
                const bool both = 2 * q + 1 < K;
                for (index j = 0; j < cols; ++j)
                    out[j] = bf16_pair(row + j * B.cs, B.rs, both);
                for (index j = cols; j < nr; ++j)
                    out[j] = 0;
            }
        // Zero pair rows up to a whole AMX tile (16 pair rows) where the panel's place has
        // room for them (K >= kAmxMinK): the tile kernel reads a last k-block's whole tile.
        const index tile_pairs = (pairs + kTilePairs - 1) / kTilePairs * kTilePairs;
        if (tile_pairs <= K)
            for (index q = pairs; q < tile_pairs; ++q)
                for (index j = 0; j < nr; ++j)
                    panel[q * nr + j] = 0;
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

// ---- AMX (TDPBF16PS) ----------------------------------------------------------------------
// A block of 32 rows x one panel (32 columns) is four C tiles (tmm0-3: rows 0-15 / 16-31 x
// columns 0-15 / 16-31), two A tiles (tmm4-5) and two B tiles (tmm6-7, the panel's halves read
// with the pair row's 128-byte stride): each tile loaded serves two products. A is packed per
// M-block and k-block as bf16 rows (32-row blocks and 32 k's, zero-padded), B is the pair layout
// above; the sums are stored to a 32 x 32 buffer and finished by the float epilogue.
#define RNNFAST_AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512bf16")))

struct alignas(64) AmxTileConfig {
    unsigned char palette, start_row, reserved[14];
    unsigned short colsb[16];
    unsigned char rows[16];
};

// Every tile 16 rows of 64 bytes (palette 1): edges are zero padding, never smaller tiles.
RNNFAST_AMX_TARGET inline void configure_full_tiles() {
    AmxTileConfig cfg;
    std::memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    for (int i = 0; i < 8; ++i) {
        cfg.rows[i] = 16;
        cfg.colsb[i] = 64;
    }
    _tile_loadconfig(&cfg);
}

// Where A's value (r, k) of a block lies, packed for the tiles: tile after tile (16 rows x 32
// k's, 1 KiB each, k's tiles of a row block one after another), rows of 64 bytes in each. A tile
// is then one contiguous load: with rows of the whole k-block (2 KiB apart at 1024 k's) each
// tile load was 16 streams (no slower or faster in the time measured here, 1600 x 4096 x 1024:
// 35 ms either way, one thread; one stream is what the prefetchers follow best).
inline index a_tile_offset(index r, index k, index kpad) {
    return ((r >> 4) * (kpad >> 5) + (k >> 5)) * 512 + (r & 15) * 32 + (k & 31);
}

// Rows [m0, m1) x k [k0, k0 + kc) of A as bf16 in the tiles' order (a_tile_offset): `rows` of
// them (a multiple of 32) and `kpad` k's (a multiple of kTileK), zeros past A's. A row-major A
// converts 32 values at once, a transposed one 16 rows x 16 pairs through registers.
RNNFAST_AMX_TARGET __attribute__((noinline)) void pack_a_tiles(MatView<float> A, index m0, index m1,
                                                               index k0, index kc, index rows,
                                                               index kpad, unsigned short* dst) {
    using V = typename Simd<float>::vec;
    const index live_rows = m1 - m0;
    // Only the padding is zeroed: every other value is written below.
    for (index r = 0; r < rows; ++r)
        for (index k = r < live_rows ? kc : 0; k < kpad; ++k)
            if ((k & 31) == 0 && k + 32 <= kpad) {
                std::memset(dst + a_tile_offset(r, k, kpad), 0, 64);
                k += 31;
            } else {
                dst[a_tile_offset(r, k, kpad)] = 0;
            }
    if (A.rs == 1 && A.cs != 1) {  // A read transposed (the weight gradients' delta^T)
        // A block of 16 rows x 16 pairs of k's: for each pair, the 16 rows of its two k's are
        // two contiguous runs, rounded and paired into one vector of 16 words (one per row);
        // the 16 vectors, transposed in registers (words moved as floats), are the 16 rows'
        // runs of 16 pairs, each stored whole. A scatter per pair ran the LSTM 50x32x512x512
        // bf16 training step's packing at ~1 word per cycle.
        // The k's run outside, the rows inside: 32 of A's k-runs are read along their length
        // (rows first read each cache line of 32 k-runs 2 KiB apart, from L3: the LSTM
        // 100x16x64x128 bf16 training step spent 17% of its time here).
        const index pairs = (kc + 1) / 2;
        for (index q0 = 0; q0 < pairs; q0 += 16)
            for (index r = 0; r < live_rows; r += 16) {
                const index n = live_rows - r < 16 ? live_rows - r : 16;
                const __mmask16 live = n == 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
                V block[16];
                for (int i = 0; i < 16; ++i) {
                    const index k = 2 * (q0 + i);
                    const float* src = A.p + (m0 + r) + (k0 + k) * A.cs;
                    const __m512 lo =
                        k < kc ? _mm512_maskz_loadu_ps(live, src) : _mm512_setzero_ps();
                    const __m512 hi =
                        k + 1 < kc ? _mm512_maskz_loadu_ps(live, src + A.cs) : _mm512_setzero_ps();
                    block[i] = (V)_mm512_castsi512_ps(bf16_pairs(lo, hi));
                }
                transpose_block<float>(block);
                const index m = pairs - q0 < 16 ? pairs - q0 : 16;
                const __mmask16 stored = m == 16 ? __mmask16(0xffff) : __mmask16((1u << m) - 1);
                for (index i = 0; i < n; ++i)
                    _mm512_mask_storeu_epi32(dst + a_tile_offset(r + i, 2 * q0, kpad), stored,
                                             _mm512_castps_si512((__m512)block[i]));
            }
        return;
    }
    for (index r = 0; r < live_rows; ++r) {
        const float* src = A.p + (m0 + r) * A.rs + k0 * A.cs;
        index k = 0;
        if (A.cs == 1)
            for (; k + 32 <= kc; k += 32) {
                const __m512bh v =
                    _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + k + 16), _mm512_loadu_ps(src + k));
                _mm512_storeu_si512(dst + a_tile_offset(r, k, kpad), (__m512i)v);
            }
        for (; k < kc; ++k)
            dst[a_tile_offset(r, k, kpad)] = static_cast<unsigned short>(bf16_bits(src[k * A.cs]));
    }
}

// sums (32 x NR floats) = the 32 rows' tiles at `a` (kpad k's) times a panel's k-block.
RNNFAST_AMX_TARGET inline void amx_block_32(const unsigned short* a, const Bf16Pair* panel,
                                            index kpad, float* sums) {
    constexpr int NR = Simd<float>::NR;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (index c = 0; c < kpad; c += kTileK) {
        const Bf16Pair* b = panel + c / 2 * NR;
        _tile_loadd(4, a + c * 16, 64);
        _tile_loadd(5, a + 16 * kpad + c * 16, 64);
        _tile_loadd(6, b, NR * 4);
        _tile_loadd(7, b + 16, NR * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, sums, NR * 4);
    _tile_stored(1, sums + 16, NR * 4);
    _tile_stored(2, sums + 16 * NR, NR * 4);
    _tile_stored(3, sums + 16 * NR + 16, NR * 4);
}

// The first 16 rows of sums alone, from one A tile per k-chunk.
RNNFAST_AMX_TARGET inline void amx_block_16(const unsigned short* a, const Bf16Pair* panel,
                                            index kpad, float* sums) {
    constexpr int NR = Simd<float>::NR;
    _tile_zero(0);
    _tile_zero(1);
    for (index c = 0; c < kpad; c += kTileK) {
        const Bf16Pair* b = panel + c / 2 * NR;
        _tile_loadd(4, a + c * 16, 64);
        _tile_loadd(6, b, NR * 4);
        _tile_loadd(7, b + 16, NR * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
    }
    _tile_stored(0, sums, NR * 4);
    _tile_stored(1, sums + 16, NR * 4);
}

RNNFAST_AMX_TARGET void gemm_block_amx(const GemmTask<float>& t, index m0, index m1, index p0,
                                       index p1) {
    // The choice follows the task (M and K), not this thread's share: the same kernel sums
    // every element whatever the thread count.
    if (t.K < kAmxMinK || t.M < kAmxMinRows) return gemm_block_bf16(t, m0, m1, p0, p1);
    if (m1 <= m0) return;
    constexpr int NR = Simd<float>::NR;
    using V = typename Simd<float>::vec;
    const GemmBlocking bk = blocking<float>();
    // k-blocks of the float table's kc (1024 here): C is read and written once per k-block, and
    // at 256 (A's and B's blocks in L1) that traffic halved a 1600 x 4096 x 1024 projection's
    // rate (323 GFLOP/s against 557, one thread, 2026-12-07); 512 and 2048 ran the LSTM's
    // bf16 training step (50x32x512x512, 25x64x1024x1024) no faster.
    const index kb_tiles = bk.kc / kTileK * kTileK;
    const index kb = kb_tiles > kTileK ? kb_tiles : kTileK;
    const index mc = ((m1 - m0 < bk.mc ? m1 - m0 : bk.mc) + 31) / 32 * 32;
    const index kcmax = t.K < kb ? t.K : kb;
    const index kpad_max = (kcmax + kTileK - 1) / kTileK * kTileK;
    unsigned short* packed = static_cast<unsigned short*>(
        thread_scratch(sizeof(unsigned short) * size_t(mc) * size_t(kpad_max)));
    alignas(64) float sums[32 * NR];
    const V(&acc)[32][kNV] = *reinterpret_cast<const V(*)[32][kNV]>(sums);
    configure_full_tiles();
    index k0 = 0;
    do {
        const index kc = t.K - k0 < kb ? t.K - k0 : kb;
        const index kpad = (kc + kTileK - 1) / kTileK * kTileK;
        const bool last = k0 + kc >= t.K;
        const KPass<float> pass{k0, kc, t.accumulate || k0 > 0, k0 == 0 ? t.bias : nullptr,
                                last ? t.op : Epilogue::none};
        for (index mb = m0; mb < m1; mb += bk.mc) {
            const index me = m1 - mb < bk.mc ? m1 : mb + bk.mc;
            const index rows = (me - mb + 15) / 16 * 16;  // whole tiles of A
            pack_a_tiles(t.A, mb, me, k0, kc, rows, kpad, packed);
            for (index p = p0; p < p1; ++p) {
                const index j0 = p * NR;
                const int cols = static_cast<int>(t.N - j0 < NR ? t.N - j0 : NR);
                const Bf16Pair* panel =
                    reinterpret_cast<const Bf16Pair*>(t.packed_b + p * t.K * NR) + k0 / 2 * NR;
                for (index i = mb; i < me; i += 32) {
                    const unsigned short* a = packed + (i - mb) * kpad;  // its rows' tiles
                    const int valid = static_cast<int>(me - i < 32 ? me - i : 32);
                    if (valid > 16)
                        amx_block_32(a, panel, kpad, sums);
                    else  // a last block of 16 rows or fewer: half the tiles (a batch of 16)
                        amx_block_16(a, panel, kpad, sums);
                    finish_tile<float, 32>(t, pass, i, acc, cols, j0, valid);
                }
            }
        }
        k0 += kc;
    } while (k0 < t.K);
    _tile_release();
}

#undef RNNFAST_AMX_TARGET

#undef RNNFAST_BF16_TARGET
