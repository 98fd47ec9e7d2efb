// How the gated cells lay out their gate columns for the step's product: blocks of `block`
// hidden units (the kernels' panel width), each holding every gate of its units side by side,
// [gate 0 of units u*block.., gate 1 of the same units, ...]. A thread that owns a block's
// columns then has every gate of its units after its part of the product and runs the cell's
// epilogue at once, with no barrier (weight-stationary threads, as the Elman layer's). The
// weights, the projection and the step's products use this order; what the forward stores
// for the backward and the gradients the caller sees keep PyTorch's order.
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "rnnfast/runtime/kernel_table.hpp"
#include "rnnfast/runtime/types.hpp"
#include "rnnfast/runtime/uninitialized.hpp"

namespace rnnfast {

struct GateLayout {
    index hidden = 0;  // H
    int gates = 1;     // gate groups
    index block = 1;   // hidden units per block

    index columns() const { return gates * hidden; }
    index blocks() const { return (hidden + block - 1) / block; }
    index first_unit(index u) const { return u * block; }
    index width(index u) const { return std::min(block, hidden - u * block); }
    // First column of block u (blocks() gives the end), clamped to the columns.
    index base(index u) const { return std::min(columns(), gates * u * block); }
    // The column of gate g of hidden unit j.
    index column(int g, index j) const {
        const index u = j / block;
        return base(u) + g * width(u) + (j - u * block);
    }
};

// The rows of W (gates * H rows in PyTorch's gate order, `cols` columns each), or of a bias
// (cols = 1), reordered into the layout's column order: an empty vector for a null W.
template <class T>
std::vector<T> rows_in_layout(const T* w, const GateLayout& layout, index cols) {
    std::vector<T> out;
    if (w == nullptr) return out;
    out.resize(static_cast<size_t>(layout.columns() * cols));
    for (int g = 0; g < layout.gates; ++g)
        for (index j = 0; j < layout.hidden; ++j)
            std::copy(w + (g * layout.hidden + j) * cols, w + (g * layout.hidden + j + 1) * cols,
                      out.begin() + layout.column(g, j) * cols);
    return out;
}

// W^T packed for the kernels with its columns in the layout's order, straight from W (gates * H
// rows of K values, PyTorch's order), for unit blocks [u0, u1) into `packed` (laid out for all
// of them: kt.packed_b_size(K, layout.columns())): a block whose width is a multiple of nr has
// each gate in whole panels of W's consecutive rows, packed in place; only a last, narrower
// block is gathered first. (A reordered copy of W would cost a pass over W and its memory at
// every call.) Blocks are independent: a team's members pack theirs at once.
template <class T>
void pack_blocks_in_layout(const KernelTable<T>& kt, const T* w, const GateLayout& layout, index K,
                           index u0, index u1, T* packed) {
    const index nr = kt.nr, H = layout.hidden;
    std::vector<T> last;  // the narrower block's rows, gathered
    for (index u = u0; u < u1; ++u) {
        const index j0 = layout.first_unit(u), w_u = layout.width(u);
        T* dst = packed + layout.base(u) * K;  // panel base(u) / nr, nr columns each
        if (w_u % nr == 0) {
            for (int g = 0; g < layout.gates; ++g)
                kt.pack_b(MatView<T>{w + (g * H + j0) * K, 1, K}, K, w_u, 0, w_u / nr,
                          dst + g * w_u * K);
            continue;
        }
        last.resize(static_cast<size_t>(layout.gates * w_u * K));
        for (int g = 0; g < layout.gates; ++g)
            std::copy(w + (g * H + j0) * K, w + (g * H + j0 + w_u) * K, last.begin() + g * w_u * K);
        const index cols = layout.gates * w_u;
        kt.pack_b(MatView<T>{last.data(), 1, K}, K, cols, 0, (cols + nr - 1) / nr, dst);
    }
}

// All of W^T packed in the layout's order (pack_blocks_in_layout over every block).
template <class T>
Packed<T> pack_in_layout(const KernelTable<T>& kt, const T* w, const GateLayout& layout, index K) {
    Packed<T> packed(static_cast<size_t>(kt.packed_b_size(K, layout.columns())));
    pack_blocks_in_layout(kt, w, layout, K, 0, layout.blocks(), packed.data());
    return packed;
}

// A gate's function of x, one value (the kernels' activate works on rows).
template <class T>
inline T pointwise_value(Pointwise op, T x) {
    switch (op) {
        case Pointwise::tanh:
            return std::tanh(x);
        case Pointwise::relu:
            return x > T(0) ? x : T(0);
        case Pointwise::sigmoid:
            return T(1) / (T(1) + std::exp(-x));
        case Pointwise::hard_sigmoid:
            return std::min(T(1), std::max(T(0), x / T(6) + T(0.5)));
    }
    return x;
}

// The derivative of a gate's function from its output s.
template <class T>
inline T pointwise_grad(Pointwise op, T s) {
    switch (op) {
        case Pointwise::sigmoid:
            return s * (T(1) - s);
        case Pointwise::hard_sigmoid:
            return (s > T(0) && s < T(1)) ? T(1.0 / 6.0) : T(0);
        case Pointwise::tanh:
            return T(1) - s * s;
        case Pointwise::relu:
            return s > T(0) ? T(1) : T(0);
    }
    return T(0);
}

// Calls f(act, rec) with the two functions as compile-time constants (std::integral_constant):
// a cell's backward loop, compiled once per pair, then has no branch on them per element and
// vectorises.
template <class F>
void with_gate_functions(Pointwise act, Pointwise rec, F&& f) {
    using Sigmoid = std::integral_constant<Pointwise, Pointwise::sigmoid>;
    using HardSigmoid = std::integral_constant<Pointwise, Pointwise::hard_sigmoid>;
    const auto by_rec = [&](auto a) {
        if (rec == Pointwise::hard_sigmoid)
            f(a, HardSigmoid{});
        else
            f(a, Sigmoid{});
    };
    if (act == Pointwise::relu)
        by_rec(std::integral_constant<Pointwise, Pointwise::relu>{});
    else
        by_rec(std::integral_constant<Pointwise, Pointwise::tanh>{});
}

}  // namespace rnnfast
