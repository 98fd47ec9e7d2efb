// The Elman cell as a policy of the drivers' passes (drivers/time_loop.hpp says how a cell plugs
// in):
//   h_t = (1 - alpha) h_{t-1} + alpha act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)
// Its pieces: the leaky unit's element-wise passes (elman_leaky.hpp) and the backward step under
// step masks and recurrent dropout (elman_masked.hpp). Everything is static and inline: a pass
// calls it on its block inside the step loop, at no cost over writing it in place.
#pragma once

#include <cstdint>

#include "elman_leaky.hpp"
#include "elman_masked.hpp"
#include "rnnfast/runtime/types.hpp"

namespace rnnfast {

template <class T>
struct ElmanCell {
    static constexpr int kStates = 1;       // h
    static constexpr int kGates = 1;        // one pre-activation per hidden unit
    static constexpr int kStepGemms = 1;    // h_{t-1} W_hh^T, onto the projected input
    static constexpr int kStoredSteps = 0;  // (B, kGates * H) slots per step beyond y: none, act'
                                            // is recovered from h_t
    // Columns of the step's product.
    static index columns(index hidden) { return kGates * hidden; }

    // Forward: the step's product applies the activation in its epilogue (fused, in registers);
    // the leaky unit then mixes h_{t-1} in over the member's block.
    static Epilogue step_epilogue(Activation act) { return forward_epilogue(act); }
    static void finish_step(T* h, const T* h_prev, index ld, Block own, T alpha) {
        if (alpha != T(1)) leaky_mix(h, h_prev, ld, own, alpha);
    }

    // Backward (plain driver): for the plain unit the product's fused epilogue turns the state
    // gradient into delta (act' from the stored h_t); a leaky unit keeps the state gradient g_t
    // (it reaches h_{t-1} directly too) and forms delta from it apart.
    static Epilogue gradient_step_epilogue(Activation act, T alpha) {
        return alpha != T(1) ? Epilogue::none : gradient_epilogue(act);
    }
    // g_t += (1 - alpha) g_{t+1}: what step t + 1 sends back to h_t past its activation.
    static void carry_state_grad(T* g, const T* g_next, index ld, Block own, T alpha) {
        add_scaled(g, g_next, ld, own, T(1) - alpha);
    }
    // delta_t = alpha g_t act'(a_t), act' recovered from h_t and h_{t-1}.
    static void delta_from_state_grad(T* delta, const T* g, const T* h, const T* h_prev, index ld,
                                      Block own, T alpha, Activation act) {
        leaky_delta(delta, g, h, h_prev, ld, own, alpha, act);
    }

    // Backward (masked driver): the whole step's element-wise part, see MaskedGradStep.
    static void masked_backward_step(const MaskedGradStep<T>& s, index ld, Block own) {
        masked_grad_step(s, ld, own);
    }
    // dh0 from step 0's gradients, by the same rule (after the walk, on the whole batch).
    static void masked_initial_state_grad(T* dh0, const T* g0, const T* rho,
                                          const std::uint8_t* keep0, const T* mask, T alpha,
                                          index batch, index ld) {
        state_grad_before(dh0, g0, rho, keep0, mask, alpha, batch, ld);
    }
};

}  // namespace rnnfast
