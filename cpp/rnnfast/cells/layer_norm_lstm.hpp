// The LayerNorm LSTM (torchaudio's RNN-T predictor cell, torchaudio.models.rnnt._CustomLSTM with
// layer_norm=True) as a policy of the gated passes (cells/gated_cell.hpp lists what a policy
// gives):
//   z = W_ih x_t + W_hh h_{t-1}                  (4H; biases only where the layer has them)
//   [a_i | a_f | a_g | a_o] = LN_g(z)            over all 4H of the row, weight gw and bias gb
//   u = rec(a_f) * c_{t-1} + rec(a_i) * act(a_g)
//   c_t = LN_c(u)                                over the H of the row, weight cw and bias cb
//   h_t = rec(a_o) * act(c_t)
// LN(v) = (v - mean(v)) / sqrt(var(v) + eps) * weight + bias, the biased variance (PyTorch's).
//
// The two layer norms read the whole row, and a member of the step owns only a block of its
// units: each is a sub-step after a barrier (kRowReductions = 2). The block's statistics go to
// the member's slot of the row's shared scratch (GatedBlock::stats: per reduction, per unit
// block of the layout, three values: count, mean, M2), and after the barrier every member
// combines the row's slots in unit-block order (Chan et al.'s pairwise update): the result
// depends neither on the thread count nor on which member owns which block. The backward does
// the same with plain sums (sum dv, sum dv * v-hat per block).
//
// The cell's own parameters (kParams = 10, in units of H), one array in PyTorch's order:
//   [gw (4H) | gb (4H) | cw (H) | cb (H)]   (_CustomLSTM's g_norm.weight/bias, c_norm.weight/bias)
// The forward stores, per row, PyTorch's unit order:
//   [i | f | g | o | c_t | zhat (4H) | uhat | rstd_g | rstd_c]   (kStored = 12)
// zhat and uhat the normalised values before their affine maps, rstd_g and rstd_c 1/sqrt(var +
// eps) repeated on every unit (each member writes its own units': no extra meeting).
// The backward's `extra` per row is [d a (4H) | d c_t (H)] (kExtra = 5), from which
// param_gradients sums the norms' weight and bias gradients after the walk.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "gate_layout.hpp"
#include "gated_cell.hpp"
#include "rnnfast/runtime/kernel_table.hpp"

namespace rnnfast {

template <class T>
struct LayerNormLstmCell {
    static constexpr int kStates = 2;  // h and c
    static constexpr int kGates = 4;
    static constexpr int kStepGates = 4;
    static constexpr int kStored = 12;
    static constexpr int kStoredState = 4;  // c_t
    static constexpr bool kInnerBias = false;
    static constexpr bool kSecondProduct = false;
    static constexpr bool kProjects = false;
    static constexpr int kDirectGates = 4;
    static constexpr int kRowReductions = 2;
    static constexpr int kParams = 10;
    static constexpr int kExtra = 5;
    static constexpr double kEps = 1e-5;  // torch.nn.LayerNorm's default, as _CustomLSTM's

    // Stored columns, in units of H.
    static constexpr int kZhat = 5, kUhat = 9, kRstdG = 10, kRstdC = 11;
    // Parameter columns, in units of H.
    static constexpr int kGw = 0, kGb = 4, kCw = 8, kCb = 9;

    // The row's statistics of reduction r: the blocks' (count, mean, M2) combined in order.
    static void combined(const T* stats, int r, index blocks, T& mean, T& var) {
        const T* s = stats + r * blocks * 3;
        T n = s[0], m = s[1], m2 = s[2];
        for (index v = 1; v < blocks; ++v) {
            const T nb = s[3 * v], mb = s[3 * v + 1], delta = mb - m, n_ab = n + nb;
            m += delta * nb / n_ab;
            m2 += s[3 * v + 2] + delta * delta * n * nb / n_ab;
            n = n_ab;
        }
        mean = m;
        var = m2 / n;
    }
    // This block's (count, mean, M2) of v[0, n) into reduction r's slot.
    static void publish(T* stats, int r, index blocks, index u, const T* v, index n) {
        T sum = 0;
        for (index k = 0; k < n; ++k)
            sum += v[k];
        const T mean = sum / T(n);
        T m2 = 0;
        for (index k = 0; k < n; ++k)
            m2 += (v[k] - mean) * (v[k] - mean);
        T* s = stats + (r * blocks + u) * 3;
        s[0] = T(n);
        s[1] = mean;
        s[2] = m2;
    }

    // Sub-step 0: z of the block (the projection plus the product's terms), in `a`, and its
    // statistics.
    static void forward_block(const KernelTable<T>&, const GatedBlock<T>& b) {
        for (index k = 0; k < 4 * b.w; ++k)
            b.a[k] += b.hh[k];
        publish(b.stats, 0, b.blocks, b.u, b.a, 4 * b.w);
    }
    static void second_block(const KernelTable<T>&, const GatedBlock<T>&) {}

    // Sub-steps 1 and 2, after a barrier each: the gates' norm and u (kept in c_t's place, o
    // in `a`), then the cell's norm, c_t and h_t.
    static void reduced_block(const KernelTable<T>& kt, const GatedBlock<T>& b, int sub) {
        const index H = b.H, w = b.w, j0 = b.j0;
        T* a = b.a;
        T* c = b.c + j0;
        T* store = b.store;
        T mean, var;
        combined(b.stats, sub - 1, b.blocks, mean, var);
        const T rstd = T(1) / std::sqrt(var + T(kEps));
        if (sub == 1) {
            for (int g = 0; g < 4; ++g)
                for (index k = 0; k < w; ++k) {
                    const index col = g * H + j0 + k;
                    const T zhat = (a[g * w + k] - mean) * rstd;
                    if (store) store[kZhat * H + col] = zhat;
                    a[g * w + k] = zhat * b.params[kGw * H + col] + b.params[kGb * H + col];
                }
            kt.activate(a, 2 * w, b.rec);
            kt.activate(a + 2 * w, w, b.act);
            kt.activate(a + 3 * w, w, b.rec);
            const T* c_prev = b.c_prev + j0;
            for (index k = 0; k < w; ++k)
                c[k] = a[w + k] * c_prev[k] + a[k] * a[2 * w + k];
            if (store)
                for (index k = 0; k < w; ++k) {
                    for (int g = 0; g < 4; ++g)
                        store[g * H + j0 + k] = a[g * w + k];
                    store[kRstdG * H + j0 + k] = rstd;
                }
            publish(b.stats, 1, b.blocks, b.u, c, w);
            return;
        }
        for (index k = 0; k < w; ++k) {
            const index j = j0 + k;
            const T uhat = (c[k] - mean) * rstd;
            c[k] = uhat * b.params[kCw * H + j] + b.params[kCb * H + j];
            a[k] = c[k];
            if (store) {
                store[kUhat * H + j] = uhat;
                store[kRstdC * H + j] = rstd;
                store[kStoredState * H + j] = c[k];
            }
        }
        kt.activate(a, w, b.act);  // act(c_t), in the i slot (stored already)
        T* m = b.m + j0;
        for (index k = 0; k < w; ++k)
            m[k] = a[3 * w + k] * a[k];
    }

    // Backward sub-step 0, from dm = dL/dh_t and dc = dL/dc_t of step t + 1 (or dc_n):
    //   dc_t' = dc + dm * o * act'(act(c_t)),  da_o = dm * act(c_t) * rec'(o)
    //   duhat = dc_t' * cw  (kept in the carry), and the block's sums of duhat, duhat * uhat.
    static void grad_block(const KernelTable<T>&, const GatedGradBlock<T>& b) {
        const index H = b.H;
        T s1 = 0, s2 = 0;
        for (index k = 0; k < b.w; ++k) {
            const index j = b.j0 + k;
            const T o = b.store[3 * H + j],
                    tc = pointwise_value(b.act, b.store[kStoredState * H + j]);
            const T dct = b.carry[j] + b.g[j] * o * pointwise_grad(b.act, tc);
            b.extra[3 * H + j] = b.g[j] * tc * pointwise_grad(b.rec, o);
            b.extra[4 * H + j] = dct;
            const T du = dct * b.params[kCw * H + j];
            b.carry[j] = du;
            s1 += du;
            s2 += du * b.store[kUhat * H + j];
        }
        T* s = b.stats + b.u * 2;
        s[0] = s1;
        s[1] = s2;
    }

    // Backward sub-steps 1 and 2, after a barrier each: through the cell's norm to u, the gates
    // and c_{t-1} (the carry), then through the gates' norm to z (dA).
    static void reduced_grad(const KernelTable<T>&, const GatedGradBlock<T>& b, int sub) {
        const index H = b.H;
        const T* s = b.stats + (sub - 1) * b.blocks * 2;
        T s1 = 0, s2 = 0;
        for (index v = 0; v < b.blocks; ++v) {
            s1 += s[2 * v];
            s2 += s[2 * v + 1];
        }
        if (sub == 1) {
            const T m1 = s1 / T(H), m2 = s2 / T(H);
            T g1 = 0, g2 = 0;
            for (index k = 0; k < b.w; ++k) {
                const index j = b.j0 + k;
                const T* st = b.store;
                const T du = st[kRstdC * H + j] * (b.carry[j] - m1 - st[kUhat * H + j] * m2);
                const T i = st[j], f = st[H + j], g = st[2 * H + j];
                b.carry[j] = du * f;
                b.extra[j] = du * g * pointwise_grad(b.rec, i);
                b.extra[H + j] = du * b.c_prev[j] * pointwise_grad(b.rec, f);
                b.extra[2 * H + j] = du * i * pointwise_grad(b.act, g);
                for (int q = 0; q < 4; ++q) {
                    const index col = q * H + j;
                    const T dz = b.extra[col] * b.params[kGw * H + col];
                    b.dA[col] = dz;
                    g1 += dz;
                    g2 += dz * st[kZhat * H + col];
                }
            }
            T* out = b.stats + (b.blocks + b.u) * 2;
            out[0] = g1;
            out[1] = g2;
            return;
        }
        const T m1 = s1 / T(4 * H), m2 = s2 / T(4 * H);
        for (index k = 0; k < b.w; ++k) {
            const index j = b.j0 + k;
            const T rstd = b.store[kRstdG * H + j];
            for (int q = 0; q < 4; ++q) {
                const index col = q * H + j;
                b.dA[col] = rstd * (b.dA[col] - m1 - b.store[kZhat * H + col] * m2);
            }
        }
    }
    template <Pointwise rec>
    static void second_grad(const T*, const T*, const T*, const T*, T*, T*, T*, index, index) {}

    // The norms' weight and bias gradients (kParams * H, the parameters' order) summed over
    // `rows` rows of `extra` (kExtra * H each) and the stored rows (kStored * H each); rows that
    // did not run are zeros in both.
    static void param_gradients(const T* extra, const T* store, index rows, index H, T* d) {
        std::fill(d, d + kParams * H, T(0));
        for (index r = 0; r < rows; ++r) {
            const T* e = extra + r * kExtra * H;
            const T* st = store + r * kStored * H;
            for (index col = 0; col < 4 * H; ++col) {
                d[kGw * H + col] += e[col] * st[kZhat * H + col];
                d[kGb * H + col] += e[col];
            }
            for (index j = 0; j < H; ++j) {
                d[kCw * H + j] += e[4 * H + j] * st[kUhat * H + j];
                d[kCb * H + j] += e[4 * H + j];
            }
        }
    }
};

}  // namespace rnnfast
