// The one source of the SIMD kernels. It is compiled once per ISA target by the
// kernels_<isa>.cpp files, which define RNNFAST_ISA_NS (the namespace), RNNFAST_ISA_NAME and
// RNNFAST_VECTOR_BYTES (the vector width) and are built with that target's compiler flags.
//
// Everything here lives in an anonymous namespace inside the ISA's namespace and calls no
// standard-library template that emits code (compile-time helpers such as std::index_sequence
// are fine): an inline template instantiated in two translation units built
// with different -m flags could be merged by the linker into the wider ISA's copy and then
// run on a CPU that lacks it.

#include <cmath>
#if defined(RNNFAST_BF16_PRODUCTS)
#include <immintrin.h>
#endif
#include <cstring>
#include <type_traits>
#include <utility>

#include "rnnfast/runtime/cache_info.hpp"
#include "rnnfast/runtime/kernel_table.hpp"
#include "rnnfast/runtime/scratch.hpp"

namespace rnnfast {
namespace RNNFAST_ISA_NS {
namespace {

constexpr int kVectorBytes = RNNFAST_VECTOR_BYTES;
// The register tile, from the ISA's vector register count alone: kNV vectors across (two keep
// the panels narrow, so N splits finely between threads and edges waste little) by kMR rows,
// as many as fit with the kNV B vectors and one broadcast of A beside the accumulators
// (AVX-512's 32 registers: 14 x 2; AVX2's and SSE's 16: 6 x 2).
constexpr int kVectorRegisters = RNNFAST_VECTOR_REGISTERS;
constexpr int kNV = 2;
constexpr int kMR = (kVectorRegisters - kNV - 1) / kNV;

template <class T>
struct Simd {
    typedef T vec __attribute__((vector_size(kVectorBytes)));
    static constexpr int W = kVectorBytes / static_cast<int>(sizeof(T));
    static constexpr int NR = kNV * W;
};

template <class V>
inline V load(const void* p) {
    V v;
    std::memcpy(&v, p, sizeof(V));  // compiles to an unaligned vector load
    return v;
}
template <class V>
inline void store(void* p, V v) {
    std::memcpy(p, &v, sizeof(V));
}
// ---- exp(y) for y <= 0 and tanh -------------------------------------------------------------
// Constants per dtype: Taylor coefficients of exp on |r| <= ln2/2 (float: degree 7, truncation
// < 6e-9; double: degree 13, < 5e-18), and of tanh near zero, where exp-based tanh cancels.

template <class T>
struct TanhConstants;

template <>
struct TanhConstants<float> {
    static constexpr int exp_degree = 7;
    static constexpr float clamp = 9.0f;               // tanh(9) rounds to 1 in float
    static constexpr float small = 0.25f;              // below: odd Taylor series, 5 terms
    static constexpr int taylor_terms = 5;             // first omitted term < 1e-8 relative
    static constexpr float round_shift = 12582912.0f;  // 1.5 * 2^23
};
template <>
struct TanhConstants<double> {
    static constexpr int exp_degree = 13;
    static constexpr double clamp = 19.5;   // tanh(19.5) rounds to 1 in double
    static constexpr double small = 0.15;   // below: odd Taylor series, 9 terms
    static constexpr int taylor_terms = 9;  // first omitted term < 5e-19 relative
    static constexpr double round_shift = 6755399441055744.0;  // 1.5 * 2^52
};

// Coefficients of tanh(x) = sum c_k x^(2k+1), from the Bernoulli numbers.
constexpr double kTanhTaylor[9] = {1.0,
                                   -0.3333333333333333,
                                   0.13333333333333333,
                                   -0.05396825396825397,
                                   0.021869488536155203,
                                   -0.008863235529902197,
                                   0.003592128036572481,
                                   -0.0014558343870513183,
                                   0.000590027440945586};

struct InverseFactorials {
    double v[14];
    constexpr InverseFactorials() : v{} {
        v[0] = 1.0;
        for (int k = 1; k < 14; ++k)
            v[k] = v[k - 1] / k;
    }
};
constexpr InverseFactorials kInverseFactorialTable{};
constexpr const double* kInverseFactorial = kInverseFactorialTable.v;

template <class T>
struct IntFor;
template <>
struct IntFor<float> {
    typedef unsigned int type;
    static constexpr int mantissa_bits = 23;
    static constexpr unsigned int bias = 127;
};
template <>
struct IntFor<double> {
    typedef unsigned long long type;
    static constexpr int mantissa_bits = 52;
    static constexpr unsigned long long bias = 1023;
};

// x in every lane, written as a braced list of W copies: GCC turns it into one vbroadcast
// (from memory when x was just loaded), which the GEMM's inner loop needs once per row and k.
template <class V, class T, std::size_t... I>
inline V splat_lanes(T x, std::index_sequence<I...>) {
    return V{((void)I, x)...};
}
template <class V, class T>
inline V splat(T x) {
    return splat_lanes<V>(x, std::make_index_sequence<sizeof(V) / sizeof(T)>{});
}

// exp(y) for y in [-2 * clamp, 0]: y = n ln2 + r, exp(y) = 2^n * p(r).
// The element-wise functions below are forced inline: the fused cell kernels call five per
// vector of units, and as calls (GCC's choice at their size) their chains could not overlap.
#define RNNFAST_ALWAYS_INLINE inline __attribute__((always_inline))

template <class T>
RNNFAST_ALWAYS_INLINE typename Simd<T>::vec vexp_nonpositive(typename Simd<T>::vec y) {
    using V = typename Simd<T>::vec;
    using C = TanhConstants<T>;
    using U = typename IntFor<T>::type;
    typedef U VU __attribute__((vector_size(kVectorBytes)));
    const T log2e = static_cast<T>(1.4426950408889634);
    const T ln2_hi = static_cast<T>(0.693145751953125);  // few mantissa bits: n*ln2_hi exact
    const T ln2_lo = static_cast<T>(1.4286068203094172321e-06);
    // Adding 1.5*2^m rounds to an integer held in the low mantissa bits of kd.
    V kd = y * log2e + C::round_shift;
    V n = kd - C::round_shift;
    V r = y - n * ln2_hi;
    r = r - n * ln2_lo;
    // p(r) = sum r^k / k!, by Horner: one FMA per degree on the dependency chain.
    V p = splat<V>(static_cast<T>(kInverseFactorial[C::exp_degree]));
    for (int k = C::exp_degree - 1; k >= 0; --k)
        p = p * r + static_cast<T>(kInverseFactorial[k]);
    // 2^n: the integer in kd's low bits, re-biased and shifted into the exponent field.
    VU bits = (VU)kd;
    bits = (bits + IntFor<T>::bias) << IntFor<T>::mantissa_bits;
    return p * (V)bits;
}

// Vector tanh: odd Taylor series for |x| < small; otherwise sign(x) (1 - e) / (1 + e) with
// e = exp(-2|x|). NaN passes through. Tested against np.tanh over the float range.
template <class T>
RNNFAST_ALWAYS_INLINE typename Simd<T>::vec vtanh(typename Simd<T>::vec x) {
    using V = typename Simd<T>::vec;
    using C = TanhConstants<T>;
    V ax = x < 0 ? -x : x;
    V clamped = ax > C::clamp ? splat<V>(C::clamp) : ax;
    V e = vexp_nonpositive<T>(static_cast<T>(-2) * clamped);
    V large = (static_cast<T>(1) - e) / (static_cast<T>(1) + e);
    V x2 = ax * ax;
    V poly = splat<V>(static_cast<T>(kTanhTaylor[C::taylor_terms - 1]));
    for (int k = C::taylor_terms - 2; k >= 0; --k)
        poly = poly * x2 + static_cast<T>(kTanhTaylor[k]);
    V small = poly * ax;
    V magnitude = ax < C::small ? small : large;
    V result = x < 0 ? -magnitude : magnitude;
    return x != x ? x : result;
}

template <class T>
inline typename Simd<T>::vec apply_epilogue(Epilogue op, typename Simd<T>::vec x,
                                            typename Simd<T>::vec aux) {
    using V = typename Simd<T>::vec;
    const V zero = {};
    const V one = splat<V>(static_cast<T>(1));
    switch (op) {
        case Epilogue::none:
            return x;
        case Epilogue::tanh:
            return vtanh<T>(x);
        case Epilogue::relu:
            return x < 0 ? zero : x;  // NaN is not < 0, so it passes through as in np.maximum
        case Epilogue::tanh_grad:
            return x * (one - aux * aux);
        case Epilogue::relu_grad:
            return x * (aux > 0 ? one : zero);  // multiply, so a NaN gradient stays NaN
    }
    return x;
}

// ---- packing ----------------------------------------------------------------------------------

// An integer vector of lane indices, the mask type of __builtin_shuffle for T's vectors.
template <class T>
struct LaneMask {
    typedef typename IntFor<T>::type type __attribute__((vector_size(kVectorBytes)));
};

template <class T>
index packed_b_size(index K, index N) {
    const index nr = Simd<T>::NR;
    return K * ((N + nr - 1) / nr) * nr;
}

// A W x W block transposed in registers: v[i][j] becomes v[j][i]. Each stage b (W/2 down to 1)
// swaps the off-diagonal b x b blocks of every 2b x 2b block, by one two-source shuffle per
// output vector: W log2(W) shuffles for W x W values (AVX-512 floats: 64 for 256), where a
// scalar transpose moves each value on its own.
template <class T, int B, int High>
constexpr typename IntFor<T>::type swap_lane(std::size_t l) {
    constexpr int W = Simd<T>::W;
    const int lane = static_cast<int>(l);
    const bool upper = (lane & B) != 0;  // the lane's position in its 2b block
    // the low output takes x's lane where the lane is in the upper-left block, y's (shifted
    // down by b) where it is in the lower-left one; the high output the other two blocks
    if (High == 0) return static_cast<typename IntFor<T>::type>(upper ? W + lane - B : lane);
    return static_cast<typename IntFor<T>::type>(upper ? W + lane : lane + B);
}
template <class T, int B, std::size_t... I>
inline void swap_blocks(typename Simd<T>::vec* v, std::index_sequence<I...>) {
    constexpr int W = Simd<T>::W;
    const typename LaneMask<T>::type lo{swap_lane<T, B, 0>(I)...}, hi{swap_lane<T, B, 1>(I)...};
    for (int i = 0; i < W; ++i)
        if ((i & B) == 0) {
            const typename Simd<T>::vec x = v[i], y = v[i + B];
            v[i] = __builtin_shuffle(x, y, lo);
            v[i + B] = __builtin_shuffle(x, y, hi);
        }
}
template <class T, int B = Simd<T>::W / 2>
inline void transpose_block(typename Simd<T>::vec* v) {
    if constexpr (B >= 1) {
        swap_blocks<T, B>(v, std::make_index_sequence<Simd<T>::W>{});
        transpose_block<T, B / 2>(v);
    }
}

// The panel of a transposed B (rs == 1: column j of B is a contiguous run of K values, the row
// j of a stored W), W k's at a time: W columns' runs loaded as W vectors, transposed in
// registers, stored as W rows of the panel. Columns past `cols` load as zeros. The k's past a
// multiple of W are left to the caller's scalar loop; returns how many were packed.
template <class T>
index pack_panel_transposed(MatView<T> B, index K, index j0, index cols, T* panel) {
    using V = typename Simd<T>::vec;
    constexpr int W = Simd<T>::W, NR = Simd<T>::NR;
    const index kv = K / W * W;
    for (index k = 0; k < kv; k += W)
        for (int g = 0; g < kNV; ++g) {
            V v[W];
            for (int c = 0; c < W; ++c) {
                const index j = g * W + c;
                v[c] = j < cols ? load<V>(B.p + (j0 + j) * B.cs + k) : V{};
            }
            transpose_block<T>(v);
            for (int r = 0; r < W; ++r)
                store(panel + (k + r) * NR + g * W, v[r]);
        }
    return kv;
}

// Panel p holds columns [p*NR, p*NR + NR) of B for every k, NR contiguous values per k,
// zero-padded.
template <class T>
void pack_b(MatView<T> B, index K, index N, index p0, index p1, T* dst) {
    const index nr = Simd<T>::NR;
    for (index p = p0; p < p1; ++p) {
        T* panel = dst + p * K * nr;
        const index j0 = p * nr;
        const index cols = N - j0 < nr ? N - j0 : nr;
        const index k_done =
            B.rs == 1 && B.cs != 1 ? pack_panel_transposed(B, K, j0, cols, panel) : 0;
        for (index k = k_done; k < K; ++k) {
            T* out = panel + k * nr;
            const T* row = B.p + k * B.rs + j0 * B.cs;
            index j = 0;
            if (B.cs == 1) {
                for (; j < cols; ++j)
                    out[j] = row[j];
            } else {
                for (; j < cols; ++j)
                    out[j] = row[j * B.cs];
            }
            for (; j < nr; ++j)
                out[j] = T(0);
        }
    }
}

// ---- GEMM -------------------------------------------------------------------------------------

// One pass of the K loop over a k-block: where it starts, how long it is, and what the
// epilogue does at its end (only the first pass adds C or the bias, only the last applies op).
template <class T>
struct KPass {
    index k0, kc;
    bool accumulate;
    const T* bias;
    Epilogue op;
};

// Adds what the pass needs to one register-tile row and stores it. `c`, `bias`, `aux` point
// at NR readable values (callers pass scratch copies at the right edge of C).
template <class T>
inline void finish_row(const KPass<T>& pass, const typename Simd<T>::vec* acc, T* c, const T* bias,
                       const T* aux) {
    using V = typename Simd<T>::vec;
    constexpr int W = Simd<T>::W;
    for (int v = 0; v < kNV; ++v) {
        V x = acc[v];
        if (pass.accumulate) x += load<V>(c + v * W);
        if (bias) x += load<V>(bias + v * W);
        V a = aux ? load<V>(aux + v * W) : V{};
        store(c + v * W, apply_epilogue<T>(pass.op, x, a));
    }
}

// Independent accumulator sets for short tiles: one or two rows alone would leave the FMA
// units waiting on their own latency chain, so k is interleaved over enough sets to keep
// kFmaChains products in flight (two FMA ports x four cycles of latency), as far as the
// accumulators still fit the registers beside the B vectors and the broadcast.
constexpr int kFmaChains = 8;
template <int MR>
constexpr int interleave() {
    constexpr int per_set = MR * kNV;
    constexpr int wanted = (kFmaChains + per_set - 1) / per_set;
    constexpr int fit = (kVectorRegisters - kNV - 1) / per_set;
    return wanted < fit ? wanted : (fit > 1 ? fit : 1);
}

// The rows of A a register tile reads, (r, k) for r < MR and k within the pass. Packed: a
// sliver of MR values per k, contiguous, so one pointer serves every row and each broadcast
// is a load from a constant offset. In place: A as the task gives it, one pointer per row; only
// an A whose rows are contiguous along k is read so (gemm_block packs any other), so a row's
// k-th value is at row[r][k], with no column stride to multiply by on every k.
template <class T, int MR>
struct PackedRows {
    const T* p;
    T operator()(int r, index k) const { return p[k * MR + r]; }
};
template <class T, int MR>
struct InPlaceRows {
    const T* row[MR];
    T operator()(int r, index k) const { return row[r][k]; }
};

// Rows [R0, kMR) of a full sliver of a row-major A (cs == 1), W k's of them: the rows'
// runs loaded as vectors (W rows at a time, zeros past the sliver), transposed in registers
// (transpose_block), and each k's run of the group's rows stored where PackedRows reads it.
template <class T, int R0 = 0>
inline void pack_sliver_block(const T* src, index rs, T* out) {
    if constexpr (R0 < kMR) {
        using V = typename Simd<T>::vec;
        constexpr int W = Simd<T>::W, n = kMR - R0 < W ? kMR - R0 : W;
        V v[W];
        for (int r = 0; r < W; ++r)
            v[r] = r < n ? load<V>(src + (R0 + r) * rs) : V{};
        transpose_block<T>(v);
        for (int c = 0; c < W; ++c)
            std::memcpy(out + c * kMR + R0, &v[c], sizeof(T) * n);
        pack_sliver_block<T, R0 + W>(src, rs, out);
    }
}

// Packs rows [m0, m1) x columns [k0, k0 + kc) of A into slivers of kMR rows (the last one
// shorter), sliver s at dst + s * kMR * kc, each laid out as PackedRows reads it. The loop
// runs along whichever of A's dimensions is contiguous; a full sliver of a row-major A (the
// input projection's x, the weight gradients' operands) goes W k's at a time through
// registers: value by value it took 7% of a 1600 x 1024 x 1024 product's time.
template <class T>
void pack_a(MatView<T> A, index m0, index m1, index k0, index kc, T* dst) {
    for (index i = m0; i < m1; i += kMR) {
        const index h = m1 - i < kMR ? m1 - i : kMR;
        T* out = dst + (i - m0) * kc;
        const T* src = A.p + i * A.rs + k0 * A.cs;
        if (A.rs == 1 && h == kMR) {  // a full sliver: a fixed-size copy per k, in vectors
            for (index k = 0; k < kc; ++k)
                std::memcpy(out + k * kMR, src + k * A.cs, sizeof(T) * kMR);
        } else if (A.rs == 1) {
            for (index k = 0; k < kc; ++k)
                for (index r = 0; r < h; ++r)
                    out[k * h + r] = src[k * A.cs + r];
        } else {
            index k_done = 0;
            if (A.cs == 1 && h == kMR) {
                constexpr int W = Simd<T>::W;
                for (; k_done + W <= kc; k_done += W) {
                    // The next sliver's rows at these k's, a line per row: read across rows,
                    // W k's at a time, A's lines come from memory slower than the same rows
                    // read one after another (RNN 100x128x128x128, float32, AVX-512, Zen 4:
                    // the pack took 11% of the forward, 7% value by value, 6% so).
                    if ((k_done * index(sizeof(T))) % 64 == 0)
                        for (int r = 0; r < kMR; ++r)
                            __builtin_prefetch(src + (kMR + r) * A.rs + k_done);
                    pack_sliver_block<T>(src + k_done, A.rs, out + k_done * kMR);
                }
            }
            for (index r = 0; r < h; ++r)
                for (index k = k_done; k < kc; ++k)
                    out[k * h + r] = src[r * A.rs + k * A.cs];
        }
    }
}

// The B panel is asked for kPrefetchBytes ahead of the k loop: for the recurrent step (M = B
// small, W_hh read from L3 at every step) the hardware's prefetchers left the FMAs waiting
// (float32, AVX-512, 1 thread: M=16, H=2048 41 -> 76-97 GFLOP/s; M=64, H=1024 100-115 -> 140;
// 1600 x 1024 x 1024 +3%; small shapes in L1 unchanged). 8 KiB ahead gained nothing at
// M=16, H=2048; 1 KiB ahead half as much. One prefetch per cache line of a k-row of the panel.
// Tiles of fewer than kPrefetchMinRows rows are bound by their loads: they prefetch only a B
// that does not fit L1 (`far`). At M=1, H=64 (W in L1) the prefetches cost ~10%; from
// H=128 on they gain 5-15%, and M=1, H=2048 ran 5.6 -> 10.4-11.9 GFLOP/s with them.
constexpr int kPrefetchBytes = 4096;
constexpr int kPrefetchMinRows = 4;
template <class T>
constexpr index kPrefetchSteps = kPrefetchBytes / (Simd<T>::NR * static_cast<int>(sizeof(T)));
template <class T>
inline void prefetch_panel(const T* row) {
    constexpr int bytes = Simd<T>::NR * static_cast<int>(sizeof(T));
    for (int line = 0; line < (bytes + 63) / 64; ++line)
        __builtin_prefetch(reinterpret_cast<const char*>(row) + line * 64, 0, 3);
}
// The MR rows of a C tile (NR values each), for writing.
template <class T, int MR>
inline void prefetch_tile_rows(const T* c, index ldc) {
    constexpr int bytes = Simd<T>::NR * static_cast<int>(sizeof(T));
    for (int i = 0; i < MR; ++i)
        for (int line = 0; line < (bytes + 63) / 64; ++line)
            __builtin_prefetch(reinterpret_cast<const char*>(c + i * ldc) + line * 64, 1, 3);
}

// The pass's epilogue on a register tile's sums (MR rows of NR), stored to C's rows
// [i0, i0 + rows), `cols` columns from j0. The float tile and the bf16 products' tiles share it.
template <class T, int MR>
inline void finish_tile(const GemmTask<T>& t, const KPass<T>& pass, index i0,
                        const typename Simd<T>::vec (&acc)[MR][kNV], int cols, index j0,
                        int rows = MR) {
    constexpr int NR = Simd<T>::NR;
    for (int i = 0; i < rows; ++i) {
        T* c = t.C + (i0 + i) * t.ldc + j0;
        const T* bias = pass.bias ? pass.bias + j0 : nullptr;
        const T* aux =
            t.aux && pass.op != Epilogue::none ? t.aux + (i0 + i) * t.ldaux + j0 : nullptr;
        if (cols == NR) {
            finish_row<T>(pass, acc[i], c, bias, aux);
        } else {
            // Right edge: run the same vector epilogue on zero-padded copies, store `cols` values.
            T cbuf[NR] = {}, bbuf[NR] = {}, abuf[NR] = {};
            for (int j = 0; j < cols; ++j) {
                if (pass.accumulate) cbuf[j] = c[j];
                if (bias) bbuf[j] = bias[j];
                if (aux) abuf[j] = aux[j];
            }
            finish_row<T>(pass, acc[i], cbuf, bias ? bbuf : nullptr, aux ? abuf : nullptr);
            for (int j = 0; j < cols; ++j)
                c[j] = cbuf[j];
        }
    }
}

// acc[MR][NV] = A[rows, k-block] * panel (one broadcast per row and k), then the pass's
// epilogue. The same arithmetic, in the same order, whichever way A is read.
template <class T, int MR, class Rows>
inline void tile(const GemmTask<T>& t, const KPass<T>& pass, index i0, const Rows& a,
                 const T* panel, int cols, index j0, bool far) {
    using V = typename Simd<T>::vec;
    constexpr int W = Simd<T>::W;
    constexpr int NR = Simd<T>::NR;
    constexpr int U = interleave<MR>();
    V acc[U][MR][kNV];
    for (int u = 0; u < U; ++u)
        for (int i = 0; i < MR; ++i)
            for (int v = 0; v < kNV; ++v)
                acc[u][i][v] = V{};
    // The C tile is asked for now, for writing, so that its lines have arrived by the epilogue:
    // a large C (the projections, the weight gradients) is read and written once per k-block,
    // and without this each pass ended on MR x NR misses to L3 or memory.
    if (MR >= kPrefetchMinRows && pass.kc >= kPrefetchSteps<T>)
        prefetch_tile_rows<T, MR>(t.C + i0 * t.ldc + j0, t.ldc);
    index k = 0;
    for (; k + U <= pass.kc; k += U) {
        for (int u = 0; u < U; ++u) {
            V b[kNV];
            if (MR >= kPrefetchMinRows || far)
                prefetch_panel<T>(panel + (k + u + kPrefetchSteps<T>)*NR);
            for (int v = 0; v < kNV; ++v)
                b[v] = load<V>(panel + (k + u) * NR + v * W);
            for (int i = 0; i < MR; ++i) {
                const V x = splat<V>(a(i, k + u));
                for (int v = 0; v < kNV; ++v)
                    acc[u][i][v] += x * b[v];
            }
        }
    }
    for (; k < pass.kc; ++k) {
        V b[kNV];
        for (int v = 0; v < kNV; ++v)
            b[v] = load<V>(panel + k * NR + v * W);
        for (int i = 0; i < MR; ++i) {
            const V x = splat<V>(a(i, k));
            for (int v = 0; v < kNV; ++v)
                acc[0][i][v] += x * b[v];
        }
    }
    for (int u = 1; u < U; ++u)
        for (int i = 0; i < MR; ++i)
            for (int v = 0; v < kNV; ++v)
                acc[0][i][v] += acc[u][i][v];

    finish_tile<T, MR>(t, pass, i0, acc[0], cols, j0);
}

// The tile of MR rows at i0 against one panel, reading A packed (from the M-block's slivers at
// `packed`, the block starting at row mb) or as the task gives it when packed is null.
template <class T, int MR>
inline void row_tile(const GemmTask<T>& t, const KPass<T>& pass, index i0, index mb,
                     const T* packed, const T* panel, int cols, index j0, bool far) {
    if (packed || pass.kc == 0) {  // kc == 0: the epilogue alone, nothing of A is read
        tile<T, MR>(t, pass, i0, PackedRows<T, MR>{packed + (i0 - mb) * pass.kc}, panel, cols, j0,
                    far);
    } else {
        InPlaceRows<T, MR> rows;  // t.A.cs == 1 here: gemm_block packs every other A
        for (int i = 0; i < MR; ++i)
            rows.row[i] = t.A.p + (i0 + i) * t.A.rs + pass.k0;
        tile<T, MR>(t, pass, i0, rows, panel, cols, j0, far);
    }
}

// Leftover rows (fewer than kMR) get a tile of their own height.
template <class T, int MR = kMR - 1>
inline void short_tile(int rows, const GemmTask<T>& t, const KPass<T>& pass, index i0, index mb,
                       const T* packed, const T* panel, int cols, index j0, bool far) {
    if constexpr (MR > 0) {
        if (rows == MR) return row_tile<T, MR>(t, pass, i0, mb, packed, panel, cols, j0, far);
        short_tile<T, MR - 1>(rows, t, pass, i0, mb, packed, panel, cols, j0, far);
    }
}

// The cache blocks for this ISA and dtype, from the caches of the machine it runs on.
template <class T>
GemmBlocking blocking() {
    static const GemmBlocking b =
        gemm_blocking(cache_sizes(), kMR, Simd<T>::NR, static_cast<int>(sizeof(T)));
    return b;
}

// Loops of the BLIS family: k-blocks (kc), then M-blocks (mc rows of A, in L2), then the
// panels (kc x NR of B, an eighth of L2), then the register tiles down the M-block. A is
// packed where its rows are strided (the weight gradients read delta^T: +30-50% on
// rnnfast_bench_gemm's grad rows, float32, AVX-512) and where the task has at least kPackRows rows:
// there kMR separate row streams of A per tile push the B panel out of L1, and one packed stream
// ran the projections 5-7% faster (1600 x 1024 x 1024, 800 x 1760 x 1760). The recurrent step's few
// row tiles (M = B < kPackRows) read A in place, packing it was 5-25% slower there, except
// where its rows alias in L1 (below). Both paths do the same arithmetic in the same order.
constexpr index kPackRows = 256;

template <class T>
void gemm_block(const GemmTask<T>& t, index m0, index m1, index p0, index p1) {
    constexpr int NR = Simd<T>::NR;
    const GemmBlocking bk = blocking<T>();
    // A product of few rows (the recurrent step, M = B) runs K in passes of the step's own,
    // longer k-block (GemmBlocking::kc_step). It follows the task's M, not this thread's share
    // of it, so that the sums' order, and the bits, do not depend on the thread count.
    const bool few_rows = t.M < kPackRows;
    // Rows of A whose stride is a multiple of 4 KiB (h_{t-1} at H = 1024 or 2048 floats) fall
    // in one L1 set: a tile's kMR rows then evict each other and the panel, and the step ran
    // at 54-61 GFLOP/s (float32, AVX-512, 1 thread, AMD EPYC Zen 4, M = 64 / 128, K = N = 1024
    // / 2048). Packed, 89-96 (the kernel's rate at K = 256). Packing does not change the sums.
    const bool aliased = t.A.cs == 1 && (t.A.rs * index(sizeof(T))) % 4096 == 0 && m1 - m0 > kMR;
    const bool pack = t.K > 0 && m1 > m0 && (t.A.cs != 1 || !few_rows || aliased);
    const index kb = few_rows ? bk.kc_step : bk.kc;
    const index mc = m1 - m0 < bk.mc ? m1 - m0 : bk.mc, kcmax = t.K < kb ? t.K : kb;
    // Does the packed B outgrow L1 (so that even load-bound short tiles should prefetch it)?
    const bool far = double(t.K) * double(t.N) * sizeof(T) > double(cache_sizes().l1d);
    T* packed = pack ? static_cast<T*>(thread_scratch(sizeof(T) * size_t(mc * kcmax))) : nullptr;
    index k0 = 0;
    do {  // at least once: K == 0 still runs the epilogue
        const index kc = t.K - k0 < kb ? t.K - k0 : kb;
        const bool last = k0 + kc >= t.K;
        const KPass<T> pass{k0, kc, t.accumulate || k0 > 0, k0 == 0 ? t.bias : nullptr,
                            last ? t.op : Epilogue::none};
        for (index mb = m0; mb < m1; mb += bk.mc) {
            const index me = m1 - mb < bk.mc ? m1 : mb + bk.mc;
            if (packed && kc > 0) pack_a(t.A, mb, me, k0, kc, packed);
            for (index p = p0; p < p1; ++p) {
                const index j0 = p * NR;
                const int cols = static_cast<int>(t.N - j0 < NR ? t.N - j0 : NR);
                const T* panel = t.packed_b + p * t.K * NR + k0 * NR;
                index i = mb;
                const index tiles = (me - mb + kMR - 1) / kMR, left = (me - mb) % kMR;
                if (!packed && tiles > 1 && left > 0 && left < kMR / 2) {
                    // A short last tile is load-bound (few FMAs per load of B): the rows are
                    // spread evenly instead (16 rows: 8 + 8, not 14 + 2). Each element's sum
                    // runs in the same order whatever its tile: the same bits. (A packed A is
                    // laid out in slabs of kMR rows: its tiles keep that height.)
                    for (index n = 0; n < tiles; ++n) {
                        const int rows = static_cast<int>((me - i) / (tiles - n));
                        if (rows == kMR)
                            row_tile<T, kMR>(t, pass, i, mb, packed, panel, cols, j0, far);
                        else
                            short_tile<T>(rows, t, pass, i, mb, packed, panel, cols, j0, far);
                        i += rows;
                    }
                    continue;
                }
                for (; i + kMR <= me; i += kMR)
                    row_tile<T, kMR>(t, pass, i, mb, packed, panel, cols, j0, far);
                if (i < me)
                    short_tile<T>(static_cast<int>(me - i), t, pass, i, mb, packed, panel, cols, j0,
                                  far);
            }
        }
        k0 += kc;
    } while (k0 < t.K);
}

// ---- single-step products --------------------------------------------------------------------

// Sum of the lanes by a tree: fold the upper half onto the lower, log2(W) shuffle-adds deep.
// The rotation masks are built from index sequences so that they are compile-time constants.
template <class T, int Half, std::size_t... I>
inline typename Simd<T>::vec rotate(typename Simd<T>::vec v, std::index_sequence<I...>) {
    typedef typename IntFor<T>::type M __attribute__((vector_size(kVectorBytes)));
    constexpr int W = Simd<T>::W;
    return __builtin_shuffle(v, M{static_cast<typename IntFor<T>::type>((I + Half) % W)...});
}
template <class T, int Half = Simd<T>::W / 2>
inline T sum_lanes(typename Simd<T>::vec v) {
    v += rotate<T, Half>(v, std::make_index_sequence<Simd<T>::W>{});
    if constexpr (Half > 1)
        return sum_lanes<T, Half / 2>(v);
    else
        return v[0];
}

// Four lane sums at once, by folding pairs of vectors into each other's halves: (a0, a1) and
// (a2, a3) fold into vectors holding half-sums of both, those two into one vector whose quarters
// hold the four rows' partial sums, then each quarter is summed in place. 13 shuffles and adds
// on AVX-512 floats for the four, against 32 for four separate trees.

// Lane i of fold<G>(x, y): of the 2W lanes of (x, y), out block b (of G lanes) takes block
// 2b' (+1 for the high part) of x for the first half of the out blocks, of y for the second.
template <class T, int G, int High>
constexpr typename IntFor<T>::type fold_lane(std::size_t i) {
    constexpr int W = Simd<T>::W, blocks = W / G;
    const int b = static_cast<int>(i) / G, within = static_cast<int>(i) % G;
    const int source = b < blocks / 2 ? 0 : W;
    return static_cast<typename IntFor<T>::type>(source + (2 * (b % (blocks / 2)) + High) * G +
                                                 within);
}
template <class T, int G, std::size_t... I>
inline typename Simd<T>::vec fold(typename Simd<T>::vec x, typename Simd<T>::vec y,
                                  std::index_sequence<I...>) {
    const typename LaneMask<T>::type lo{fold_lane<T, G, 0>(I)...}, hi{fold_lane<T, G, 1>(I)...};
    return __builtin_shuffle(x, y, lo) + __builtin_shuffle(x, y, hi);
}
// Lane i of a rotation by S inside each block of G lanes.
template <class T, int G, int S, std::size_t... I>
inline typename Simd<T>::vec rotate_blocks(typename Simd<T>::vec v, std::index_sequence<I...>) {
    return __builtin_shuffle(v, typename LaneMask<T>::type{static_cast<typename IntFor<T>::type>(
                                    I / G * G + (I % G + S) % G)...});
}
template <class T, int G, int S = G / 2>
inline typename Simd<T>::vec sum_blocks(typename Simd<T>::vec v) {
    if constexpr (S >= 1) {
        v += rotate_blocks<T, G, S>(v, std::make_index_sequence<Simd<T>::W>{});
        return sum_blocks<T, G, S / 2>(v);
    } else {
        return v;
    }
}
template <class T>
inline void sum_lanes4(const typename Simd<T>::vec* acc, T* sums) {
    constexpr int W = Simd<T>::W;
    using Seq = std::make_index_sequence<W>;
    const auto z01 = fold<T, W / 2>(acc[0], acc[1], Seq{});
    const auto z23 = fold<T, W / 2>(acc[2], acc[3], Seq{});
    if constexpr (W == 2) {  // one lane per half: the halves are the sums
        sums[0] = z01[0], sums[1] = z01[1], sums[2] = z23[0], sums[3] = z23[1];
    } else {
        const auto q = sum_blocks<T, W / 4>(fold<T, W / 4>(z01, z23, Seq{}));
        for (int r = 0; r < 4; ++r)
            sums[r] = q[r * (W / 4)];
    }
}

// W vectors gathered into one whose lane i is the sum of a[i]'s lanes: log2(W) levels of folds,
// each halving the vectors and the blocks (fold keeps the order: a[2i]'s blocks, then a[2i+1]'s).
template <class T, int G>
inline void fold_tree(typename Simd<T>::vec* a, int n) {
    for (int i = 0; i < n / 2; ++i)
        a[i] = fold<T, G>(a[2 * i], a[2 * i + 1], std::make_index_sequence<Simd<T>::W>{});
    if constexpr (G > 1) fold_tree<T, G / 2>(a, n / 2);
}

// Accumulator sets along k of dot_rows's groups of W rows: at least the 8 independent FMA
// chains that keep two FMA units busy through their latency of 4.
constexpr int dot_sets(int lanes) {
    return lanes >= 8 ? 1 : 8 / lanes;
}

// The columns of a row past its last whole vector (cols % W of them), as one more vector: the
// row's last W columns, overlapping the vector before, times v's, with the overlapped lanes
// masked to zero in both (so an inf there gives 0, not 0 * inf). Where cols < W there is no
// such vector (tail.on false) and those columns run one at a time. Column by column they cost
// as much as the whole vectors: GRU 150x1x50x200, AVX-512 (200 = 12 x 16 + 8), ran its forward
// in 1.5x the time AVX2 took (200 = 25 x 8).
template <class T>
struct RowTail {
    using V = typename Simd<T>::vec;
    using Mask = typename LaneMask<T>::type;
    bool on = false;
    index from = 0;  // first column of the overlapping vector (cols - W)
    V v{};
    Mask keep{};

    RowTail(const T* x, index cols) {
        constexpr int Wd = Simd<T>::W;
        if (cols % Wd == 0 || cols < Wd) return;
        on = true;
        from = cols - Wd;
        const index first_new = Wd - cols % Wd;  // lanes before it were counted already
        T lanes[Wd] = {};
        typename IntFor<T>::type bits[Wd] = {};
        for (index l = first_new; l < Wd; ++l) {
            lanes[l] = x[from + l];
            bits[l] = ~typename IntFor<T>::type(0);
        }
        v = load<V>(lanes);
        keep = load<Mask>(bits);
    }
    // row . v over the tail columns, in lanes (row: the start of a row of W)
    V product(const T* row) const { return (V)((Mask)load<V>(row + from) & keep) * v; }
    // first column of the one-at-a-time remainder
    index scalar_from(index vec_cols, index cols) const { return on ? cols : vec_cols; }
};

// Vectors of v that dot_rows holds in registers while it runs a group's rows over them: with
// the group's accumulators (W x dot_sets of them) they fill the register file, no more.
constexpr int kDotChunk = kVectorBytes == 64 ? 8 : 4;

// acc[u][r] += rows[r, 0 : N W) . v[0 : N W) for the W rows of a group (row r at rows + r cols),
// v's N vectors loaded once into registers and every row read straight through: one load per
// FMA and one pointer, where reading the rows in step along k (one vector of each in turn) kept
// W row pointers live, more than the registers hold (at H = 64, spilled and reloaded in the
// inner loop). Vector c goes to set c % U, and where N is not a multiple of U its last ones to
// set 0: dot_rows's order of the sums (the sets cycle along k, the vectors past the last whole
// cycle go to set 0) whatever the chunks.
template <class T, int N>
inline void dot_chunk(const T* rows, index cols, const T* v,
                      typename Simd<T>::vec (&acc)[dot_sets(Simd<T>::W)][Simd<T>::W]) {
    using V = typename Simd<T>::vec;
    constexpr int Wd = Simd<T>::W, U = dot_sets(Wd);
    V x[N];
#pragma GCC unroll 16
    for (int c = 0; c < N; ++c)
        x[c] = load<V>(v + c * Wd);
    const T* row = rows;
#pragma GCC unroll 16
    for (int r = 0; r < Wd; ++r, row += cols) {
#pragma GCC unroll 16
        for (int c = 0; c < N; ++c) {
            acc[c < N / U * U ? c % U : 0][r] += load<V>(row + c * Wd) * x[c];
        }
    }
}

// dot_chunk of n < kDotChunk vectors (n known at run time only).
template <class T, int N = kDotChunk - 1>
inline void dot_chunk_rest(index n, const T* rows, index cols, const T* v,
                           typename Simd<T>::vec (&acc)[dot_sets(Simd<T>::W)][Simd<T>::W]) {
    if constexpr (N > 0) {
        if (n == N) return dot_chunk<T, N>(rows, cols, v, acc);
        dot_chunk_rest<T, N - 1>(n, rows, cols, v, acc);
    }
}

// One term of a row-dot product: row j of W (row-major, `cols` columns) times v.
template <class T>
struct DotTerm {
    const T* W;
    index cols;
    const T* v;
    RowTail<T> tail;
    index vec_cols, scalar_from;

    DotTerm(const T* w, index c, const T* x)
        : W(w), cols(c), v(x), tail(x, c), vec_cols(c / Simd<T>::W * Simd<T>::W) {
        scalar_from = tail.scalar_from(vec_cols, cols);
    }
    const T* row(index j) const { return W + j * cols; }
};

// dot_rows's groups of one row per lane, rows [j, j + W) per group, k in chunks of v held in
// registers (dot_chunk), every term's products in the group's accumulators before its one fold
// tree; returns the first row it left. Each group reads its rows one after the other, a chunk
// at a time: rows 4 KiB apart (H = 1024 floats) need no staggering, which reading the rows in
// step along k did (same L1 set: dense 1 x 1024 x 1024 at 6-11 GFLOP/s, 24-34 staggered,
// 30-31 now; Zen 4, AVX-512, float32).
template <class T, int S>
index dot_row_groups(const DotTerm<T> (&terms)[S], index rows, T* out) {
    using V = typename Simd<T>::vec;
    constexpr int Wd = Simd<T>::W;
    constexpr int U = dot_sets(Wd);
    constexpr int C = kDotChunk;
    index j = 0;
    for (; j + Wd <= rows; j += Wd) {
        V acc[U][Wd];
        for (int u = 0; u < U; ++u)
            for (int r = 0; r < Wd; ++r)
                acc[u][r] = V{};
        for (const DotTerm<T>& d : terms) {
            const T* rows_j = d.row(j);
            index k = 0;
            for (; k + C * Wd <= d.vec_cols; k += C * Wd)
                dot_chunk<T, C>(rows_j + k, d.cols, d.v + k, acc);
            dot_chunk_rest<T>((d.vec_cols - k) / Wd, rows_j + k, d.cols, d.v + k, acc);
        }
        for (int u = 1; u < U; ++u)
            for (int r = 0; r < Wd; ++r)
                acc[0][r] += acc[u][r];
        for (const DotTerm<T>& d : terms)
            if (d.tail.on)
                for (int r = 0; r < Wd; ++r)
                    acc[0][r] += d.tail.product(d.row(j + r));
        fold_tree<T, Wd / 2>(acc[0], Wd);
        V sums = acc[0][0];
        for (const DotTerm<T>& d : terms)
            for (index c = d.scalar_from; c < d.cols; ++c)
                for (int r = 0; r < Wd; ++r)
                    sums[r] += d.row(j + r)[c] * d.v[c];
        store(out + j, load<V>(out + j) + sums);
    }
    return j;
}

// out[j] += sum over the terms of W[j, :] . v, for rows j of each term's row-major W: dot
// products along W's rows. For one time step nothing is worth packing, so W is read as it is
// stored. Groups of W rows (one per lane): each load of v serves W FMAs, the W chains (times
// dot_sets) hide the FMA's latency, and one fold tree gathers the group's sums (of every term:
// a step's W_ih x and W_hh h together) into one vector added to out at once; the rows left over
// run four at a time, then one. (Four-row groups alone kept only four chains in flight: the
// step of H = 64 waited on them, 40% of its time in RNN.step.)
template <class T, int S>
void dot_terms(const DotTerm<T> (&terms)[S], index rows, T* out) {
    using V = typename Simd<T>::vec;
    constexpr int Wd = Simd<T>::W;
    index j = dot_row_groups<T, S>(terms, rows, out);
    for (; j + 4 <= rows; j += 4) {
        V acc[4];
        for (int r = 0; r < 4; ++r)
            acc[r] = V{};
        for (const DotTerm<T>& d : terms) {
            for (index k = 0; k < d.vec_cols; k += Wd) {
                const V x = load<V>(d.v + k);
                for (int r = 0; r < 4; ++r)
                    acc[r] += load<V>(d.row(j + r) + k) * x;
            }
            if (d.tail.on)
                for (int r = 0; r < 4; ++r)
                    acc[r] += d.tail.product(d.row(j + r));
        }
        T sums[4];
        sum_lanes4<T>(acc, sums);
        for (int r = 0; r < 4; ++r) {
            T s = sums[r];
            for (const DotTerm<T>& d : terms)
                for (index k = d.scalar_from; k < d.cols; ++k)
                    s += d.row(j + r)[k] * d.v[k];
            out[j + r] += s;
        }
    }
    for (; j < rows; ++j) {
        V acc = {};
        for (const DotTerm<T>& d : terms) {
            for (index k = 0; k < d.vec_cols; k += Wd)
                acc += load<V>(d.row(j) + k) * load<V>(d.v + k);
            if (d.tail.on) acc += d.tail.product(d.row(j));
        }
        T s = sum_lanes<T>(acc);
        for (const DotTerm<T>& d : terms)
            for (index k = d.scalar_from; k < d.cols; ++k)
                s += d.row(j)[k] * d.v[k];
        out[j] += s;
    }
}

template <class T>
void dot_rows(const T* W, index rows, index cols, const T* v, T* out) {
    const DotTerm<T> terms[1] = {DotTerm<T>(W, cols, v)};
    dot_terms<T, 1>(terms, rows, out);
}

template <class T>
void dot_rows_pair(const T* W1, index cols1, const T* v1, const T* W2, index cols2, const T* v2,
                   index rows, T* out) {
    const DotTerm<T> terms[2] = {DotTerm<T>(W1, cols1, v1), DotTerm<T>(W2, cols2, v2)};
    dot_terms<T, 2>(terms, rows, out);
}

// ---- one time step of a batch of one ----------------------------------------------------------

// Independent FMA chains per full group of outputs: at least the 8 that keep both FMA units
// busy through their latency (2 units x 4 cycles), with 32 vector registers (AVX-512) 16.
constexpr int kStreamChains = kVectorBytes == 64 ? 16 : 8;
// k is interleaved over a fixed number of accumulator sets, whatever the group's size: each
// output's sum then runs in the same order in any group, and the groups follow the threads'
// shares, so the result does not depend on the thread count (the contention back-off and
// ThreadShare change it under the caller). A group has kStreamChains / kStreamSets vectors:
// with AVX-512, 4 sets of 4, so that H = 64 floats (4 vectors) still has 16 chains.
constexpr int kStreamSets = kVectorBytes == 64 ? 4 : 2;
constexpr int kStreamGroup = kStreamChains / kStreamSets;

// out[0, n) = op(out + v Wt) for n <= G vectors of outputs; see matvec. Lanes past n are
// computed from Wt's zero padding and never stored.
template <class T, int G>
inline void matvec_group(const T* wt, index ld, index K, const T* v, T* out, index n, Epilogue op,
                         const T* aux) {
    using V = typename Simd<T>::vec;
    constexpr int W = Simd<T>::W;
    constexpr int U = kStreamSets;
    V acc[U][G];
    for (int u = 0; u < U; ++u)
        for (int g = 0; g < G; ++g)
            acc[u][g] = V{};
    index k = 0;
    for (; k + U <= K; k += U)
        for (int u = 0; u < U; ++u) {
            const V x = splat<V>(v[k + u]);
            const T* row = wt + (k + u) * ld;
            for (int g = 0; g < G; ++g)
                acc[u][g] += x * load<V>(row + g * W);
        }
    for (; k < K; ++k) {
        const V x = splat<V>(v[k]);
        for (int g = 0; g < G; ++g)
            acc[0][g] += x * load<V>(wt + k * ld + g * W);
    }
    for (int u = 1; u < U; ++u)
        for (int g = 0; g < G; ++g)
            acc[0][g] += acc[u][g];
    for (int g = 0; g < G; ++g) {
        const index j = g * W, cols = n - j < W ? n - j : W;
        if (cols == W) {
            const V a = aux ? load<V>(aux + j) : V{};
            store(out + j, apply_epilogue<T>(op, acc[0][g] + load<V>(out + j), a));
            continue;
        }
        T cbuf[W] = {}, abuf[W] = {};  // a partial last vector goes through copies
        for (index c = 0; c < cols; ++c) {
            cbuf[c] = out[j + c];
            if (aux) abuf[c] = aux[j + c];
        }
        const V r = apply_epilogue<T>(op, acc[0][g] + load<V>(cbuf), load<V>(abuf));
        for (index c = 0; c < cols; ++c)
            out[j + c] = r[c];
    }
}

// matvec_group for a group of `vectors` <= G vectors, the template chosen at run time.
template <class T, int G>
inline void matvec_last(int vectors, const T* wt, index ld, index K, const T* v, T* out, index n,
                        Epilogue op, const T* aux) {
    if (vectors == G)
        matvec_group<T, G>(wt, ld, K, v, out, n, op, aux);
    else if constexpr (G > 1)
        matvec_last<T, G - 1>(vectors, wt, ld, K, v, out, n, op, aux);
}

// out[j] = op(out[j] + sum_k v[k] B[k, j], aux[j]) for j in [0, n): the recurrent step of a
// batch of one as a vector-matrix product, on B (K x n) laid out in column groups (see
// KernelTable::matvec): each group's K rows are contiguous, so the step streams them in order,
// every load feeding an FMA and one broadcast of v[k] serving the whole group. No register
// tile's unused rows, and no horizontal sums.
template <class T>
void matvec(const T* b, index K, const T* v, T* out, index n, Epilogue op, const T* aux) {
    constexpr int W = Simd<T>::W;
    constexpr index kGroup = kStreamGroup * W;
    constexpr index NR = Simd<T>::NR;
    for (index j = 0; j < n; j += kGroup) {
        const index cols = n - j < kGroup ? n - j : kGroup;
        const index width = (cols + NR - 1) / NR * NR;  // the group's stored width
        const T* a = aux ? aux + j : aux;
        const int vectors = static_cast<int>((cols + W - 1) / W);
        if (vectors == kStreamGroup)  // (its last vector may still be partial)
            matvec_group<T, kStreamGroup>(b + j * K, width, K, v, out + j, cols, op, a);
        else
            matvec_last<T, kStreamGroup - 1>(vectors, b + j * K, width, K, v, out + j, cols, op, a);
    }
}

// ---- softmax ------------------------------------------------------------------------------

// exp(y) for any y <= 0 (and NaN): vexp_nonpositive holds while 2^n is a normal number, so
// below the exponent's range the result is 0, as it rounds to anyway.
template <class T>
inline typename Simd<T>::vec vexp_any_nonpositive(typename Simd<T>::vec y) {
    using V = typename Simd<T>::vec;
    const T lowest = sizeof(T) == 4 ? static_cast<T>(-87.0) : static_cast<T>(-708.0);
    const V zero = {};
    V safe = y < lowest ? splat<V>(lowest) : y;
    safe = y != y ? zero : safe;
    const V e = vexp_nonpositive<T>(safe);
    return y != y ? y : (y < lowest ? zero : e);
}

// out = weight * softmax(x), and log(sum(exp(x))) = max + log(sum(exp(x - max))): the max
// first so no exp overflows. The max skips NaN, but x - max is NaN there and the NaN reaches
// the sum, so a NaN makes the whole row NaN, as NumPy's form does; +inf (inf - inf) too.
template <class T>
T softmax_row(const T* x, index n, T weight, T* out) {
    using V = typename Simd<T>::vec;
    constexpr int W = Simd<T>::W;
    const index vn = n / W * W;
    T m = n > 0 ? x[0] : T(0);
    if (vn > 0) {
        V vm = load<V>(x);
        for (index j = W; j < vn; j += W) {
            const V v = load<V>(x + j);
            vm = v > vm ? v : vm;
        }
        for (int l = 0; l < W; ++l)
            m = vm[l] > m ? vm[l] : m;
    }
    for (index j = vn; j < n; ++j)
        m = x[j] > m ? x[j] : m;
    V vsum = {};
    const V shift = splat<V>(m);
    for (index j = 0; j < vn; j += W) {
        const V e = vexp_any_nonpositive<T>(load<V>(x + j) - shift);
        store(out + j, e);
        vsum += e;
    }
    T sum = sum_lanes<T>(vsum);
    for (index j = vn; j < n; ++j) {  // the tail through the same vector exp, one lane used
        V lane = {};
        lane[0] = x[j] - m;
        out[j] = vexp_any_nonpositive<T>(lane)[0];
        sum += out[j];
    }
    const T scale = weight / sum;
    for (index j = 0; j < n; ++j)
        out[j] *= scale;
    return m + std::log(sum);
}

// ---- the gates' element-wise functions ---------------------------------------------------------

// sigmoid(x) from one exp of -|x|, e: 1 / (1 + e) for x >= 0, e / (1 + e) below (no
// cancellation either side, no overflow). Past 2 * clamp, where the exp's range ends, the
// result stays at its value there: at most e^-18 (float) or e^-39 (double) off zero. NaN
// passes through.
template <class T>
RNNFAST_ALWAYS_INLINE typename Simd<T>::vec vsigmoid(typename Simd<T>::vec x) {
    using V = typename Simd<T>::vec;
    using C = TanhConstants<T>;
    const V one = splat<V>(static_cast<T>(1));
    const T limit = static_cast<T>(2) * C::clamp;
    V ax = x < 0 ? -x : x;
    ax = ax > limit ? splat<V>(limit) : ax;
    const V e = vexp_nonpositive<T>(-ax);
    const V s = one / (one + e);
    const V result = x < 0 ? e * s : s;
    return x != x ? x : result;
}

template <class T>
RNNFAST_ALWAYS_INLINE typename Simd<T>::vec apply_pointwise(Pointwise op, typename Simd<T>::vec x) {
    using V = typename Simd<T>::vec;
    const V zero = {};
    const V one = splat<V>(static_cast<T>(1));
    const T half = static_cast<T>(0.5);
    switch (op) {
        case Pointwise::sigmoid:
            return vsigmoid<T>(x);
        case Pointwise::hard_sigmoid: {
            const V s = x * static_cast<T>(1.0 / 6.0) + half;
            const V low = s < zero ? zero : s;
            return x != x ? x : (low > one ? one : low);
        }
        case Pointwise::tanh:
            return vtanh<T>(x);
        case Pointwise::relu:
            return x < 0 ? zero : x;
    }
    return x;
}

template <class T>
void activate(T* x, index n, Pointwise op) {
    using V = typename Simd<T>::vec;
    constexpr int W = Simd<T>::W;
    index j = 0;
    for (; j + W <= n; j += W)
        store(x + j, apply_pointwise<T>(op, load<V>(x + j)));
    if (j < n) {  // the tail through the same vector code, its lanes copied in and out
        T lanes[W] = {};
        std::memcpy(lanes, x + j, sizeof(T) * static_cast<size_t>(n - j));
        store(lanes, apply_pointwise<T>(op, load<V>(lanes)));
        std::memcpy(x + j, lanes, sizeof(T) * static_cast<size_t>(n - j));
    }
}

#include "cell_kernels.inl"

// Constant-initialised: no code of this ISA runs at load time, so importing is safe on any CPU.
template <class T>
constexpr KernelTable<T> kTable = {RNNFAST_ISA_NAME,
                                   Simd<T>::NR,
                                   kMR,
                                   kStreamGroup* Simd<T>::W,
                                   &packed_b_size<T>,
                                   &pack_b<T>,
                                   &gemm_block<T>,
                                   &dot_rows<T>,
                                   &dot_rows_pair<T>,
                                   &matvec<T>,
                                   &softmax_row<T>,
                                   &blocking<T>,
                                   &activate<T>,
                                   &lstm_row<T>,
                                   &gru_row<T>,
                                   &lstm_grad_row<T>,
                                   &gru_grad_row<T>};

#if defined(RNNFAST_BF16_PRODUCTS)
#include "bf16_products.inl"
#endif

}  // namespace

const KernelTable<float>& table_f32() {
    return kTable<float>;
}
const KernelTable<double>& table_f64() {
    return kTable<double>;
}
#if defined(RNNFAST_BF16_PRODUCTS)
Bf16Gemm bf16_gemm() {
    return {&pack_b_bf16, &gemm_block_bf16};
}
Bf16Gemm amx_bf16_gemm() {
    return {&pack_b_bf16, &gemm_block_amx};
}
#endif

}  // namespace RNNFAST_ISA_NS
#undef RNNFAST_ALWAYS_INLINE
}  // namespace rnnfast
