// ONNX's forms of the LSTM cell as policies of the gated passes (cells/gated_cell.hpp lists
// what a policy gives): peepholes, coupled input and forget gates (ONNX's input_forget=1) and
// the cell clip, each a compile-time option (kOptions, a set of LstmForm bits), so that every
// combination is its own instantiation and the plain LstmCell (cells/lstm.hpp) is untouched.
// As onnxruntime's CPU LSTM computes them (PyTorch's gate order i, f, g, o here):
//   a_i += p_i * c_{t-1},  a_f += p_f * c_{t-1}        (peepholes)
//   i = rec(clip(a_i)),  f = rec(clip(a_f)),  g = act(clip(a_g))
//   f = 1 - i                                          (input_forget: f's terms are unused)
//   c_t = f * c_{t-1} + i * g
//   a_o += p_o * c_t;  o = rec(clip(a_o));  h_t = o * act(c_t)   (act(c_t) is not clipped)
// clip(v) = min(max(v, -clip), clip). No projection.
//
// The cell's own parameters (cell_params, kParams in units of H): [p_i | p_f | p_o] with
// peepholes, then with the clip one column holding the threshold (only its first value is
// read; its gradient is zero).
// The forward stores, per row, [i | f | g | o | c_t] (the LSTM's) and with the clip four
// columns more: 1 where a gate's pre-activation was inside [-clip, clip], else 0 (the clip's
// derivative). The backward's `extra` per row with peepholes is [da_i * c_{t-1} | da_f *
// c_{t-1} | da_o * c_t], which param_gradients sums over the steps.
#pragma once

#include <algorithm>
#include <type_traits>

#include "gate_layout.hpp"
#include "gated_cell.hpp"
#include "rnnfast/runtime/kernel_table.hpp"

namespace rnnfast {

enum LstmForm : int { kPeepholes = 1, kInputForget = 2, kCellClip = 4 };

template <class T, int kOptions>
struct LstmFormCell {
    static constexpr bool kPeep = (kOptions & kPeepholes) != 0;
    static constexpr bool kCoupled = (kOptions & kInputForget) != 0;
    static constexpr bool kClip = (kOptions & kCellClip) != 0;

    static constexpr int kStates = 2;  // h and c
    static constexpr int kGates = 4;
    static constexpr int kStepGates = 4;
    static constexpr int kStored = kClip ? 9 : 5;  // i, f, g, o, c_t (and the clip's masks)
    static constexpr int kStoredState = 4;         // c_t
    static constexpr bool kInnerBias = false;
    static constexpr bool kSecondProduct = false;
    static constexpr bool kProjects = false;
    static constexpr int kDirectGates = 4;
    static constexpr int kRowReductions = 0;
    static constexpr int kParams = (kPeep ? 3 : 0) + (kClip ? 1 : 0);
    static constexpr int kExtra = kPeep ? 3 : 1;
    // Parameter and stored columns, in units of H.
    static constexpr int kPi = 0, kPf = 1, kPo = 2, kClipColumn = kPeep ? 3 : 0, kMask = 5;

    // Gate q's pre-activations a[0, w) clipped, with their masks into mask[0, w) (or none).
    static void clip(T* a, index w, T bound, T* mask) {
        for (index k = 0; k < w; ++k) {
            const bool inside = a[k] >= -bound && a[k] <= bound;
            if (mask) mask[k] = inside ? T(1) : T(0);
            a[k] = std::min(bound, std::max(-bound, a[k]));
        }
    }

    static void forward_block(const KernelTable<T>& kt, const GatedBlock<T>& b) {
        const index H = b.H, w = b.w, j0 = b.j0;
        T* a = b.a;
        T* store = b.store;
        const T* c_prev = b.c_prev + j0;
        T* c = b.c + j0;
        for (index k = 0; k < 4 * w; ++k)
            a[k] += b.hh[k];
        if constexpr (kPeep) {
            const T* p = b.params;
            for (index k = 0; k < w; ++k) {
                a[k] += p[kPi * H + j0 + k] * c_prev[k];
                if (!kCoupled) a[w + k] += p[kPf * H + j0 + k] * c_prev[k];
            }
        }
        T bound = T(0);
        if constexpr (kClip) {
            bound = b.params[kClipColumn * H];
            for (int q = 0; q < 3; ++q)
                if (q != 1 || !kCoupled)
                    clip(a + q * w, w, bound, store ? store + (kMask + q) * H + j0 : nullptr);
        }
        kt.activate(a, kCoupled ? w : 2 * w, b.rec);
        kt.activate(a + 2 * w, w, b.act);
        if constexpr (kCoupled)
            for (index k = 0; k < w; ++k)
                a[w + k] = T(1) - a[k];
        for (index k = 0; k < w; ++k)
            c[k] = a[w + k] * c_prev[k] + a[k] * a[2 * w + k];
        T* o = a + 3 * w;
        if constexpr (kPeep)
            for (index k = 0; k < w; ++k)
                o[k] += b.params[kPo * H + j0 + k] * c[k];
        if constexpr (kClip) clip(o, w, bound, store ? store + (kMask + 3) * H + j0 : nullptr);
        kt.activate(o, w, b.rec);
        if (store) {
            for (int q = 0; q < 4; ++q)
                std::copy(a + q * w, a + (q + 1) * w, store + q * H + j0);
            std::copy(c, c + w, store + kStoredState * H + j0);
            if (kClip && kCoupled)
                std::fill(store + (kMask + 1) * H + j0, store + (kMask + 1) * H + j0 + w, T(0));
        }
        std::copy(c, c + w, a);  // act(c_t) in the i slot (stored already)
        kt.activate(a, w, b.act);
        T* m = b.m + j0;
        for (index k = 0; k < w; ++k)
            m[k] = o[k] * a[k];
    }
    static void second_block(const KernelTable<T>&, const GatedBlock<T>&) {}

    // Backward from dm = dL/dh_t and dc = dL/dc_t of step t + 1 (or dc_n):
    //   da_o = dm * act(c_t) * rec'(o) [* mask_o]
    //   dc_t' = dc + dm * o * act'(act(c_t)) [+ da_o * p_o]
    //   da_g = dc_t' * i * act'(g) [* mask_g]
    //   da_i = dc_t' * g * rec'(i),  da_f = dc_t' * c_{t-1} * rec'(f)    [* their masks]
    //     input_forget (f = 1 - i): da_i = dc_t' * (g - c_{t-1}) * rec'(i) [* mask_i], da_f = 0
    //   dc_{t-1} = dc_t' * f [+ da_i * p_i + da_f * p_f]
    static void grad_block(const KernelTable<T>&, const GatedGradBlock<T>& b) {
        const index H = b.H;
        const T* st = b.store;
        for (index k = 0; k < b.w; ++k) {
            const index j = b.j0 + k;
            const T i = st[j], f = st[H + j], g = st[2 * H + j], o = st[3 * H + j];
            const T c = st[kStoredState * H + j], cp = b.c_prev[j], dm = b.g[j];
            const T tc = pointwise_value(b.act, c);
            T da_o = dm * tc * pointwise_grad(b.rec, o);
            if constexpr (kClip) da_o *= st[(kMask + 3) * H + j];
            T dct = b.carry[j] + dm * o * pointwise_grad(b.act, tc);
            if constexpr (kPeep) dct += da_o * b.params[kPo * H + j];
            T da_g = dct * i * pointwise_grad(b.act, g);
            T da_i, da_f;
            if constexpr (kCoupled) {
                da_i = dct * (g - cp) * pointwise_grad(b.rec, i);
                da_f = T(0);
            } else {
                da_i = dct * g * pointwise_grad(b.rec, i);
                da_f = dct * cp * pointwise_grad(b.rec, f);
            }
            if constexpr (kClip) {
                da_i *= st[kMask * H + j];
                da_g *= st[(kMask + 2) * H + j];
                if (!kCoupled) da_f *= st[(kMask + 1) * H + j];
            }
            T carry = dct * f;
            if constexpr (kPeep) {
                carry += da_i * b.params[kPi * H + j];
                if (!kCoupled) carry += da_f * b.params[kPf * H + j];
                b.extra[kPi * H + j] = da_i * cp;
                b.extra[kPf * H + j] = da_f * cp;
                b.extra[kPo * H + j] = da_o * c;
            }
            b.carry[j] = carry;
            b.dA[j] = da_i;
            b.dA[H + j] = da_f;
            b.dA[2 * H + j] = da_g;
            b.dA[3 * H + j] = da_o;
        }
    }
    template <Pointwise rec>
    static void second_grad(const T*, const T*, const T*, const T*, T*, T*, T*, index, index) {}

    // The peepholes' gradients (summed over `rows` rows of `extra`, kExtra * H each; rows that
    // did not run are zeros) and the clip's (zero), in the parameters' order.
    static void param_gradients(const T* extra, const T*, index rows, index H, T* d) {
        std::fill(d, d + kParams * H, T(0));
        if constexpr (kPeep)
            for (index r = 0; r < rows; ++r)
                for (index col = 0; col < 3 * H; ++col)
                    d[col] += extra[r * kExtra * H + col];
    }
};

// Whether a cell is one of these forms (the quantized passes do not run them).
template <class Cell>
struct IsLstmForm : std::false_type {};
template <class T, int kOptions>
struct IsLstmForm<LstmFormCell<T, kOptions>> : std::true_type {};

}  // namespace rnnfast
