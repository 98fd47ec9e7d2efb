// Forward and backward (BPTT) of one Elman layer, one direction, over a whole sequence:
//   h_t = (1 - alpha) h_{t-1} + alpha act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)
// (alpha = 1, the plain unit, runs fully fused; leaky units add element-wise passes).
// All arrays are dense row-major; the callers (bindings) have checked every shape.
#pragma once

#include <cstdint>
#include <vector>

#include "rnnfast/runtime/kernel_table.hpp"
#include "rnnfast/runtime/types.hpp"
#include "rnnfast/runtime/weight_cache.hpp"

namespace rnnfast {

// Token input, for an Embedding that feeds the layer: with `ids` set, x is the embedding
// table (vocab, D) and step t of sequence b reads its row ids[t * B + b] (each in [0, vocab)).
// The input projection of a row depends only on its id, so the forward projects the table
// once (vocab x D x H instead of T x B x D x H) and gathers; the backward sums the deltas per
// id (a scatter) and needs two vocab-sized GEMMs in place of two (T*B)-sized ones. Worth it
// when vocab < T * B.

template <class T>
struct ForwardArgs {
    index steps = 0, batch = 0, input_size = 0, hidden_size = 0;
    const T* x = nullptr;               // (T, B, D), or the table (vocab, D) with ids
    const std::int64_t* ids = nullptr;  // (T, B) or null
    index vocab = 0;
    const T* h0 = nullptr;               // (B, H), null means zeros
    const T* w_ih = nullptr;             // (H, D)
    const T* w_hh = nullptr;             // (H, H)
    const T* b_ih = nullptr;             // (H) or null
    const T* b_hh = nullptr;             // (H) or null
    const index* lengths = nullptr;      // (B) non-increasing, each in [0, T], or null (all T)
    const std::uint8_t* keep = nullptr;  // (T, B) 0/1 or null: the general step mask (below)
    bool zero_output_for_mask = false;   // a step the mask skips outputs zeros, not y_{t-1}
    const T* recurrent_mask = nullptr;   // (B, H) or null: W_hh reads h_{t-1} * mask (below)
    Activation act = Activation::tanh;
    T alpha = T(1);                // leak rate: h_t = (1 - alpha) h_{t-1} + alpha act(...)
    T* y = nullptr;                // (T, B, H) every h_t; null keeps only h_T in O(B*H) memory
    T* h_n = nullptr;              // (B, H)
    WeightCache* cache = nullptr;  // the layer's packed weights between calls, or null
};

template <class T>
struct BackwardArgs {
    index steps = 0, batch = 0, input_size = 0, hidden_size = 0;
    const T* x = nullptr;               // (T, B, D), or the table (vocab, D) with ids
    const std::int64_t* ids = nullptr;  // (T, B) or null, as given to the forward
    index vocab = 0;
    const T* h0 = nullptr;               // (B, H), null means zeros
    const T* w_ih = nullptr;             // (H, D)
    const T* w_hh = nullptr;             // (H, H)
    const index* lengths = nullptr;      // as given to the forward
    const std::uint8_t* keep = nullptr;  // as given to the forward
    bool zero_output_for_mask = false;   // as given to the forward
    const T* recurrent_mask = nullptr;   // as given to the forward
    Activation act = Activation::tanh;
    T alpha = T(1);                // leak rate, as given to the forward
    const T* y = nullptr;          // (T, B, H), the forward's outputs
    const T* dy = nullptr;         // (T, B, H) or null
    const T* dh_n = nullptr;       // (B, H) or null
    T* dx = nullptr;               // (T, B, D), or the table's gradient (vocab, D) with ids; or
                                   // null: not computed (an input that needs no gradient)
    T* dh0 = nullptr;              // (B, H)
    T* dw_ih = nullptr;            // (H, D)
    T* dw_hh = nullptr;            // (H, H)
    T* db = nullptr;               // (H): the gradient of b_ih and of b_hh alike
    WeightCache* cache = nullptr;  // the layer's packed weights between calls, or null
};

// General masks (Keras's): where keep[t * B + b] is 0, step t of sequence b is skipped: its
// state carries through (h_t = h_{t-1}) and its output is its previous output (zeros before
// its first kept step, as Keras's initial output), or zeros with zero_output_for_mask. Lengths
// combine with it: steps past a sequence's length are skipped too and always output zeros.
// Recurrent dropout (Keras's recurrent_dropout, variational): the pre-activation reads
// W_hh (h_{t-1} * recurrent_mask), one (B, H) mask for every step. Either one runs the masked
// drivers: every row at every step, with a per-row select in the step's epilogue.

// One time step, for streaming: h_next = (1 - alpha) h + alpha act(W_ih x_t + W_hh h + bias).
// Nothing is packed or allocated: the weights are read as stored, on one thread.
// Whether one step of `batch` rows runs as a forward of one step (packed GEMMs, W read once)
// rather than streaming W once per row (dot products along its rows, nothing packed): from 4
// rows, and always where the products round their operands (each row would round all of W).
template <class T>
bool step_runs_as_forward(const KernelTable<T>& kt, index batch) {
    return batch >= 4 || kt.rounds_operands;
}

template <class T>
struct StepArgs {
    index batch = 0, input_size = 0, hidden_size = 0;
    const T* x = nullptr;     // (B, D)
    const T* h = nullptr;     // (B, H)
    const T* w_ih = nullptr;  // (H, D)
    const T* w_hh = nullptr;  // (H, H)
    const T* b_ih = nullptr;  // (H) or null
    const T* b_hh = nullptr;  // (H) or null
    Activation act = Activation::tanh;
    T alpha = T(1);
    T* h_next = nullptr;  // (B, H)
};

// Variable lengths: sequences sorted by length, longest first, so that the sequences still
// running at step t are rows [0, active[t]) and every step is one dense GEMM over them; padded
// steps output zeros and h_n is each sequence's state after its own last step.
// active[t] = number of sequences longer than t, for t in [0, T]; active[T] = 0.
std::vector<index> active_rows(const index* lengths, index steps, index batch);

template <class T>
void rnn_forward(const ForwardArgs<T>& args);

template <class T>
void rnn_step(const StepArgs<T>& args);

template <class T>
void rnn_backward(const BackwardArgs<T>& args);

}  // namespace rnnfast
