// One step of a gated cell for streaming (GRU, LSTM): the products by dot_rows on the weights
// as stored, then the cell's epilogue over all H units as one block. One block of H units is
// PyTorch's own gate order ([r | z | n], [i | f | g | o]), so the cells' block functions run on
// the products unchanged, the same code as in the sequence kernels.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "gated.hpp"
#include "rnn.hpp"
#include "rnnfast/runtime/dispatch.hpp"

namespace rnnfast {
namespace {

// out = bias + W v (rows x cols), bias null: zeros.
template <class T>
void affine(const KernelTable<T>& kt, const T* w, const T* bias, index rows, index cols, const T* v,
            T* out) {
    if (bias)
        std::copy(bias, bias + rows, out);
    else
        std::fill(out, out + rows, T(0));
    kt.dot_rows(w, rows, cols, v, out);
}

// The step of one row per b, with the cell's policy.
template <class T, class Cell>
void step(const GatedStepArgs<T>& a) {
    const index B = a.batch, D = a.input_size, H = a.hidden_size, P = a.proj_size;
    const index R = P > 0 ? P : H;
    const index GH = Cell::kGates * H, SH = Cell::kStepGates * H;
    if (B == 0 || H == 0) return;
    const KernelTable<T>& kt = kernels<T>();
    // per call: the two products and r * h or m (reused across calls)
    thread_local std::vector<T> buffer;
    constexpr index kStats = row_reductions<Cell>() * 3;  // one block: (count, mean, M2) each
    // Gate groups whose two products only add up (the cell reads x + hh): their rows run both
    // in one pass of dot_rows_pair, one reduction across lanes per row (LSTM H = 64: 16 of the
    // step's 32 fold trees). Not a cell with parameters of its own: the LayerNorm LSTM
    // normalises the two products apart.
    constexpr int kJoined = cell_params<Cell>() == 0 ? Cell::kDirectGates : 0;
    if (cell_params<Cell>() > 0 && !a.cell_params)
        throw std::invalid_argument("cell_params: expected the cell's parameters, got none");
    buffer.resize(static_cast<size_t>(2 * GH + H + kStats));
    T *gx = buffer.data(), *gh = gx + GH, *mid = gh + GH, *stats = mid + H;
    for (index b = 0; b < B; ++b) {
        const T *x = a.x + b * D, *h = a.h + b * R;
        T* h_next = a.h_next + b * R;
        constexpr bool two = Cell::kStates == 2;
        const GatedBlock<T> block{gx,
                                  gh,
                                  h,
                                  h,
                                  h_next,
                                  two ? a.c + b * H : nullptr,
                                  two ? a.c_next + b * H : nullptr,
                                  P > 0 ? mid : h_next,
                                  mid,
                                  nullptr,
                                  H,
                                  0,
                                  H,
                                  a.act,
                                  a.rec,
                                  a.cell_params,
                                  stats,
                                  0,
                                  1};
        if constexpr (kJoined > 0) {  // the joined rows: both products in one pass, gh 0
            for (index j = 0; j < kJoined * H; ++j)
                gx[j] = (a.b_ih ? a.b_ih[j] : T(0)) + (a.b_hh ? a.b_hh[j] : T(0));
            kt.dot_rows_pair(a.w_ih, D, x, a.w_hh, R, h, kJoined * H, gx);
            std::fill(gh, gh + kJoined * H, T(0));
        }
        const index J = kJoined * H;
        affine(kt, a.w_ih + J * D, a.b_ih ? a.b_ih + J : nullptr, GH - J, D, x, gx + J);
        affine(kt, a.w_hh + J * R, a.b_hh ? a.b_hh + J : nullptr, SH - J, R, h, gh + J);
        Cell::forward_block(kt, block);
        if constexpr (row_reductions<Cell>() > 0)  // one block: the reductions need no meeting
            for (int sub = 1; sub <= row_reductions<Cell>(); ++sub)
                Cell::reduced_block(kt, block, sub);
        if constexpr (Cell::kSecondProduct) {  // the remaining gates' rows, on r * h
            affine(kt, a.w_hh + SH * H, a.b_hh ? a.b_hh + SH : nullptr, GH - SH, H, mid, gh);
            Cell::second_block(kt, block);
        }
        if (P > 0) affine<T>(kt, a.w_hr, nullptr, P, H, mid, h_next);
    }
}

// The step as the forward's one step: its products are packed GEMMs over the batch, W read
// once; the streaming path above reads all of W once per row (and, where the products round
// their operands, rounds all of it per row: a GRU's bf16 step at B = 16, H = 64 cost 1 ms).
template <class T>
void step_as_forward(const GatedStepArgs<T>& a) {
    GatedForwardArgs<T> f;
    f.cell = a.cell;
    f.steps = 1;
    f.batch = a.batch, f.input_size = a.input_size, f.hidden_size = a.hidden_size;
    f.proj_size = a.proj_size;
    f.x = a.x, f.h0 = a.h, f.c0 = a.c;
    f.w_ih = a.w_ih, f.w_hh = a.w_hh, f.b_ih = a.b_ih, f.b_hh = a.b_hh, f.w_hr = a.w_hr;
    f.cell_params = a.cell_params;
    f.act = a.act, f.rec = a.rec;
    f.h_n = a.h_next, f.c_n = a.c_next;
    gated_forward(f);
}

}  // namespace

template <class T>
void gated_step(const GatedStepArgs<T>& a) {
    if (step_runs_as_forward(kernels<T>(), a.batch)) return step_as_forward(a);
    with_gated_cell<T>(a.cell, [&](auto cell) { step<T, decltype(cell)>(a); });
}

template void gated_step(const GatedStepArgs<float>&);
template void gated_step(const GatedStepArgs<double>&);

}  // namespace rnnfast
