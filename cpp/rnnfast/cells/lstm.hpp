// The LSTM cell as a policy of the gated passes (cells/gated_cell.hpp lists what a policy
// gives): its equations on one row of one block of hidden units, right after the thread's part
// of the step's product.
//   i = rec(a_i), f = rec(a_f), g = act(a_g), o = rec(a_o)   a = W_ih x + b_ih + W_hh h + b_hh
//   c_t = f * c_{t-1} + i * g,   m_t = o * act(c_t),   h_t = m_t (or W_hr m_t, projected)
// The forward stores, per row, [i | f | g | o | c_t], each H wide in PyTorch's unit order.
#pragma once

#include "gate_layout.hpp"
#include "gated_cell.hpp"
#include "rnnfast/runtime/kernel_table.hpp"

namespace rnnfast {

template <class T>
struct LstmCell {
    static constexpr int kStates = 2;  // h and c
    static constexpr int kGates = 4;
    static constexpr int kStepGates = 4;
    static constexpr int kStored = 5;       // i, f, g, o, c_t
    static constexpr int kStoredState = 4;  // c_t
    static constexpr bool kInnerBias = false;
    static constexpr bool kSecondProduct = false;
    static constexpr bool kProjects = true;
    static constexpr int kDirectGates = 4;

    // `a`: the block's [a_i | a_f | a_g | a_o] projected input; `hh` the same terms of the
    // recurrent product. Writes c_t, m_t and the stored row, in one fused pass
    // (KernelTable::lstm_row).
    static void forward_block(const KernelTable<T>& kt, const GatedBlock<T>& b) {
        kt.lstm_row(GateRow<T>{b.a, b.hh, b.c_prev + b.j0, b.c + b.j0, b.m + b.j0,
                               b.store ? b.store + b.j0 : nullptr, b.H, b.w, b.act, b.rec});
    }
    static void second_block(const KernelTable<T>&, const GatedBlock<T>&) {}

    // Backward from dm = dL/dm_t and dc = dL/dc_t arriving from step t + 1 (or dc_n). Writes
    // dA [da_i | da_f | da_g | da_o] (PyTorch's order), the carry dL/dc_{t-1} (into dc, in
    // place) and, with a projection, m_t (for W_hr's gradient), in one fused pass
    // (KernelTable::lstm_grad_row):
    //   dc_t' = dc + dm * o * act'(act(c_t)),  da_i = dc_t' * g * rec'(i),
    //   da_f = dc_t' * c_{t-1} * rec'(f),  da_g = dc_t' * i * act'(g),
    //   da_o = dm * act(c_t) * rec'(o),  dc_{t-1} = dc_t' * f
    static void grad_block(const KernelTable<T>& kt, const GatedGradBlock<T>& b) {
        const index j0 = b.j0;
        kt.lstm_grad_row(GateGradRow<T>{b.g + j0, b.carry + j0, b.store + j0, b.c_prev + j0,
                                        b.dA + j0, b.m ? b.m + j0 : nullptr, b.H, b.w, b.act,
                                        b.rec});
    }
    template <Pointwise rec>
    static void second_grad(const T*, const T*, const T*, const T*, T*, T*, T*, index, index) {}
};

}  // namespace rnnfast
