// The Elman cell's backward step under general step masks and recurrent dropout (the masked
// backward driver), over one thread's share of a (B x H) step, as in elman_leaky.hpp. It
// touches only what its thread writes, or reads what the step's barrier has published, so it
// needs no barrier of its own, and is O(B*H) per step against the GEMM's O(B*H*H).
#pragma once

#include <cstdint>

#include "rnnfast/runtime/types.hpp"

namespace rnnfast {

// What one backward step of the masked driver reads and writes, for its block.
template <class T>
struct MaskedGradStep {
    T* g;                       // out: the total gradient of h_t, where step t-1 reads it
    T* delta;                   // out: the pre-activation's gradient (zero where skipped)
    T* prev;                    // out: what W_hh read at step t, h_{t-1} * mask (for dW_hh)
    const T* dy;                // (B, H) dy_t, or null
    const std::uint8_t* out_t;  // (B): y_t is the state (else dy_t reaches nothing)
    const T* dh_n;              // (B, H) at the last step (h_n is h_{T-1}), else null
    const T* y;                 // (T, B, H): a kept row's y_t is h_t
    index t, batch;
    const index* source_prev;    // (B): the step whose y holds h_{t-1}, -1 for h0; null: all h0
    const T* h0;                 // (B, H)
    const T* zeros;              // (H) zeros, read in place of an absent row
    const std::uint8_t* keep_t;  // (B)
    // From step t + 1 (null at the last step): rho = delta_{t+1} W_hh, g_{t+1}, its keep mask.
    const T* rho;
    const T* g_next;
    const std::uint8_t* keep_next;
    const T* mask;  // (B, H) recurrent mask, or null
    T alpha;
    Activation act;
};

// The backward step over the block (masked_grad_rows): g_t = [y_t is h_t] dy_t (+ dh_n) + what
// step t+1 sends back to h_t (a skipped step passes g_{t+1} straight through, h_{t+1} = h_t; a
// kept one sends mask * rho (+ (1 - alpha) g_{t+1} for leaky units)); then
// delta_t = alpha g_t act'(a_t) at kept rows, act' recovered from the stored states as in
// leaky_delta (for alpha = 1: 1 - h^2, or h > 0, as the fused gradient epilogue does); and
// prev = h_{t-1} * mask. The choices are per row (Next: 0 no step t+1, 1 kept, 2 skipped) or
// options (template arguments), so each inner loop is straight-line and vectorises.

// The total gradient of h_t at column c.
template <class T, bool Leaky, bool Masked, int Next>
inline T total_grad(const T* dy, const T* dh_n, const T* m, const T* rho, const T* g_next, T leak,
                    index c) {
    T total = dy[c] + dh_n[c];
    if (Next == 1) {
        T back = Masked ? m[c] * rho[c] : rho[c];
        if (Leaky) back += leak * g_next[c];
        total += back;
    } else if (Next == 2) {
        total += g_next[c];
    }
    return total;
}

// act'(a_t) at column c, recovered from the stored states.
template <class T, bool Leaky, bool Tanh>
inline T slope_at(const T* h, const T* h_prev, T alpha, T leak, index c) {
    if (!Leaky) return Tanh ? T(1) - h[c] * h[c] : (h[c] > T(0) ? T(1) : T(0));
    const T kept = leak * h_prev[c];
    if (Tanh) {
        const T a = (h[c] - kept) / alpha;
        return T(1) - a * a;
    }
    return h[c] != kept && h[c] - kept > T(0) ? T(1) : T(0);
}

// One row of the block. g_t is stored only where a step reads it back: step t-1 reads g_t
// where step t is skipped (the pass-through) or for leaky units; a kept row of the plain unit
// needs only its delta.
template <class T, bool Leaky, bool Masked, bool Tanh, int Next>
inline void masked_grad_row(const MaskedGradStep<T>& s, index row, bool kept, index c0, index c1,
                            const T* dy, const T* dh_n, const T* h_prev, const T* h) {
    const T leak = T(1) - s.alpha;
    T* g = s.g + row;
    T* delta = s.delta + row;
    const T* m = Masked ? s.mask + row : nullptr;
    const T* rho = Next == 1 ? s.rho + row : nullptr;
    const T* g_next = Next != 0 ? s.g_next + row : nullptr;
    if (!kept) {
        for (index c = c0; c < c1; ++c)
            g[c] = total_grad<T, Leaky, Masked, Next>(dy, dh_n, m, rho, g_next, leak, c);
        for (index c = c0; c < c1; ++c)
            delta[c] = T(0);
    } else if (Leaky) {
        for (index c = c0; c < c1; ++c) {
            const T total = total_grad<T, Leaky, Masked, Next>(dy, dh_n, m, rho, g_next, leak, c);
            g[c] = total;
            delta[c] = s.alpha * total * slope_at<T, Leaky, Tanh>(h, h_prev, s.alpha, leak, c);
        }
    } else {
        for (index c = c0; c < c1; ++c)
            delta[c] = total_grad<T, Leaky, Masked, Next>(dy, dh_n, m, rho, g_next, leak, c) *
                       slope_at<T, Leaky, Tanh>(h, h_prev, s.alpha, leak, c);
    }
    T* prev = s.prev + row;
    for (index c = c0; c < c1; ++c)
        prev[c] = Masked ? h_prev[c] * m[c] : h_prev[c];
}

template <class T, bool Leaky, bool Masked, bool Tanh>
void masked_grad_rows(const MaskedGradStep<T>& s, index ld, Block b) {
    for (index r = b.m0; r < b.m1; ++r) {
        const index row = r * ld;
        const T* dy = s.dy && s.out_t[r] ? s.dy + row : s.zeros;
        const T* dh_n = s.dh_n ? s.dh_n + row : s.zeros;
        const index source = s.source_prev ? s.source_prev[r] : -1;
        const T* h_prev = source >= 0 ? s.y + (source * s.batch + r) * ld : s.h0 + row;
        const T* h = s.y + (s.t * s.batch + r) * ld;
        const bool kept = s.keep_t[r] != 0;
        if (!s.g_next)
            masked_grad_row<T, Leaky, Masked, Tanh, 0>(s, row, kept, b.c0, b.c1, dy, dh_n, h_prev,
                                                       h);
        else if (s.keep_next[r])
            masked_grad_row<T, Leaky, Masked, Tanh, 1>(s, row, kept, b.c0, b.c1, dy, dh_n, h_prev,
                                                       h);
        else
            masked_grad_row<T, Leaky, Masked, Tanh, 2>(s, row, kept, b.c0, b.c1, dy, dh_n, h_prev,
                                                       h);
    }
}

template <class T, bool Leaky, bool Masked>
void masked_grad_rows_act(const MaskedGradStep<T>& s, index ld, Block b) {
    if (s.act == Activation::tanh)
        masked_grad_rows<T, Leaky, Masked, true>(s, ld, b);
    else
        masked_grad_rows<T, Leaky, Masked, false>(s, ld, b);
}

template <class T>
void masked_grad_step(const MaskedGradStep<T>& s, index ld, Block b) {
    const bool leaky = s.alpha != T(1), masked = s.mask != nullptr;
    if (leaky && masked)
        masked_grad_rows_act<T, true, true>(s, ld, b);
    else if (leaky)
        masked_grad_rows_act<T, true, false>(s, ld, b);
    else if (masked)
        masked_grad_rows_act<T, false, true>(s, ld, b);
    else
        masked_grad_rows_act<T, false, false>(s, ld, b);
}

// dh0 from step 0's gradients (the same rule as the first part of masked_grad_rows).
template <class T>
void state_grad_before(T* dh0, const T* g0, const T* rho, const std::uint8_t* keep0, const T* mask,
                       T alpha, index batch, index ld) {
    for (index r = 0; r < batch; ++r)
        for (index c = 0; c < ld; ++c) {
            const index i = r * ld + c;
            if (keep0[r]) {
                T back = mask ? mask[i] * rho[i] : rho[i];
                if (alpha != T(1)) back += (T(1) - alpha) * g0[i];
                dh0[i] = back;
            } else {
                dh0[i] = g0[i];
            }
        }
}

}  // namespace rnnfast
