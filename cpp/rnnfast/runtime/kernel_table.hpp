// The per-ISA kernel table: one instance per (ISA, dtype), chosen once at load time by dispatch.
#pragma once

#include "cache_info.hpp"
#include "types.hpp"

namespace rnnfast {

// One row of one block of w hidden units of a gated cell's step, for the fused cell kernels
// (KernelTable::lstm_row, gru_row; cells/lstm.hpp and gru.hpp give the equations). Every
// pointer is at the block's first unit.
template <class T>
struct GateRow {
    const T* a;     // the projected input, [a_i | a_f | a_g | a_o] or [a_r | a_z | a_n], w each
    const T* hh;    // the recurrent product's terms in the same order
    const T* prev;  // the carried state at t - 1: c (LSTM) or h (GRU)
    T* next;        // the same state at t
    T* m;           // LSTM: m_t = o * act(c_t) (h_t, or the projection's input); GRU: unused
    T* store;       // the stored row for the backward (gate g at store + g * H), or null
    index H, w;
    Pointwise act, rec;
};

// The same row of the backward (KernelTable::lstm_grad_row, gru_grad_row), from the gradient
// arriving at the block's units and the row the forward stored. Every pointer is at the block's
// first unit.
template <class T>
struct GateGradRow {
    const T* g;      // LSTM: dL/dm_t; GRU: dL/dh_t
    T* carry;        // LSTM: dL/dc_t in, dL/dc_{t-1} out; GRU: dL/dh_{t-1} past the gates, out
    const T* store;  // the stored row (gate s at store + s * H)
    const T* prev;   // LSTM: c_{t-1}; GRU: h_{t-1}
    T* dA;           // the pre-activations' gradients (gate s at dA + s * H)
    T* extra;        // LSTM: m_t = o * act(c_t), out, or null. GRU: da_n * r, out, for reset_after;
                     // null for reset_before, which leaves da_r and it to rz_grad
    index H, w;
    Pointwise act, rec;
};

template <class T>
struct KernelTable {
    const char* isa;
    int nr;         // columns of one packed panel of B
    int mr;         // rows of one register tile
    int stream_nr;  // columns of one group of matvec's B (a multiple of nr)

    // Elements needed to pack a K x N matrix B into panels.
    index (*packed_b_size)(index K, index N);
    // Packs panels [p0, p1) of B (K x N) into dst, laid out as pack_b for the whole matrix would.
    void (*pack_b)(MatView<T> B, index K, index N, index p0, index p1, T* dst);
    // Computes rows [m0, m1) and column panels [p0, p1) of task.C.
    void (*gemm_block)(const GemmTask<T>& task, index m0, index m1, index p0, index p1);
    // out[j] += W[j, :] . v for a row-major W (rows x cols), unpacked: for single steps.
    void (*dot_rows)(const T* W, index rows, index cols, const T* v, T* out);
    // out[j] += W1[j, :] . v1 + W2[j, :] . v2 (a step's W_ih x_t and W_hh h_{t-1}), both sums
    // in one set of accumulators: one reduction across lanes per row, not two.
    void (*dot_rows_pair)(const T* W1, index cols1, const T* v1, const T* W2, index cols2,
                          const T* v2, index rows, T* out);
    // out[j] = op(out[j] + sum_k v[k] B[k, j], aux[j]) for j in [0, n): a batch of one's step.
    // B (K x n) is laid out in groups of stream_nr columns, group g (columns from g * stream_nr)
    // at b + g * stream_nr * K as K rows of its width rounded up to nr, zero-padded.
    void (*matvec)(const T* b, index K, const T* v, T* out, index n, Epilogue op, const T* aux);
    // out = weight * softmax(x) over one row of n values; returns log(sum(exp(x))).
    T (*softmax_row)(const T* x, index n, T weight, T* out);
    // The cache blocks gemm_block uses for this ISA and dtype on this machine (gemm() packs B
    // in blocks of kc rows and nc columns so that each packed block is one pass of it).
    GemmBlocking (*blocking)();
    // x[j] = op(x[j]) for j in [0, n), in place: the gates of the gated cells, on a unit
    // block's contiguous gate columns.
    void (*activate)(T* x, index n, Pointwise op);
    // A gated cell's whole step on one GateRow, in one pass over its units: the sum of the two
    // products' terms, the gate functions, the state update and the stored gates, each unit's
    // values in registers from first load to last store. LSTM: next = c_t, m = m_t, stores
    // [i | f | g | o | c_t]. GRU (reset_after): next = h_t, stores [r | z | n | hh_n].
    void (*lstm_row)(const GateRow<T>& row);
    void (*gru_row)(const GateRow<T>& row);
    // Their backward on one GateGradRow (cells/lstm.hpp and gru.hpp give the equations).
    void (*lstm_grad_row)(const GateGradRow<T>& row);
    void (*gru_grad_row)(const GateGradRow<T>& row);
    // Whether the products round their operands first (bf16 products, runtime/products.cpp):
    // then dot_rows and matvec, which read their B as the caller stores it, round all of it on
    // every call, and a pass steps a batch of one on the packed GEMM instead (packed once).
    bool rounds_operands = false;
};

// The entries a float table swaps for bf16 products (runtime/products.cpp): B packed as bf16
// pairs, and the GEMM that multiplies A's values, rounded to bf16, with them.
struct Bf16Gemm {
    void (*pack_b)(MatView<float> B, index K, index N, index p0, index p1, float* dst);
    void (*gemm_block)(const GemmTask<float>& task, index m0, index m1, index p0, index p1);
};

// Whether every entry of a table is set: an aggregate initialiser that misses the newest
// entries compiles, and leaves them null. compiled_isas() (dispatch.cpp) checks every ISA's
// tables with it. (Not a static_assert: under the sanitizers GCC does not take a function's
// address for a constant.)
template <class T>
bool complete(const KernelTable<T>& k) {
    return k.isa && k.nr > 0 && k.mr > 0 && k.stream_nr > 0 && k.packed_b_size && k.pack_b &&
           k.gemm_block && k.dot_rows && k.dot_rows_pair && k.matvec && k.softmax_row &&
           k.blocking && k.activate && k.lstm_row && k.gru_row && k.lstm_grad_row && k.gru_grad_row;
}

namespace isa_baseline {
const KernelTable<float>& table_f32();
const KernelTable<double>& table_f64();
}  // namespace isa_baseline
#if defined(RNNFAST_X86_ISAS)
namespace isa_avx2 {
const KernelTable<float>& table_f32();
const KernelTable<double>& table_f64();
}  // namespace isa_avx2
namespace isa_avx512 {
const KernelTable<float>& table_f32();
const KernelTable<double>& table_f64();
Bf16Gemm bf16_gemm();  // VDPBF16PS (kernels/bf16_products.inl); runs on AVX512-BF16 alone
Bf16Gemm
amx_bf16_gemm();  // TDPBF16PS tiles (the same file); needs AMX-BF16 and the tile permission
}  // namespace isa_avx512
#endif

}  // namespace rnnfast
