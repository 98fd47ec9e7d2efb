// The GRU cell as a policy of the gated drivers (drivers/gated_forward.cpp and
// gated_backward.cpp): its equations on one row of one block of hidden units, in registers'
// reach, right after the thread's part of the step's product.
//   r = rec(a_r),  z = rec(a_z)            a = W_ih x + b_ih + W_hh h_{t-1} (+ b_hh)
//   reset_after:   n = act(a_n^x + r * (W_hn h_{t-1} + b_hn))
//   reset_before:  n = act(a_n^x + W_hn (r * h_{t-1}) + b_hn)
//   h_t = (1 - z) * n + z * h_{t-1}
// The forward stores, per row, [r | z | n | W_hn h_{t-1} + b_hn] (reset_after) or [r | z | n]
// (reset_before), each H wide in PyTorch's unit order: what the backward needs besides h_{t-1}.
#pragma once

#include "gate_layout.hpp"
#include "rnnfast/runtime/kernel_table.hpp"

namespace rnnfast {

template <class T>
struct GruCell {
    static constexpr int kGates = 3;

    // One block of w units starting at unit j0 of one row, reset_after. `a` holds the block's
    // projected input [a_r | a_z | a_n] (w each, the layout's order), `hh` the block's
    // recurrent product's [r | z | n] terms. Writes h_t (h + j0) and the stored row, in one
    // fused pass (KernelTable::gru_row).
    static void after_block(const KernelTable<T>& kt, const T* a, const T* hh, const T* h_prev,
                            T* h, T* store, index H, index j0, index w, Pointwise act,
                            Pointwise rec) {
        kt.gru_row(GateRow<T>{a, hh, h_prev + j0, h + j0, nullptr, store ? store + j0 : nullptr, H,
                              w, act, rec});
    }

    // reset_before, first half: r and z of the block from [a_r | a_z] + their recurrent terms;
    // returns r * h_{t-1} for the block's units into rh (the input of the n product).
    static void rz_block(const KernelTable<T>& kt, T* a, const T* hh, const T* h_prev, T* rh,
                         index j0, index w, Pointwise rec) {
        for (index k = 0; k < 2 * w; ++k)
            a[k] += hh[k];
        kt.activate(a, 2 * w, rec);
        for (index k = 0; k < w; ++k)
            rh[j0 + k] = a[k] * h_prev[j0 + k];
    }
    // reset_before, second half: `a` as rz_block left it, `hn` the block's W_hn (r h) terms.
    static void n_block(const KernelTable<T>& kt, T* a, const T* hn, const T* h_prev, T* h,
                        T* store, index H, index j0, index w, Pointwise act) {
        const T *r = a, *z = a + w;
        T* n = a + 2 * w;
        for (index k = 0; k < w; ++k)
            n[k] += hn[k];
        kt.activate(n, w, act);
        finish(z, n, h_prev + j0, h + j0, w);
        if (store) copy_gates(store, r, z, n, H, j0, w);
    }

    static void finish(const T* z, const T* n, const T* h_prev, T* h, index w) {
        for (index k = 0; k < w; ++k)
            h[k] = (T(1) - z[k]) * n[k] + z[k] * h_prev[k];
    }
    static void copy_gates(T* store, const T* r, const T* z, const T* n, index H, index j0,
                           index w) {
        for (index k = 0; k < w; ++k) {
            store[j0 + k] = r[k];
            store[H + j0 + k] = z[k];
            store[2 * H + j0 + k] = n[k];
        }
    }

    // Backward of one block of one row, from g = dL/dh_t and the stored row. Writes the
    // pre-activation gradients dA (PyTorch's order, the input projection's: [da_r | da_z |
    // da_n]) and the carry to h_{t-1} past the gates (g * z). reset_after also gives the n
    // term's recurrent gradient da_n * r (dhn, for W_hn and b_hn). reset_before leaves da_r to
    // rz_grad (it needs W_hn^T da_n of every unit first). One fused pass
    // (KernelTable::gru_grad_row):
    //   da_n = g * (1 - z) * act'(n),  da_z = g * (h_{t-1} - n) * rec'(z),
    //   da_r = da_n * (W_hn h_{t-1} + b_hn) * rec'(r)
    // Every row is whole (unit j at j); the block is [j0, j0 + w).
    static void grad_block(const KernelTable<T>& kt, const T* g, const T* store, const T* h_prev,
                           T* dA, T* dhn, T* carry, index H, index j0, index w, Pointwise act,
                           Pointwise rec, bool reset_after) {
        kt.gru_grad_row(GateGradRow<T>{g + j0, carry + j0, store + j0, h_prev + j0, dA + j0,
                                       reset_after ? dhn + j0 : nullptr, H, w, act, rec});
    }
    // reset_before: drh = W_hn^T da_n for the block's units; r's gradient and the carry's part
    // through r * h_{t-1}; rh = r * h_{t-1} kept for W_hn's gradient. Under recurrent dropout
    // the n product read h_{t-1} * mask (mask: the row's n mask, else null).
    template <Pointwise rec>
    static void rz_grad(const T* drh, const T* store, const T* h_prev, const T* mask, T* dA,
                        T* carry, T* rh, index j0, index w) {
        for (index k = 0; k < w; ++k) {
            const index j = j0 + k;
            const T r = store[j], m = mask ? mask[j] : T(1);
            const T read = h_prev[j] * m;
            dA[j] = drh[j] * read * pointwise_grad(rec, r);
            carry[j] += drh[j] * r * m;
            rh[j] = r * read;
        }
    }
};

}  // namespace rnnfast
