// The LSTM cell as a policy of the gated drivers: its equations on one row of one block of
// hidden units, right after the thread's part of the step's product.
//   i = rec(a_i), f = rec(a_f), g = act(a_g), o = rec(a_o)   a = W_ih x + b_ih + W_hh h + b_hh
//   c_t = f * c_{t-1} + i * g,   m_t = o * act(c_t),   h_t = m_t (or W_hr m_t, projected)
// The forward stores, per row, [i | f | g | o | c_t], each H wide in PyTorch's unit order.
#pragma once

#include "gate_layout.hpp"
#include "rnnfast/runtime/kernel_table.hpp"

namespace rnnfast {

template <class T>
struct LstmCell {
    static constexpr int kGates = 4;

    // `a`: the block's [a_i | a_f | a_g | a_o] (w each) projected input; `hh` the same terms
    // of the recurrent product. Writes c_t (c + j0), m_t (m + j0) and the stored row, in one
    // fused pass (KernelTable::lstm_row).
    static void forward_block(const KernelTable<T>& kt, const T* a, const T* hh, const T* c_prev,
                              T* c, T* m, T* store, index H, index j0, index w, Pointwise act,
                              Pointwise rec) {
        kt.lstm_row(GateRow<T>{a, hh, c_prev + j0, c + j0, m + j0, store ? store + j0 : nullptr, H,
                               w, act, rec});
    }

    // Backward of one block of one row from dm = dL/dm_t and dc = dL/dc_t arriving from step
    // t + 1 (or dc_n). Writes dA [da_i | da_f | da_g | da_o] (PyTorch's order), the carry
    // dL/dc_{t-1} (into dc, in place) and, with a projection, m_t (for W_hr's gradient), in one
    // fused pass (KernelTable::lstm_grad_row):
    //   dc_t' = dc + dm * o * act'(act(c_t)),  da_i = dc_t' * g * rec'(i),
    //   da_f = dc_t' * c_{t-1} * rec'(f),  da_g = dc_t' * i * act'(g),
    //   da_o = dm * act(c_t) * rec'(o),  dc_{t-1} = dc_t' * f
    // Rows dm, dc, store, c_prev, dA and m are whole rows (unit j at j); the block is [j0, j0 + w).
    static void grad_block(const KernelTable<T>& kt, const T* dm, T* dc, const T* store,
                           const T* c_prev, T* dA, T* m, index H, index j0, index w, Pointwise act,
                           Pointwise rec) {
        kt.lstm_grad_row(GateGradRow<T>{dm + j0, dc + j0, store + j0, c_prev + j0, dA + j0,
                                        m ? m + j0 : nullptr, H, w, act, rec});
    }
};

}  // namespace rnnfast
