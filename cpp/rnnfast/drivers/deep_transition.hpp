// Forward and backward (BPTT) of one deep-transition layer, one direction, over a whole
// sequence (Pascanu et al., ICLR 2014, "deep transition"): an MLP of k layers inside the step,
//   z_1 = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh),  z_i = act(W_i z_{i-1} + b_i) (i = 2..k),
//   h_t = z_k.
// k = 1 is the Elman layer (rnn.hpp); the callers run that one on the Elman drivers. Every
// step runs its k products inside the time loop (time_loop.hpp), the i-th after a barrier
// (it reads every unit of z_{i-1}); the input projection is one GEMM over all steps. The
// backward walks the steps back through the k layers, keeps every layer's delta, and forms the
// weight and input gradients as large GEMMs after the walk. All arrays are dense row-major;
// the callers (bindings) have checked every shape.
#pragma once

#include "rnnfast/runtime/types.hpp"

namespace rnnfast {

template <class T>
struct DeepForwardArgs {
    index steps = 0, batch = 0, input_size = 0, hidden_size = 0;
    index layers = 2;                // k >= 2: the transition's layers, the first included
    const T* x = nullptr;            // (T, B, D)
    const T* h0 = nullptr;           // (B, H), null means zeros
    const T* w_ih = nullptr;         // (H, D)
    const T* w_hh = nullptr;         // (H, H)
    const T* b_ih = nullptr;         // (H) or null
    const T* b_hh = nullptr;         // (H) or null
    const T* w_tr = nullptr;         // (k - 1, H, H): W_2 .. W_k
    const T* b_tr = nullptr;         // (k - 1, H) or null
    const index* lengths = nullptr;  // (B) non-increasing, each in [0, T], or null (all T)
    Activation act = Activation::tanh;
    T* y = nullptr;          // (T, B, H): every h_t (padded steps zero)
    T* h_n = nullptr;        // (B, H)
    T* workspace = nullptr;  // (k - 1, T, B, H): z_1 .. z_{k-1} of every step (padded zero)
};

template <class T>
struct DeepBackwardArgs {
    index steps = 0, batch = 0, input_size = 0, hidden_size = 0, layers = 2;
    const T* x = nullptr;  // as given to the forward
    const T* h0 = nullptr;
    const T* w_ih = nullptr;
    const T* w_hh = nullptr;
    const T* w_tr = nullptr;
    const index* lengths = nullptr;
    Activation act = Activation::tanh;
    const T* y = nullptr;          // (T, B, H): the forward's
    const T* workspace = nullptr;  // (k - 1, T, B, H): the forward's
    const T* dy = nullptr;         // (T, B, H) or null
    const T* dh_n = nullptr;       // (B, H) or null
    T* dx = nullptr;               // (T, B, D) or null: not computed
    T* dh0 = nullptr;              // (B, H)
    T* dw_ih = nullptr;            // (H, D)
    T* dw_hh = nullptr;            // (H, H)
    T* db = nullptr;               // (H): the gradient of b_ih and of b_hh alike
    T* dw_tr = nullptr;            // (k - 1, H, H)
    T* db_tr = nullptr;            // (k - 1, H)
};

template <class T>
void deep_forward(const DeepForwardArgs<T>& args);

template <class T>
void deep_backward(const DeepBackwardArgs<T>& args);

}  // namespace rnnfast
