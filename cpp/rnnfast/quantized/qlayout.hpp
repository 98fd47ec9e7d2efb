// Quantized weights (int8 with per-row scales, or bf16) packed once for the kernels, and the
// kernel table of one quantized path. No Python here.
//
// One packed layout serves every path of a kind, so a matrix never needs repacking when the
// path changes (RNNFAST_ISA, set_quantized_path): column panels of 16 outputs, and within a
// panel groups of G consecutive k's (int8: G = 4, bf16: G = 2) holding 16 x G values, column
// by column: panel p, group g, column c, member e sits at ((p * K / G + g) * 16 + c) * G + e.
// That is at once the operand of vpdpbusd / vdpbf16ps (one 64-byte group per instruction) and
// a row of an AMX B tile (16 groups = one 1 KiB tile). K is padded with zeros to the AMX tile
// depth (64 int8 k's, 32 bf16 k's), N to 16; the SIMD paths stop at the last non-empty group.
#pragma once

#include <cstdint>
#include <vector>

#include "rnnfast/runtime/types.hpp"

namespace rnnfast::quantized {

enum class Kind { int8, bf16 };

constexpr index kPanel = 16;       // output columns of one panel
constexpr index kGroupBytes = 64;  // bytes of one group (16 columns x G values)

inline index round_up(index n, index m) {
    return (n + m - 1) / m * m;
}

// k's per group and the padding of K, per kind.
inline index group_k(Kind kind) {
    return kind == Kind::int8 ? 4 : 2;
}
inline index padded_k(Kind kind, index K) {
    return round_up(K < 1 ? 1 : K, kind == Kind::int8 ? 64 : 32);
}

struct PackedMatrix {
    Kind kind = Kind::int8;
    index rows = 0, cols = 0;          // N x K as given
    index prows = 0, pcols = 0;        // N rounded up to kPanel, K padded (padded_k)
    std::vector<std::uint8_t> data;    // prows * pcols values (int8 or bf16 bits), panel layout
    std::vector<float> scale;          // int8: per output row, prows (zeros in the padding)
    std::vector<std::int32_t> colsum;  // int8: 128 * sum_k q[j, k], for the u8 x s8 paths
    // Gate groups of a gated cell's matrix (G*H rows in PyTorch's gate order as given), whose
    // rows were packed in GateLayout{H, G, kPanel}'s order (cells/gate_layout.hpp): a panel-
    // aligned block of 16 units holds every gate of its units. 1: rows as given.
    int gates = 1;
    // Groups of k holding a value (the SIMD paths' loop count), and bytes of one column panel.
    // Shifts, not divisions: the kernels ask for them once per tile.
    index groups() const { return kind == Kind::int8 ? (cols + 3) >> 2 : (cols + 1) >> 1; }
    index panel_bytes() const { return kind == Kind::int8 ? pcols * kPanel : pcols * kPanel * 2; }
    index panels() const { return prows / kPanel; }
    std::size_t nbytes() const {
        return data.size() + scale.size() * sizeof(float) + colsum.size() * sizeof(std::int32_t);
    }
};

// q (N, K) int8 with scale (N,), or bits (N, K) bf16; row-major, as given by the user.
PackedMatrix pack_int8(const std::int8_t* q, const float* scale, index N, index K);
PackedMatrix pack_bf16(const std::uint16_t* bits, index N, index K);

// A block of the product C[M x prows] = A[M x pcols] . W^T for rows [m0, m1) and panels
// [p0, p1): A is row-major with leading dimension lda (elements; int8 or bf16 bits, padded with
// zeros to w.pcols), C int32 (int8) or float (bf16) with leading dimension ldc.
struct Int8Task {
    const std::int8_t* a;
    index lda;
    const PackedMatrix* w;
    std::int32_t* c;
    index ldc;
};
struct Bf16Task {
    const std::uint16_t* a;
    index lda;
    const PackedMatrix* w;
    float* c;
    index ldc;
};

// Element-wise passes over `rows` rows, at the path's vector width (the formats of qops.hpp).
// One call per block of rows: per-row calls through the table cost as much as the work at
// H = 32. Leading dimensions are in elements.
struct RowOps {
    // x (rows x K) to int8 q, values [0, K) of each row (the caller keeps [K, ldq) zero), and
    // the row scales: the dynamic formula, or for a tanh layer's recurrent input (tanh_state)
    // the fixed 1/127 where a row is within [-1, 1].
    void (*quantize)(const float* x, index ldx, index rows, index K, std::int8_t* q, index ldq,
                     float* scale, bool tanh_state);
    // x (rows x K) to bf16 bits, values [0, K) of each row.
    void (*to_bf16)(const float* x, index ldx, index rows, index K, std::uint16_t* b, index ldb);
    // dst[r, j] = float(acc[r, j]) * (s_a[r] * s_w[j]) (+ add[r * add_rs + j] when add is not
    // null), j < n.
    void (*finish_int8)(const std::int32_t* acc, index ldacc, index rows, const float* s_a,
                        const float* s_w, const float* add, index add_rs, float* dst, index ldd,
                        index n);
    // dst[r, j] = acc[r, j] (+ add[r * add_rs + j]), j < n.
    void (*finish_bf16)(const float* acc, index ldacc, index rows, const float* add, index add_rs,
                        float* dst, index ldd, index n);
};

struct QuantKernels {
    const char* name;
    void (*int8_block)(const Int8Task& t, index m0, index m1, index p0, index p1);  // or null
    void (*bf16_block)(const Bf16Task& t, index m0, index m1, index p0, index p1);  // or null
    RowOps rows;
};

// The paths, each compiled with its own target flags (CMakeLists.txt).
namespace qpath_baseline {
const QuantKernels& kernels();
}
#if defined(RNNFAST_X86_ISAS)
namespace qpath_avx2 {
const QuantKernels& kernels();
}
namespace qpath_avx_vnni {
const QuantKernels& kernels();
}
namespace qpath_avx512_vnni {
const QuantKernels& kernels();
}
namespace qpath_avx512_bf16 {
const QuantKernels& kernels();
}
namespace qpath_amx {
const QuantKernels& kernels();
bool request_tile_permission();  // the Linux arch_prctl request; false if refused
}  // namespace qpath_amx
#endif

}  // namespace rnnfast::quantized
