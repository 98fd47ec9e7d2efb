// Element-wise passes of the masked drivers (general step masks, recurrent dropout), over one
// thread's share of a (B x H) step, as in elementwise.hpp. They run after the step's GEMM on
// the block the thread just computed, so they need no barrier of their own, and are O(B*H)
// per step against the GEMM's O(B*H*H).
#pragma once

#include <cstdint>
#include <cstring>

#include "elementwise.hpp"
#include "types.hpp"

namespace rnnfast {

// Forward: a skipped row keeps its state, h_t = h_{t-1} (the GEMM computed it anyway: the
// step is one dense GEMM over every row, and the select is cheaper than compacting rows).
template <class T>
void carry_skipped_rows(T* h, const T* h_prev, const std::uint8_t* keep_t, index ld, Block b) {
    for (index r = b.m0; r < b.m1; ++r)
        if (!keep_t[r])
            std::memcpy(h + r * ld + b.c0, h_prev + r * ld + b.c0,
                        sizeof(T) * static_cast<size_t>(b.c1 - b.c0));
}

// out = h * mask: the state as the next step's W_hh product reads it under recurrent dropout.
template <class T>
void apply_recurrent_mask(T* out, const T* h, const T* mask, index ld, Block b) {
    for (index r = b.m0; r < b.m1; ++r)
        for (index c = b.c0; c < b.c1; ++c) out[r * ld + c] = h[r * ld + c] * mask[r * ld + c];
}

// Backward: the direct gradient of h_t, g = dy_t where y_t is the state (zero elsewhere),
// plus dh_n (null except at the last step: h_n is the state after the last step).
template <class T>
void direct_state_grad(T* g, const T* dy_t, const std::uint8_t* out_t, const T* dh_n, index ld,
                       Block b) {
    for (index r = b.m0; r < b.m1; ++r) {
        T* row = g + r * ld;
        if (dy_t && out_t[r])
            std::memcpy(row + b.c0, dy_t + r * ld + b.c0, sizeof(T) * static_cast<size_t>(b.c1 - b.c0));
        else
            std::memset(row + b.c0, 0, sizeof(T) * static_cast<size_t>(b.c1 - b.c0));
        if (dh_n)
            for (index c = b.c0; c < b.c1; ++c) row[c] += dh_n[r * ld + c];
    }
}

// prev = h_{t-1}, each row read from the y row that holds it (source >= 0) or from h0 (a
// negative source, or every row when source is null: the state before step 0).
template <class T>
void gather_states(T* prev, const T* y, const index* source, const T* h0, index batch, index ld,
                   Block b) {
    for (index r = b.m0; r < b.m1; ++r) {
        const index from_step = source ? source[r] : -1;
        const T* from = from_step >= 0 ? y + (from_step * batch + r) * ld : h0 + r * ld;
        std::memcpy(prev + r * ld + b.c0, from + b.c0, sizeof(T) * static_cast<size_t>(b.c1 - b.c0));
    }
}

// What one backward step of the masked driver needs, for its block.
template <class T>
struct MaskedGradStep {
    T* g;                         // in: the direct gradient of h_t; out: its total gradient
    T* delta;                     // out: the pre-activation's gradient (zero where skipped)
    T* prev;                      // in: h_{t-1}; out: what W_hh read, h_{t-1} * mask
    const T* h;                   // y_t, the state at kept rows
    const std::uint8_t* keep_t;   // (B)
    // From step t + 1 (all null at the last step): rho = delta_{t+1} W_hh, g_{t+1}, keep.
    const T* rho;
    const T* g_next;
    const std::uint8_t* keep_next;
    const T* mask;                // (B, H) recurrent mask or null
    T alpha;
    Activation act;
};

// g_t += what step t+1 sends back to h_t: a skipped step passes g_{t+1} straight through
// (h_{t+1} = h_t); a kept one sends mask * rho (+ (1 - alpha) g_{t+1} for leaky units). Then
// delta_t = alpha g_t act'(a_t) at kept rows, with act' recovered from the stored states as in
// leaky_delta (for alpha = 1: 1 - h^2, or h > 0, as the fused gradient epilogue does).
template <class T>
void masked_grad_step(const MaskedGradStep<T>& s, index ld, Block b) {
    const T keep_share = T(1) - s.alpha;
    const bool leaky = s.alpha != T(1);
    for (index r = b.m0; r < b.m1; ++r) {
        const bool next_kept = s.keep_next && s.keep_next[r];
        for (index c = b.c0; c < b.c1; ++c) {
            const index i = r * ld + c;
            if (s.g_next) {
                if (next_kept) {
                    T back = s.mask ? s.mask[i] * s.rho[i] : s.rho[i];
                    if (leaky) back += keep_share * s.g_next[i];
                    s.g[i] += back;
                } else {
                    s.g[i] += s.g_next[i];
                }
            }
        }
        if (s.keep_t[r]) {
            for (index c = b.c0; c < b.c1; ++c) {
                const index i = r * ld + c;
                T slope;
                if (!leaky) {
                    slope = s.act == Activation::tanh ? T(1) - s.h[i] * s.h[i]
                                                      : (s.h[i] > T(0) ? T(1) : T(0));
                } else {
                    const T kept = keep_share * s.prev[i];
                    if (s.act == Activation::tanh) {
                        const T a = (s.h[i] - kept) / s.alpha;
                        slope = T(1) - a * a;
                    } else {
                        slope = s.h[i] != kept && s.h[i] - kept > T(0) ? T(1) : T(0);
                    }
                }
                s.delta[i] = leaky ? s.alpha * s.g[i] * slope : s.g[i] * slope;
            }
        } else {
            std::memset(s.delta + r * ld + b.c0, 0, sizeof(T) * static_cast<size_t>(b.c1 - b.c0));
        }
        if (s.mask)
            for (index c = b.c0; c < b.c1; ++c) s.prev[r * ld + c] *= s.mask[r * ld + c];
    }
}

// dh0 from step 0's gradients (the same rule as masked_grad_step's first half).
template <class T>
void state_grad_before(T* dh0, const T* g0, const T* rho, const std::uint8_t* keep0,
                       const T* mask, T alpha, index batch, index ld) {
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
