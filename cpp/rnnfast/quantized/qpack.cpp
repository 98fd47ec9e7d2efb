// Packing of quantized weights into the panel layout (qlayout.hpp).
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

void quantize_rows(const float* x, index M, index K, std::int8_t* q, float* scale) {
    active_kernels(Kind::int8).rows.quantize(x, K, M, K, q, K, scale, false);
}

}  // namespace rnnfast::quantized
