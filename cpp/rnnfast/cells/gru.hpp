// The GRU cells as policies of the gated passes (cells/gated_cell.hpp lists what a policy
// gives): their equations on one row of one block of hidden units, in registers' reach, right
// after the thread's part of the step's product.
//   r = rec(a_r),  z = rec(a_z)            a = W_ih x + b_ih + W_hh h_{t-1} (+ b_hh)
//   reset_after:   n = act(a_n^x + r * (W_hn h_{t-1} + b_hn))
//   reset_before:  n = act(a_n^x + W_hn (r * h_{t-1}) + b_hn)
//   h_t = (1 - z) * n + z * h_{t-1}
// The forward stores, per row, [r | z | n | W_hn h_{t-1} + b_hn] (reset_after) or [r | z | n]
// (reset_before), each H wide in PyTorch's unit order: what the backward needs besides h_{t-1}.
#pragma once

#include "gate_layout.hpp"
#include "gated_cell.hpp"
#include "rnnfast/runtime/kernel_table.hpp"

namespace rnnfast {

// What both forms share: one state, three gate groups, the fused backward row.
template <class T>
struct GruGates {
    static constexpr int kStates = 1;
    static constexpr int kGates = 3;
    static constexpr int kStoredState = 0;
    static constexpr bool kProjects = false;
    static constexpr int kDirectGates = 2;  // r and z; the n rows read r * (...)

    // Backward of one block of one row, from g = dL/dh_t and the stored row. Writes the
    // pre-activation gradients dA (PyTorch's order, the input projection's: [da_r | da_z |
    // da_n]) and the carry to h_{t-1} past the gates (g * z). reset_after also gives the n
    // term's recurrent gradient da_n * r (extra, for W_hn and b_hn). reset_before leaves da_r
    // to second_grad (it needs W_hn^T da_n of every unit first). One fused pass
    // (KernelTable::gru_grad_row):
    //   da_n = g * (1 - z) * act'(n),  da_z = g * (h_{t-1} - n) * rec'(z),
    //   da_r = da_n * (W_hn h_{t-1} + b_hn) * rec'(r)
    static void grad_rows(const KernelTable<T>& kt, const GatedGradBlock<T>& b, T* extra) {
        const index j0 = b.j0;
        kt.gru_grad_row(GateGradRow<T>{b.g + j0, b.carry + j0, b.store + j0, b.h_prev + j0,
                                       b.dA + j0, extra ? extra + j0 : nullptr, b.H, b.w, b.act,
                                       b.rec});
    }
};

// PyTorch's form (Keras's reset_after=True, ONNX's linear_before_reset=1).
template <class T>
struct GruCell : GruGates<T> {
    static constexpr int kStepGates = 3;
    static constexpr int kStored = 4;  // r, z, n, W_hn h + b_hn
    static constexpr bool kInnerBias = true;
    static constexpr bool kSecondProduct = false;

    // `a` holds the block's projected input [a_r | a_z | a_n], `hh` the recurrent product's
    // [r | z | n] terms. Writes h_t and the stored row, in one fused pass (KernelTable::gru_row).
    static void forward_block(const KernelTable<T>& kt, const GatedBlock<T>& b) {
        kt.gru_row(GateRow<T>{b.a, b.hh, b.h_prev + b.j0, b.h + b.j0, nullptr,
                              b.store ? b.store + b.j0 : nullptr, b.H, b.w, b.act, b.rec});
    }
    static void second_block(const KernelTable<T>&, const GatedBlock<T>&) {}

    static void grad_block(const KernelTable<T>& kt, const GatedGradBlock<T>& b) {
        GruGates<T>::grad_rows(kt, b, b.extra);
    }
    template <Pointwise rec>
    static void second_grad(const T*, const T*, const T*, const T*, T*, T*, T*, index, index) {}
};

// Keras's reset_after=False: the reset gate scales h_{t-1} before W_hn's product, a second
// product after a barrier (it reads every unit's r * h_{t-1}).
template <class T>
struct GruResetBeforeCell : GruGates<T> {
    static constexpr int kStepGates = 2;  // r and z; n's product is the second
    static constexpr int kStored = 3;     // r, z, n
    static constexpr bool kInnerBias = false;
    static constexpr bool kSecondProduct = true;

    // First half: r and z of the block from [a_r | a_z] + their recurrent terms; writes
    // r * h_{t-1} for the block's units into mid (the input of the n product).
    static void forward_block(const KernelTable<T>& kt, const GatedBlock<T>& b) {
        T* a = b.a;
        for (index k = 0; k < 2 * b.w; ++k)
            a[k] += b.hh[k];
        kt.activate(a, 2 * b.w, b.rec);
        for (index k = 0; k < b.w; ++k)
            b.mid[b.j0 + k] = a[k] * b.r_reads[b.j0 + k];
    }
    // Second half: `a` as forward_block left it, `hh` the block's W_hn (r h) terms.
    static void second_block(const KernelTable<T>& kt, const GatedBlock<T>& b) {
        const index w = b.w, j0 = b.j0;
        const T *r = b.a, *z = b.a + w;
        T* n = b.a + 2 * w;
        for (index k = 0; k < w; ++k)
            n[k] += b.hh[k];
        kt.activate(n, w, b.act);
        const T* h_prev = b.h_prev + j0;
        T* h = b.h + j0;
        for (index k = 0; k < w; ++k)
            h[k] = (T(1) - z[k]) * n[k] + z[k] * h_prev[k];
        if (b.store)
            for (index k = 0; k < w; ++k) {
                b.store[j0 + k] = r[k];
                b.store[b.H + j0 + k] = z[k];
                b.store[2 * b.H + j0 + k] = n[k];
            }
    }

    static void grad_block(const KernelTable<T>& kt, const GatedGradBlock<T>& b) {
        GruGates<T>::grad_rows(kt, b, nullptr);
    }
    // drh = W_hn^T da_n for the block's units; r's gradient and the carry's part through
    // r * h_{t-1}; rh = r * h_{t-1} kept for W_hn's gradient. Under recurrent dropout the n
    // product read h_{t-1} * mask (mask: the row's n mask, else null).
    template <Pointwise rec>
    static void second_grad(const T* drh, const T* store, const T* h_prev, const T* mask, T* dA,
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
