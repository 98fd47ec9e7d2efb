// What a gated cell policy gives the passes (drivers/time_loop.hpp says how a cell plugs in;
// cells/gru.hpp and lstm.hpp are the policies). Every member is static and a compile-time
// constant or an inline function: the passes ask these counts and call these functions, and
// never test which cell they run.
//   kStates       states carried from step to step: 1 (h) or 2 (h and c)
//   kGates        gate groups: the input projection is kGates * H wide
//   kStepGates    gate groups of the step's first product (W_hh h_{t-1}); those it leaves out
//                 come from a second product after a barrier (kSecondProduct)
//   kStored       what the forward stores per step and row for the backward, in units of H
//   kStoredState  kStates == 2: where in the stored row the second state (c_t) is, in units of H
//   kInnerBias    b_hn is added inside the recurrent product and scaled by r (GRU reset_after):
//                 the projection leaves it out, and the n rows' recurrent gradient is
//                 da_n * r, the backward's `extra` (T, B, H)
//   kSecondProduct  a sub-step after a barrier: the product W_hn (r * h_{t-1}) of every unit's
//                 r * h (GRU reset_before); the backward keeps r * h_{t-1} in `extra`
//   kProjects     the step may end with a projection h_t = W_hr m_t after a barrier (LSTM with
//                 proj_size > 0)
//   kDirectGates  gate groups whose recurrent weight gradient is dA against h_{t-1} as it is
//   forward_block(kt, GatedBlock)      the epilogue after the first product, on one row's block
//   second_block(kt, GatedBlock)       kSecondProduct: the epilogue after the second product
//   grad_block(kt, GatedGradBlock)     the backward step on one row's block
//   second_grad<rec>(...)              kSecondProduct: the gradient through r * h_{t-1}
// A cell with row-wide reductions (the LayerNorm LSTM's norms) also gives
//   kRowReductions  sub-steps after the epilogue, each after a barrier: forward_block and
//                 grad_block publish a block's partial statistics of the row into the shared
//                 scratch (stats), reduced_block / reduced_grad(kt, block, s) for s = 1.. read
//                 every block's and go on
//   kParams       its own parameters, in units of H (one array: the arguments' cell_params)
//   kExtra        the backward's per-row extra, in units of H (else 1: the GRU's (T, B, H))
//   param_gradients(extra, store, rows, H, d)   their gradients, after the walk
// Cells without them give none: row_reductions<Cell>() etc. read 0 (1 for kExtra).
// Per-gate masks (recurrent dropout) need nothing of the cell: each of the kStepGates gates'
// products reads its own masked h_{t-1} (the second product: the n gate's mask).
#pragma once

#include <type_traits>

#include "rnnfast/runtime/kernel_table.hpp"
#include "rnnfast/runtime/types.hpp"

namespace rnnfast {

// One row's block of w hidden units from unit j0, as the forward's epilogue sees it. Row
// pointers are whole rows (unit j at j); a and hh are the block's own columns in the layout's
// order ([gate 0 | gate 1 | ...], w each).
template <class T>
struct GatedBlock {
    T* a;              // the projected input (the epilogue may work in it)
    const T* hh;       // the first product's terms (second_block: the second product's, at j0)
    const T* h_prev;   // h_{t-1}
    const T* r_reads;  // kSecondProduct: the h_{t-1} that r scales (recurrent dropout: masked)
    T* h;              // h_t
    const T* c_prev;   // kStates == 2: c_{t-1}
    T* c;              // kStates == 2: c_t
    T* m;              // kProjects: m_t (h_t itself without a projection)
    T* mid;            // kSecondProduct: r * h_{t-1}, the second product's input
    T* store;          // the stored row, or null
    index H, j0, w;
    Pointwise act, rec;
    const T* params = nullptr;  // kParams: the cell's own parameters
    T* stats = nullptr;         // kRowReductions: the row's shared scratch (reduction, unit block)
    index u = 0, blocks = 1;    // the block's unit block in the layout, and their count
};

// One row's block of the backward step. Row pointers are whole rows (unit j at j).
template <class T>
struct GatedGradBlock {
    const T* g;       // dL/dh_t (dL/dm_t with a projection)
    T* carry;         // kStates == 1: dL/dh_{t-1} past the gates, out; 2: dL/dc in, dL/dc_{t-1} out
    const T* store;   // the stored row
    const T* h_prev;  // h_{t-1}
    const T* c_prev;  // kStates == 2: c_{t-1}
    T* dA;            // the pre-activations' gradients, PyTorch's order
    T* extra;         // kInnerBias: da_n * r, out
    T* m;             // kProjects: m_t, out, or null
    index H, j0, w;
    Pointwise act, rec;
    const T* params = nullptr;  // kParams: the cell's own parameters
    T* stats = nullptr;         // kRowReductions: the row's shared scratch (reduction, unit block)
    index u = 0, blocks = 1;    // the block's unit block, and their count
};

// The optional counts of a cell (the LayerNorm LSTM's), 0 (kExtra: 1) where it gives none.
template <class Cell, class = void>
struct CellExtras {
    static constexpr int reductions = 0, params = 0, extra = 1;
};
template <class Cell>
struct CellExtras<Cell, std::void_t<decltype(Cell::kRowReductions)>> {
    static constexpr int reductions = Cell::kRowReductions, params = Cell::kParams,
                         extra = Cell::kExtra;
};
template <class Cell>
constexpr int row_reductions() {
    return CellExtras<Cell>::reductions;
}
template <class Cell>
constexpr int cell_params() {
    return CellExtras<Cell>::params;
}
template <class Cell>
constexpr int extra_width() {
    return CellExtras<Cell>::extra;
}

}  // namespace rnnfast
