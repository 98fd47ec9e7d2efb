// The one source of the quantized SIMD kernels. It is compiled once per path by the
// qkernels_<path>.cpp files, which define RNNFAST_QPATH_NS (the namespace), RNNFAST_QPATH_NAME,
// RNNFAST_QINT8 and RNNFAST_QBF16 (which form of each product the path has, 0 for none) and are
// built with that path's target flags. As in simd_kernels.inl, everything lives in an anonymous
// namespace and no standard-library template that emits code is called, so no code of a wider
// ISA can be merged into another path's copy by the linker.
//
// The product is tiled the same way on every path: a tile of kMR rows x kNP panels of 16
// columns is accumulated over the groups of k (qlayout.hpp), reading each weight group once
// per tile and each activation group once per row; only the Ops structs below differ.
//   int8  1 scalar, 2 avx2 (sign-extend to int16 and vpmaddwd: exact, no vpmaddubsw saturation),
//         3 avx_vnni, 4 avx512_vnni (vpdpbusd is u8 x s8: the activations are shifted by +128
//         and 128 * the weights' column sums, stored at pack time, subtracted at the end: exact)
//   bf16  1 scalar, 2 avx2 (bf16 bits shifted left 16 are the float32 value; FMA),
//         3 avx512_bf16 (vdpbf16ps)

#include <cstring>

#if RNNFAST_QINT8 > 1 || RNNFAST_QBF16 > 1
#include <immintrin.h>
#endif

#include "qlayout.hpp"

namespace rnnfast::quantized {
namespace RNNFAST_QPATH_NS {
namespace {

inline std::uint32_t load_u32(const void* p) {
    std::uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline float bf16_to_float(std::uint16_t b) {
    const std::uint32_t bits = std::uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// ---- int8 -------------------------------------------------------------------------------------
// Each Ops: Acc (the 16 int32 sums of one row and panel), A (a row's group, ready to multiply),
// Wv (a panel's group, ready to multiply), and zero / prep / loadw / madd / store.
#if RNNFAST_QINT8 == 1
struct Int8Ops {
    static constexpr int kMR = 2, kNP = 1, kNP1 = 2;
    struct Acc {
        std::int32_t v[16];
    };
    struct A {
        std::int32_t v[4];
    };
    typedef const std::int8_t* Wv;
    static Acc zero() { return Acc{}; }
    static A prep(const std::int8_t* a) { return A{{a[0], a[1], a[2], a[3]}}; }
    static Wv loadw(const std::uint8_t* w) { return reinterpret_cast<const std::int8_t*>(w); }
    static void madd(Acc& acc, const A& a, Wv w) {
        for (int c = 0; c < 16; ++c)
            acc.v[c] += a.v[0] * w[4 * c] + a.v[1] * w[4 * c + 1] + a.v[2] * w[4 * c + 2] +
                        a.v[3] * w[4 * c + 3];
    }
    static void store(const Acc& acc, std::int32_t* c, const std::int32_t*) {
        for (int j = 0; j < 16; ++j)
            c[j] = acc.v[j];
    }
};
#elif RNNFAST_QINT8 == 2
// A 16-byte quarter of a group (4 columns x 4 k's) sign-extends to 16 int16; vpmaddwd against
// (a0, a1, a2, a3) repeated gives each column's k0k1 and k2k3 halves in adjacent lanes.
struct Int8Ops {
    static constexpr int kMR = 2, kNP = 1, kNP1 = 1;
    struct Acc {
        __m256i q[4];
    };
    typedef __m256i A;
    struct Wv {
        __m256i q[4];
    };
    static Acc zero() {
        Acc z;
        for (auto& q : z.q)
            q = _mm256_setzero_si256();
        return z;
    }
    static A prep(const std::int8_t* a) {
        const __m128i four = _mm_cvtepi8_epi16(_mm_cvtsi32_si128(static_cast<int>(load_u32(a))));
        return _mm256_broadcastq_epi64(four);
    }
    static Wv loadw(const std::uint8_t* w) {
        Wv v;
        for (int q = 0; q < 4; ++q)
            v.q[q] =
                _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 * q)));
        return v;
    }
    static void madd(Acc& acc, const A& a, const Wv& w) {
        for (int q = 0; q < 4; ++q)
            acc.q[q] = _mm256_add_epi32(acc.q[q], _mm256_madd_epi16(a, w.q[q]));
    }
    static void store(const Acc& acc, std::int32_t* c, const std::int32_t*) {
        for (int q = 0; q < 4; ++q) {
            std::int32_t lanes[8];
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), acc.q[q]);
            for (int j = 0; j < 4; ++j)
                c[4 * q + j] = lanes[2 * j] + lanes[2 * j + 1];
        }
    }
};
#elif RNNFAST_QINT8 == 3 || RNNFAST_QINT8 == 4
// s8 activations become u8 by flipping the sign bit (q + 128); the bias that adds is removed at
// the store from the column sums.
#if RNNFAST_QINT8 == 3
struct Int8Ops {
    static constexpr int kMR = 4, kNP = 1, kNP1 = 4;
    struct Acc {
        __m256i h[2];
    };
    typedef __m256i A;
    struct Wv {
        __m256i h[2];
    };
    static Acc zero() { return Acc{{_mm256_setzero_si256(), _mm256_setzero_si256()}}; }
    static A prep(const std::int8_t* a) {
        return _mm256_set1_epi32(static_cast<int>(load_u32(a) ^ 0x80808080u));
    }
    static Wv loadw(const std::uint8_t* w) {
        return Wv{{_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)),
                   _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32))}};
    }
    static void madd(Acc& acc, const A& a, const Wv& w) {
        acc.h[0] = _mm256_dpbusd_avx_epi32(acc.h[0], a, w.h[0]);
        acc.h[1] = _mm256_dpbusd_avx_epi32(acc.h[1], a, w.h[1]);
    }
    static void store(const Acc& acc, std::int32_t* c, const std::int32_t* colsum) {
        for (int h = 0; h < 2; ++h) {
            const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(colsum + 8 * h));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 8 * h),
                                _mm256_sub_epi32(acc.h[h], s));
        }
    }
};
#else
struct Int8Ops {
    static constexpr int kMR = 4, kNP = 4, kNP1 = 8;
    typedef __m512i Acc;
    typedef __m512i A;
    typedef __m512i Wv;
    static Acc zero() { return _mm512_setzero_si512(); }
    static A prep(const std::int8_t* a) {
        return _mm512_set1_epi32(static_cast<int>(load_u32(a) ^ 0x80808080u));
    }
    static Wv loadw(const std::uint8_t* w) { return _mm512_loadu_si512(w); }
    static void madd(Acc& acc, const A& a, const Wv& w) { acc = _mm512_dpbusd_epi32(acc, a, w); }
    static void store(const Acc& acc, std::int32_t* c, const std::int32_t* colsum) {
        _mm512_storeu_si512(c, _mm512_sub_epi32(acc, _mm512_loadu_si512(colsum)));
    }
};
#endif
#endif

// ---- bf16 -------------------------------------------------------------------------------------
#if RNNFAST_QBF16 == 1
struct Bf16Ops {
    static constexpr int kMR = 2, kNP = 1, kNP1 = 2;
    struct Acc {
        float v[16];
    };
    struct A {
        float v[2];
    };
    typedef const std::uint16_t* Wv;
    static Acc zero() { return Acc{}; }
    static A prep(const std::uint16_t* a) { return A{{bf16_to_float(a[0]), bf16_to_float(a[1])}}; }
    static Wv loadw(const std::uint8_t* w) { return reinterpret_cast<const std::uint16_t*>(w); }
    static void madd(Acc& acc, const A& a, Wv w) {
        for (int c = 0; c < 16; ++c) {
            acc.v[c] += a.v[0] * bf16_to_float(w[2 * c]);
            acc.v[c] += a.v[1] * bf16_to_float(w[2 * c + 1]);
        }
    }
    static void store(const Acc& acc, float* c) {
        for (int j = 0; j < 16; ++j)
            c[j] = acc.v[j];
    }
};
#elif RNNFAST_QBF16 == 2
// A 32-bit lane of a group holds one column's (k0, k1) pair: k0 is the low half, so shifting
// left 16 gives its float32, and masking the low half gives k1's.
struct Bf16Ops {
    static constexpr int kMR = 2, kNP = 1, kNP1 = 2;
    struct Acc {
        __m256 h[2];
    };
    struct A {
        __m256 k0, k1;
    };
    struct Wv {
        __m256 k0[2], k1[2];
    };
    static Acc zero() { return Acc{{_mm256_setzero_ps(), _mm256_setzero_ps()}}; }
    static A prep(const std::uint16_t* a) {
        return A{_mm256_set1_ps(bf16_to_float(a[0])), _mm256_set1_ps(bf16_to_float(a[1]))};
    }
    static Wv loadw(const std::uint8_t* w) {
        Wv v;
        const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
        for (int h = 0; h < 2; ++h) {
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32 * h));
            v.k0[h] = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
            v.k1[h] = _mm256_castsi256_ps(_mm256_and_si256(x, high));
        }
        return v;
    }
    static void madd(Acc& acc, const A& a, const Wv& w) {
        for (int h = 0; h < 2; ++h) {
            acc.h[h] = _mm256_fmadd_ps(a.k0, w.k0[h], acc.h[h]);
            acc.h[h] = _mm256_fmadd_ps(a.k1, w.k1[h], acc.h[h]);
        }
    }
    static void store(const Acc& acc, float* c) {
        _mm256_storeu_ps(c, acc.h[0]);
        _mm256_storeu_ps(c + 8, acc.h[1]);
    }
};
#elif RNNFAST_QBF16 == 3
struct Bf16Ops {
    static constexpr int kMR = 4, kNP = 4, kNP1 = 8;
    typedef __m512 Acc;
    typedef __m512bh A;
    typedef __m512bh Wv;
    static Acc zero() { return _mm512_setzero_ps(); }
    static A prep(const std::uint16_t* a) {
        return (__m512bh)_mm512_set1_epi32(static_cast<int>(load_u32(a)));
    }
    static Wv loadw(const std::uint8_t* w) { return (__m512bh)_mm512_loadu_si512(w); }
    static void madd(Acc& acc, const A& a, const Wv& w) { acc = _mm512_dpbf16_ps(acc, a, w); }
    static void store(const Acc& acc, float* c) { _mm512_storeu_ps(c, acc); }
};
#endif

// ---- the tiling, shared by both kinds ---------------------------------------------------------

// Stores one finished tile row and panel: the int8 forms take the column sums.
template <class Ops>
inline void store_acc(const typename Ops::Acc& acc, std::int32_t* c, const std::int32_t* colsum) {
    Ops::store(acc, c, colsum);
}
template <class Ops>
inline void store_acc(const typename Ops::Acc& acc, float* c, const std::int32_t*) {
    Ops::store(acc, c);
}

// rows x panels accumulated over every non-empty group of k.
template <class Ops, int R, int NP, class Task>
void tile(const Task& t, index i0, index p0) {
    const PackedMatrix& w = *t.w;
    const index groups = w.groups();
    const index panel_bytes = w.pcols / group_k(w.kind) * kGroupBytes;
    const index gk = group_k(w.kind);
    typename Ops::Acc acc[R][NP];
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < NP; ++n)
            acc[r][n] = Ops::zero();
    const std::uint8_t* panel = w.data.data() + p0 * panel_bytes;
    for (index g = 0; g < groups; ++g) {
        typename Ops::A a[R];
        for (int r = 0; r < R; ++r)
            a[r] = Ops::prep(t.a + (i0 + r) * t.lda + g * gk);
        for (int n = 0; n < NP; ++n) {
            const typename Ops::Wv wv = Ops::loadw(panel + n * panel_bytes + g * kGroupBytes);
            for (int r = 0; r < R; ++r)
                Ops::madd(acc[r][n], a[r], wv);
        }
    }
    const std::int32_t* colsum = w.colsum.empty() ? nullptr : w.colsum.data();
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < NP; ++n)
            store_acc<Ops>(acc[r][n], t.c + (i0 + r) * t.ldc + (p0 + n) * kPanel,
                           colsum ? colsum + (p0 + n) * kPanel : nullptr);
}

// The tile of r <= R rows and np <= NP panels, chosen at run time among the instances.
template <class Ops, int R, int NP, class Task>
void tile_of(int r, int np, const Task& t, index i0, index p0) {
    if constexpr (R > 1)
        if (r < R) return tile_of<Ops, R - 1, NP>(r, np, t, i0, p0);
    if constexpr (NP > 1)
        if (np < NP) return tile_of<Ops, R, NP - 1>(r, np, t, i0, p0);
    tile<Ops, R, NP>(t, i0, p0);
}

// Rows [m0, m1) x panels [p0, p1): row tiles outside, so a tile's activations stay in L1 while
// the panels stream past. A single row uses wider tiles: its sums need more independent chains.
template <class Ops, class Task>
void block(const Task& t, index m0, index m1, index p0, index p1) {
    constexpr int kWide = Ops::kNP1 > Ops::kNP ? Ops::kNP1 : Ops::kNP;
    for (index i = m0; i < m1; i += Ops::kMR) {
        const int r = static_cast<int>(m1 - i < Ops::kMR ? m1 - i : Ops::kMR);
        const index step = r == 1 ? Ops::kNP1 : Ops::kNP;
        for (index p = p0; p < p1; p += step) {
            const int np = static_cast<int>(p1 - p < step ? p1 - p : step);
            tile_of<Ops, Ops::kMR, kWide>(r, np, t, i, p);
        }
    }
}

#if RNNFAST_QINT8
void int8_block(const Int8Task& t, index m0, index m1, index p0, index p1) {
    block<Int8Ops>(t, m0, m1, p0, p1);
}
#endif
#if RNNFAST_QBF16
void bf16_block(const Bf16Task& t, index m0, index m1, index p0, index p1) {
    block<Bf16Ops>(t, m0, m1, p0, p1);
}
#endif

// Constant-initialised: no code of this path runs at load time.
constexpr QuantKernels kKernels = {RNNFAST_QPATH_NAME,
#if RNNFAST_QINT8
                                   &int8_block,
#else
                                   nullptr,
#endif
#if RNNFAST_QBF16
                                   &bf16_block
#else
                                   nullptr
#endif
};

}  // namespace

const QuantKernels& kernels() {
    return kKernels;
}

}  // namespace RNNFAST_QPATH_NS
}  // namespace rnnfast::quantized
