// The Elman cell's element-wise passes of the leaky unit, over one thread's share of a (B x H)
// step (a Block: rows [m0, m1) and columns [c0, c1)). They run beside the fused GEMM epilogues
// (which cover the plain unit, alpha = 1) and are O(B*H) per step against the GEMM's O(B*H*H).
#pragma once

#include "rnnfast/runtime/types.hpp"

namespace rnnfast {

// h_t = (1 - alpha) h_{t-1} + alpha a_t, in place over a_t.
template <class T>
void leaky_mix(T* a, const T* h_prev, index ld, Block b, T alpha) {
    const T keep = T(1) - alpha;
    for (index r = b.m0; r < b.m1; ++r)
        for (index c = b.c0; c < b.c1; ++c)
            a[r * ld + c] = keep * h_prev[r * ld + c] + alpha * a[r * ld + c];
}

// g_t += (1 - alpha) g_{t+1}: the state gradient that bypasses the activation.
template <class T>
void add_scaled(T* g, const T* g_next, index ld, Block b, T scale) {
    for (index r = b.m0; r < b.m1; ++r)
        for (index c = b.c0; c < b.c1; ++c)
            g[r * ld + c] += scale * g_next[r * ld + c];
}

// delta_t = alpha g_t act'(a_t), with a_t recovered from the stored outputs as
// (h_t - (1 - alpha) h_{t-1}) / alpha. For relu the question is only whether a_t > 0, and the
// division would turn rounding into a random sign; instead a_t == 0 exactly when the forward
// stored h_t = fl((1 - alpha) h_{t-1}), which this recomputes bit for bit.
template <class T>
void leaky_delta(T* delta, const T* g, const T* h, const T* h_prev, index ld, Block b, T alpha,
                 Activation act) {
    const T keep = T(1) - alpha;
    for (index r = b.m0; r < b.m1; ++r)
        for (index c = b.c0; c < b.c1; ++c) {
            const index i = r * ld + c;
            const T kept = keep * h_prev[i];
            T slope;
            if (act == Activation::tanh) {
                const T a = (h[i] - kept) / alpha;
                slope = T(1) - a * a;
            } else {
                slope = h[i] != kept && h[i] - kept > T(0) ? T(1) : T(0);
            }
            delta[i] = alpha * g[i] * slope;
        }
}

}  // namespace rnnfast
