// Packing of quantized weights into the panel layout (qlayout.hpp), and the conversions of
// float32 activations to int8 and bf16. Compiled with -ffp-contract=off: every float operation
// rounds as the contract writes it, so the NumPy model reproduces it bit for bit.
#include <cmath>
#include <cstring>

#include "qops.hpp"

namespace rnnfast::quantized {
namespace {

// Allocates the padded matrix and copies value (j, k) of a row-major N x K source to its place.
template <class Elem>
PackedMatrix pack(Kind kind, const Elem* src, index N, index K) {
    PackedMatrix w;
    w.kind = kind;
    w.rows = N;
    w.cols = K;
    w.prows = round_up(N < 1 ? 1 : N, kPanel);
    w.pcols = padded_k(kind, K);
    w.data.assign(static_cast<size_t>(w.prows * w.pcols) * sizeof(Elem), 0);
    Elem* dst = reinterpret_cast<Elem*>(w.data.data());
    const index g = group_k(kind);
    const index panel_elems = w.pcols * kPanel;
    for (index j = 0; j < N; ++j) {
        const index p = j / kPanel, c = j % kPanel;
        for (index k = 0; k < K; ++k)
            dst[p * panel_elems + ((k / g) * kPanel + c) * g + k % g] = src[j * K + k];
    }
    return w;
}

// rint for |y| < 2^22 in the current (round-to-nearest-even) mode: adding 1.5 * 2^23 leaves
// no fraction bits, so the sum rounds y to an integer; a plain add vectorises, nearbyintf may
// not at the baseline ISA.
inline float round_even(float y) {
    const float shift = 12582912.0f;
    return (y + shift) - shift;
}

// NaN (0 * inf, from a row whose amax is so small that 127 / amax overflows) becomes 0.
inline std::int8_t clip127(float r) {
    if (r != r) return 0;
    return static_cast<std::int8_t>(r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r));
}

// One row with a given multiplier (127 / amax, or 127 for the fixed scale).
void quantize_row(const float* x, index K, float mult, std::int8_t* q) {
    for (index k = 0; k < K; ++k)
        q[k] = clip127(round_even(x[k] * mult));
}

// max |x|, and whether every value is finite.
float row_amax(const float* x, index K, bool* finite) {
    float amax = 0.0f;
    bool ok = true;
    for (index k = 0; k < K; ++k) {
        const float a = std::fabs(x[k]);
        ok = ok && a <= 3.4028235e38f;  // false for inf and NaN
        amax = a > amax ? a : amax;
    }
    *finite = ok;
    return amax;
}

// The dynamic scale of one row, its q written unless the row is all zeros or not finite.
void quantize_dynamic(const float* x, index K, std::int8_t* q, float* scale) {
    bool finite;
    const float amax = row_amax(x, K, &finite);
    if (!finite) {
        *scale = std::nanf("");
        std::memset(q, 0, static_cast<size_t>(K));
    } else if (amax == 0.0f) {
        *scale = 0.0f;
        std::memset(q, 0, static_cast<size_t>(K));
    } else {
        *scale = amax / 127.0f;
        quantize_row(x, K, 127.0f / amax, q);
    }
}

}  // namespace

PackedMatrix pack_int8(const std::int8_t* q, const float* scale, index N, index K) {
    PackedMatrix w = pack(Kind::int8, q, N, K);
    w.scale.assign(static_cast<size_t>(w.prows), 0.0f);
    w.colsum.assign(static_cast<size_t>(w.prows), 0);
    for (index j = 0; j < N; ++j) {
        w.scale[j] = scale[j];
        std::int32_t s = 0;
        for (index k = 0; k < K; ++k)
            s += q[j * K + k];
        w.colsum[j] = 128 * s;
    }
    return w;
}

PackedMatrix pack_bf16(const std::uint16_t* bits, index N, index K) {
    return pack(Kind::bf16, bits, N, K);
}

void quantize_rows(const float* x, index M, index K, index ldx, std::int8_t* q, index ldq,
                   float* scale) {
    for (index i = 0; i < M; ++i) {
        quantize_dynamic(x + i * ldx, K, q + i * ldq, scale + i);
        std::memset(q + i * ldq + K, 0, static_cast<size_t>(ldq - K));
    }
}

void quantize_rows_tanh_state(const float* x, index M, index K, index ldx, std::int8_t* q,
                              index ldq, float* scale) {
    for (index i = 0; i < M; ++i) {
        bool finite;
        const float amax = row_amax(x + i * ldx, K, &finite);
        if (finite && amax <= 1.0f) {
            scale[i] = 1.0f / 127.0f;
            quantize_row(x + i * ldx, K, 127.0f, q + i * ldq);
        } else {
            quantize_dynamic(x + i * ldx, K, q + i * ldq, scale + i);
        }
        std::memset(q + i * ldq + K, 0, static_cast<size_t>(ldq - K));
    }
}

std::uint16_t to_bf16(float f) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: keep it NaN (quiet), whatever its payload
        return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
    bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest, ties to even
    return static_cast<std::uint16_t>(bits >> 16);
}

void bf16_rows(const float* x, index M, index K, index ldx, std::uint16_t* b, index ldb) {
    for (index i = 0; i < M; ++i) {
        for (index k = 0; k < K; ++k)
            b[i * ldb + k] = to_bf16(x[i * ldx + k]);
        for (index k = K; k < ldb; ++k)
            b[i * ldb + k] = 0;
    }
}

}  // namespace rnnfast::quantized
