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
#include <utility>

#if RNNFAST_QINT8 > 1 || RNNFAST_QBF16 > 1 || defined(__SSE2__)
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
#if RNNFAST_QINT8 == 1 && defined(__SSE2__)
// The baseline of x86-64 has SSE2: pmaddwd on sign-extended int16 (exact, as the avx2 form), 128
// bits wide. A quarter of a group (4 columns x 4 k's) extends to two int16 vectors of 2 columns.
struct Int8Ops {
    static constexpr int kMR = 1, kNP = 1, kNP1 = 1, kGroupK = 4;
    struct Acc {
        __m128i q[8];  // columns 2i, 2i + 1 as (k0k1, k2k3) pairs
    };
    typedef __m128i A;
    struct Wv {
        __m128i q[8];
    };
    static __m128i widen_lo(__m128i x) { return _mm_srai_epi16(_mm_unpacklo_epi8(x, x), 8); }
    static __m128i widen_hi(__m128i x) { return _mm_srai_epi16(_mm_unpackhi_epi8(x, x), 8); }
    static Acc zero() {
        Acc z;
        for (auto& q : z.q)
            q = _mm_setzero_si128();
        return z;
    }
    static A prep(const std::int8_t* a) {
        const __m128i four = widen_lo(_mm_cvtsi32_si128(static_cast<int>(load_u32(a))));
        return _mm_unpacklo_epi64(four, four);
    }
    static Wv loadw(const std::uint8_t* w) {
        Wv v;
        for (int q = 0; q < 4; ++q) {
            const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 * q));
            v.q[2 * q] = widen_lo(x);
            v.q[2 * q + 1] = widen_hi(x);
        }
        return v;
    }
    static void madd(Acc& acc, const A& a, const Wv& w) {
        for (int i = 0; i < 8; ++i)
            acc.q[i] = _mm_add_epi32(acc.q[i], _mm_madd_epi16(a, w.q[i]));
    }
    static void store(const Acc& acc, std::int32_t* c, const std::int32_t*) {
        for (int i = 0; i < 8; ++i) {
            std::int32_t lanes[4];
            _mm_storeu_si128(reinterpret_cast<__m128i*>(lanes), acc.q[i]);
            c[2 * i] = lanes[0] + lanes[1];
            c[2 * i + 1] = lanes[2] + lanes[3];
        }
    }
};
#elif RNNFAST_QINT8 == 1
struct Int8Ops {
    static constexpr int kMR = 2, kNP = 1, kNP1 = 2, kGroupK = 4;
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
    static constexpr int kMR = 2, kNP = 1, kNP1 = 2, kGroupK = 4;
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
    // Quarters q, q + 1 hold columns 4q..4q+7 as (k0k1, k2k3) pairs; vphaddd sums the pairs
    // within 128-bit lanes ([c0 c1 c4 c5 | c2 c3 c6 c7]) and vpermq puts the columns in order.
    static void store(const Acc& acc, std::int32_t* c, const std::int32_t*) {
        for (int q = 0; q < 4; q += 2) {
            const __m256i sums = _mm256_hadd_epi32(acc.q[q], acc.q[q + 1]);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 4 * q),
                                _mm256_permute4x64_epi64(sums, 0xD8));
        }
    }
};
#elif RNNFAST_QINT8 == 3 || RNNFAST_QINT8 == 4
// s8 activations become u8 by flipping the sign bit (q + 128); the bias that adds is removed at
// the store from the column sums.
#if RNNFAST_QINT8 == 3
struct Int8Ops {
    static constexpr int kMR = 4, kNP = 1, kNP1 = 4, kGroupK = 4;
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
    static constexpr int kMR = 4, kNP = 4, kNP1 = 8, kGroupK = 4;
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
#if RNNFAST_QBF16 == 1 && defined(__SSE2__)
// The avx2 form at 128 bits, with a multiply and an add (SSE2 has no FMA).
struct Bf16Ops {
    static constexpr int kMR = 1, kNP = 1, kNP1 = 1, kGroupK = 2;
    struct Acc {
        __m128 q[4];
    };
    struct A {
        __m128 k0, k1;
    };
    struct Wv {
        __m128 k0[4], k1[4];
    };
    static Acc zero() {
        Acc z;
        for (auto& q : z.q)
            q = _mm_setzero_ps();
        return z;
    }
    static A prep(const std::uint16_t* a) {
        return A{_mm_set1_ps(bf16_to_float(a[0])), _mm_set1_ps(bf16_to_float(a[1]))};
    }
    static Wv loadw(const std::uint8_t* w) {
        Wv v;
        const __m128i high = _mm_set1_epi32(static_cast<int>(0xFFFF0000u));
        for (int q = 0; q < 4; ++q) {
            const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 * q));
            v.k0[q] = _mm_castsi128_ps(_mm_slli_epi32(x, 16));
            v.k1[q] = _mm_castsi128_ps(_mm_and_si128(x, high));
        }
        return v;
    }
    static void madd(Acc& acc, const A& a, const Wv& w) {
        for (int q = 0; q < 4; ++q) {
            acc.q[q] = _mm_add_ps(acc.q[q], _mm_mul_ps(a.k0, w.k0[q]));
            acc.q[q] = _mm_add_ps(acc.q[q], _mm_mul_ps(a.k1, w.k1[q]));
        }
    }
    static void store(const Acc& acc, float* c) {
        for (int q = 0; q < 4; ++q)
            _mm_storeu_ps(c + 4 * q, acc.q[q]);
    }
};
#elif RNNFAST_QBF16 == 1
struct Bf16Ops {
    static constexpr int kMR = 2, kNP = 1, kNP1 = 2, kGroupK = 2;
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
    static constexpr int kMR = 4, kNP = 1, kNP1 = 2, kGroupK = 2;
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
    static constexpr int kMR = 4, kNP = 4, kNP1 = 8, kGroupK = 2;
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

// ---- row passes: quantization, bf16 conversion, dequantization -------------------------------
// GCC vector types of the path's width. The float operations are the contract's, lane by lane
// (the quantized sources are built with -ffp-contract=off, so x * m + shift is not fused), and
// the tail runs through the same vector code on a zero-padded copy: one formula, no scalar twin.

constexpr int kBytes = RNNFAST_QVECTOR_BYTES;
constexpr int kLanes = kBytes / 4;
typedef float VF __attribute__((vector_size(kBytes)));
typedef std::int32_t VI __attribute__((vector_size(kBytes)));
typedef std::uint32_t VU __attribute__((vector_size(kBytes)));
typedef std::int8_t VQ __attribute__((vector_size(kLanes)));
typedef std::uint16_t VH __attribute__((vector_size(2 * kLanes)));

// n <= lanes values, zeros after. A whole vector is one fixed-size copy (an unaligned load);
// only the tail pays for a variable-length one.
template <class V>
inline V load_part(const void* p, index n) {
    V v = {};
    constexpr index kAll = sizeof(V) / sizeof(v[0]);
    if (n == kAll)
        std::memcpy(&v, p, sizeof(V));
    else
        std::memcpy(&v, p, static_cast<size_t>(n) * sizeof(v[0]));
    return v;
}
template <class V>
inline void store_part(void* p, const V& v, index n) {
    constexpr index kAll = sizeof(V) / sizeof(v[0]);
    if (n == kAll)
        std::memcpy(p, &v, sizeof(V));
    else
        std::memcpy(p, &v, static_cast<size_t>(n) * sizeof(v[0]));
}

template <class V, class T>
inline V splat_of(T x) {
    V v;
    for (int l = 0; l < static_cast<int>(sizeof(V) / sizeof(T)); ++l)
        v[l] = x;
    return v;
}

// The low byte of each int32 lane (the values lie in [-127, 127]): one byte shuffle. (A
// convertvector from int32 to int8 lanes was taken apart lane by lane by GCC 12.)
typedef std::int8_t VB __attribute__((vector_size(kBytes)));
template <std::size_t... I>
inline VQ low_bytes_of(VI v, std::index_sequence<I...>) {
    const VB picked =
        __builtin_shuffle((VB)v, VB{static_cast<std::int8_t>(I < kLanes ? 4 * I : 0)...});
    VQ out;
    std::memcpy(&out, &picked, sizeof out);
    return out;
}
inline VQ low_bytes(VI v) {
    return low_bytes_of(v, std::make_index_sequence<kBytes>{});
}

// Lane l + half folded onto lane l, log2(lanes) times: the horizontal max and "any" of a row.
template <int Half, std::size_t... I>
inline VF fold(VF v, std::index_sequence<I...>) {
    return __builtin_shuffle(v, VI{static_cast<std::int32_t>((I + Half) % kLanes)...});
}
template <int Half, std::size_t... I>
inline VI fold(VI v, std::index_sequence<I...>) {
    return __builtin_shuffle(v, VI{static_cast<std::int32_t>((I + Half) % kLanes)...});
}
template <int Half = kLanes / 2>
inline void reduce(VF& m, VI& bad) {
    const VF mf = fold<Half>(m, std::make_index_sequence<kLanes>{});
    bad |= fold<Half>(bad, std::make_index_sequence<kLanes>{});
    m = mf > m ? mf : m;
    if constexpr (Half > 1) reduce<Half / 2>(m, bad);
}

// max |x| (NaN skipped) and whether every value is finite.
float row_amax(const float* x, index K, bool* finite) {
    const VU magnitude = splat_of<VU>(0x7FFFFFFFu);
    const VF largest = splat_of<VF>(3.4028235e38f);
    VF m = {};
    VI bad = {};
    for (index k = 0; k < K; k += kLanes) {
        const index n = K - k < kLanes ? K - k : kLanes;
        const VF a = (VF)((VU)load_part<VF>(x + k, n) & magnitude);
        bad |= !(a <= largest);  // inf and NaN
        m = a > m ? a : m;
    }
    reduce(m, bad);
    *finite = bad[0] == 0;
    return m[0];
}

// q = clip(rint(x * mult), -127, 127); rint by adding and removing 1.5 * 2^23 (|x * mult| is
// at most 127 here, or inf / NaN where 127 / amax overflowed: NaN becomes 0).
void quantize_with(const float* x, index K, float mult, std::int8_t* q) {
    const VF shift = splat_of<VF>(12582912.0f), top = splat_of<VF>(127.0f), zero = {};
    const VF vm = splat_of<VF>(mult);
    for (index k = 0; k < K; k += kLanes) {
        const index n = K - k < kLanes ? K - k : kLanes;
        const VF y = load_part<VF>(x + k, n) * vm;
        VF r = (y + shift) - shift;
        r = r != r ? zero : r;
        r = r > top ? top : r;
        r = r < -top ? -top : r;
        store_part(q + k, low_bytes(__builtin_convertvector(r, VI)), n);
    }
}

void quantize_row(const float* x, index K, std::int8_t* q, float* scale, bool tanh_state) {
    bool finite;
    const float amax = row_amax(x, K, &finite);
    if (tanh_state && finite && amax <= 1.0f) {
        *scale = 1.0f / 127.0f;
        quantize_with(x, K, 127.0f, q);
    } else if (!finite || amax == 0.0f) {  // NaN scale makes the products NaN; zeros give 0
        *scale = finite ? 0.0f : __builtin_nanf("");
        std::memset(q, 0, static_cast<size_t>(K));
    } else {
        *scale = amax / 127.0f;
        quantize_with(x, K, 127.0f / amax, q);
    }
}

void quantize_rows(const float* x, index ldx, index rows, index K, std::int8_t* q, index ldq,
                   float* scale, bool tanh_state) {
    for (index r = 0; r < rows; ++r)
        quantize_row(x + r * ldx, K, q + r * ldq, scale + r, tanh_state);
}

// Round to nearest even on the bits; a NaN keeps its sign and top payload bits, made quiet.
void bf16_row(const float* x, index K, std::uint16_t* b) {
    const VU magnitude = splat_of<VU>(0x7FFFFFFFu), inf = splat_of<VU>(0x7F800000u);
    for (index k = 0; k < K; k += kLanes) {
        const index n = K - k < kLanes ? K - k : kLanes;
        const VU u = (VU)load_part<VF>(x + k, n);
        const VU rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
        const VU quiet = (u >> 16) | 0x40u;
        const VU r = (u & magnitude) > inf ? quiet : rounded;
        store_part(b + k, __builtin_convertvector(r, VH), n);
    }
}

void bf16_rows(const float* x, index ldx, index rows, index K, std::uint16_t* b, index ldb) {
    for (index r = 0; r < rows; ++r)
        bf16_row(x + r * ldx, K, b + r * ldb);
}

void finish_int8_rows(const std::int32_t* acc, index ldacc, index rows, const float* s_a,
                      const float* s_w, const float* add, index add_rs, float* dst, index ldd,
                      index n) {
    for (index r = 0; r < rows; ++r) {
        const VF sa = splat_of<VF>(s_a[r]);
        for (index j = 0; j < n; j += kLanes) {
            const index m = n - j < kLanes ? n - j : kLanes;
            VF v = __builtin_convertvector(load_part<VI>(acc + r * ldacc + j, m), VF) *
                   (sa * load_part<VF>(s_w + j, m));
            if (add) v = v + load_part<VF>(add + r * add_rs + j, m);
            store_part(dst + r * ldd + j, v, m);
        }
    }
}

void finish_bf16_rows(const float* acc, index ldacc, index rows, const float* add, index add_rs,
                      float* dst, index ldd, index n) {
    for (index r = 0; r < rows; ++r)
        for (index j = 0; j < n; j += kLanes) {
            const index m = n - j < kLanes ? n - j : kLanes;
            VF v = load_part<VF>(acc + r * ldacc + j, m);
            if (add) v = v + load_part<VF>(add + r * add_rs + j, m);
            store_part(dst + r * ldd + j, v, m);
        }
}

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
    const index panel_bytes = w.panel_bytes();
    constexpr index gk = Ops::kGroupK;
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

// Rows [m0, m1) x panels [p0, p1): panel blocks outside, row tiles inside, so a block of
// weights (NP panels x all of K: 64 KiB of int8 at K = 1024) is read from memory once and then
// from L2 by every row tile, while a row tile's activations come from L1. (Rows outside
// streamed the whole matrix from L3 once per row tile: bf16 at B = 64, H = 1024 ran below
// float32.) A single row uses wider tiles: its sums need more independent chains.
template <class Ops, class Task>
void block(const Task& t, index m0, index m1, index p0, index p1) {
    constexpr int kWide = Ops::kNP1 > Ops::kNP ? Ops::kNP1 : Ops::kNP;
    const index step = m1 - m0 == 1 ? Ops::kNP1 : Ops::kNP;
    for (index p = p0; p < p1; p += step) {
        const int np = static_cast<int>(p1 - p < step ? p1 - p : step);
        for (index i = m0; i < m1; i += Ops::kMR) {
            const int r = static_cast<int>(m1 - i < Ops::kMR ? m1 - i : Ops::kMR);
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
constexpr QuantKernels kKernels = {
    RNNFAST_QPATH_NAME,
#if RNNFAST_QINT8
    &int8_block,
#else
    nullptr,
#endif
#if RNNFAST_QBF16
    &bf16_block,
#else
    nullptr,
#endif
    {&quantize_rows, &bf16_rows, &finish_int8_rows, &finish_bf16_rows}};

}  // namespace

const QuantKernels& kernels() {
    return kKernels;
}

}  // namespace RNNFAST_QPATH_NS
}  // namespace rnnfast::quantized
