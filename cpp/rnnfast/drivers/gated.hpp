// Forward and backward (BPTT) of one gated layer (GRU or LSTM), one direction, over a whole
// sequence, on the drivers' one time loop (time_loop.hpp); the cells' equations are in
// cells/gru.hpp and cells/lstm.hpp. All arrays are dense row-major, weights in PyTorch's layout
// and gate order (GRU r, z, n; LSTM i, f, g, o); the callers (bindings) have checked every shape.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "rnnfast/cells/gated_cells.hpp"
#include "rnnfast/runtime/types.hpp"
#include "rnnfast/runtime/weight_cache.hpp"

namespace rnnfast {

template <class T>
struct GatedForwardArgs {
    GatedCell cell{};
    index steps = 0, batch = 0, input_size = 0, hidden_size = 0;
    index proj_size = 0;                // LSTM only: P > 0 projects h_t to P values (R = P)
    const T* x = nullptr;               // (T, B, D), or the table (vocab, D) with ids
    const std::int64_t* ids = nullptr;  // (T, B) or null: token input (rnn.hpp's)
    index vocab = 0;
    const T* h0 = nullptr;               // (B, R), null means zeros (R = P or H)
    const T* c0 = nullptr;               // (B, H), LSTM only; null means zeros
    const T* w_ih = nullptr;             // (G*H, D)
    const T* w_hh = nullptr;             // (G*H, R)
    const T* b_ih = nullptr;             // (G*H) or null
    const T* b_hh = nullptr;             // (G*H) or null
    const T* w_hr = nullptr;             // (P, H) with proj_size
    const T* cell_params = nullptr;      // (kParams * H): the cell's own (layer_norm_lstm's norms)
    const index* lengths = nullptr;      // (B) non-increasing, each in [0, T], or null
    const std::uint8_t* keep = nullptr;  // (T, B) 0/1 or null: Keras's general mask (below)
    bool zero_output_for_mask = false;   // a skipped step outputs zeros, not y_{t-1}
    const T* recurrent_mask = nullptr;   // (G, B, R) or null: recurrent dropout (below)
    const T* input_mask = nullptr;       // (G, B, D) or null: input dropout per gate (below)
    Pointwise act = Pointwise::tanh;     // of n (GRU), of g and c (LSTM)
    Pointwise rec = Pointwise::sigmoid;  // of the gates
    T* y = nullptr;          // (T, B, R) every h_t (padded steps zero); null keeps O(B*H) memory
    T* h_n = nullptr;        // (B, R)
    T* c_n = nullptr;        // (B, H), LSTM only
    T* workspace = nullptr;  // (T, B, workspace_width) for the backward, or null (needs y)
    WeightCache* cache = nullptr;  // the layer's packed weights between calls, or null
};

// General masks (Keras's), as the Elman drivers take them (rnn.hpp): where keep[t * B + b] is 0,
// step t of sequence b is skipped: its states carry through (h_t = h_{t-1}, c_t = c_{t-1}) and
// its output is its previous output (zeros before its first kept step), or zeros with
// zero_output_for_mask. Lengths combine with it; past a sequence's length the output is zeros.
// Masked, every row runs every step (a per-row select after the cell's epilogue).
// Recurrent dropout (Keras 3's, per gate): gate g's recurrent product reads h_{t-1} *
// recurrent_mask[g] (one (B, R) mask per gate in PyTorch's gate order, the same at every step;
// reset_before: n reads r * (h_{t-1} * mask[n])); the state update and c are not masked. The
// step then runs one product per gate, each on its own masked copy of h_{t-1}. Input dropout
// likewise (Keras 3's `dropout` on a gated cell): gate g's input projection reads x_t *
// input_mask[g], one (B, D) mask per gate, so the projection runs one GEMM per gate.

template <class T>
struct GatedBackwardArgs {
    GatedCell cell{};
    index steps = 0, batch = 0, input_size = 0, hidden_size = 0, proj_size = 0;
    const T* x = nullptr;               // as given to the forward
    const std::int64_t* ids = nullptr;  // as given to the forward
    index vocab = 0;
    const T* h0 = nullptr;  // as given to the forward
    const T* c0 = nullptr;  // as given to the forward
    const T* w_ih = nullptr;
    const T* w_hh = nullptr;
    const T* w_hr = nullptr;
    const T* cell_params = nullptr;  // as given to the forward
    const index* lengths = nullptr;
    const std::uint8_t* keep = nullptr;  // as given to the forward
    bool zero_output_for_mask = false;   // as given to the forward
    const T* recurrent_mask = nullptr;   // as given to the forward
    const T* input_mask = nullptr;       // as given to the forward
    Pointwise act = Pointwise::tanh;
    Pointwise rec = Pointwise::sigmoid;
    const T* y = nullptr;          // (T, B, R): the forward's outputs
    const T* workspace = nullptr;  // (T, B, workspace_width): the forward's
    const T* dy = nullptr;         // (T, B, R) or null
    const T* dh_n = nullptr;       // (B, R) or null
    const T* dc_n = nullptr;       // (B, H) or null, LSTM only
    T* dx = nullptr;               // (T, B, D), the table's (vocab, D) with ids; or null
    T* dh0 = nullptr;              // (B, R)
    T* dc0 = nullptr;              // (B, H), LSTM only
    T* dw_ih = nullptr;            // (G*H, D)
    T* dw_hh = nullptr;            // (G*H, R)
    T* db_ih = nullptr;            // (G*H)
    T* db_hh = nullptr;            // (G*H)
    T* dw_hr = nullptr;            // (P, H) with proj_size
    T* dcell_params = nullptr;     // (kParams * H) with cell_params
    WeightCache* cache = nullptr;  // the layer's packed weights between calls, or null
};

// One time step, for streaming: the state after x_t from (h, c). Nothing is packed, the weights
// are read as stored, on one thread, as rnn_step does.
template <class T>
struct GatedStepArgs {
    GatedCell cell{};
    index batch = 0, input_size = 0, hidden_size = 0, proj_size = 0;
    const T* x = nullptr;            // (B, D)
    const T* h = nullptr;            // (B, R)
    const T* c = nullptr;            // (B, H), LSTM only
    const T* w_ih = nullptr;         // (G*H, D)
    const T* w_hh = nullptr;         // (G*H, R)
    const T* b_ih = nullptr;         // (G*H) or null
    const T* b_hh = nullptr;         // (G*H) or null
    const T* w_hr = nullptr;         // (P, H) with proj_size
    const T* cell_params = nullptr;  // (kParams * H), as the forward's
    Pointwise act = Pointwise::tanh;
    Pointwise rec = Pointwise::sigmoid;
    T* h_next = nullptr;  // (B, R)
    T* c_next = nullptr;  // (B, H), LSTM only
};

template <class T>
void gated_forward(const GatedForwardArgs<T>& args);

// The sizes of one gated layer, read from its arguments: B, D, H, P (0 without a projection),
// R (the state's width: P or H) and GH (the projection's columns, gates * H).
struct GatedSizes {
    index B, D, H, P, R, GH;
    template <class Args>
    GatedSizes(const Args& a, int gates)
        : B(a.batch),
          D(a.input_size),
          H(a.hidden_size),
          P(a.proj_size),
          R(a.proj_size > 0 ? a.proj_size : a.hidden_size),
          GH(gates * a.hidden_size) {}
};

// The bias the input projection adds, in PyTorch's order (G*H; empty without biases): b_ih plus
// b_hh wherever b_hh adds to the pre-activation, everywhere but inside the reset gate's product
// (Cell::kInnerBias: the recurrent product adds b_hn). The quantized forward shares it.
template <class Cell, class T>
std::vector<T> projection_bias(const GatedForwardArgs<T>& a) {
    if (!a.b_ih && !a.b_hh) return {};
    const index H = a.hidden_size, GH = Cell::kGates * H;
    std::vector<T> sum(static_cast<size_t>(GH), T(0));
    for (index c = 0; c < GH; ++c) {
        const bool inside_reset = Cell::kInnerBias && c >= 2 * H;
        sum[c] = (a.b_ih ? a.b_ih[c] : T(0)) + (a.b_hh && !inside_reset ? a.b_hh[c] : T(0));
    }
    return sum;
}

// The bias the recurrent product adds, in PyTorch's order (G*H; empty where there is none):
// b_hn alone, of a Cell::kInnerBias cell with b_hh, inside r * (W_hn h + b_hn).
template <class Cell, class T>
std::vector<T> recurrent_bias(const GatedForwardArgs<T>& a) {
    if (!Cell::kInnerBias || !a.b_hh) return {};
    const index H = a.hidden_size;
    std::vector<T> inner(static_cast<size_t>(Cell::kGates * H), T(0));
    std::copy(a.b_hh + 2 * H, a.b_hh + 3 * H, inner.begin() + 2 * H);
    return inner;
}

// The initial states of a forward (zeros where the caller gave none), already written to h_n
// and c_n: the final states of sequences of length 0 (the others overwrite theirs when they
// end). The quantized forward shares it.
template <class T>
struct GatedStart {
    std::vector<T> zeros;
    const T* h0 = nullptr;
    const T* c0 = nullptr;
};
template <class Cell, class T>
GatedStart<T> start_states(const GatedForwardArgs<T>& a) {
    if (cell_params<Cell>() > 0 && !a.cell_params)
        throw std::invalid_argument("cell_params: expected the cell's parameters, got none");
    const index B = a.batch, H = a.hidden_size;
    const index R = a.proj_size > 0 ? a.proj_size : H;
    constexpr bool two = Cell::kStates == 2;
    GatedStart<T> s;
    if (!a.h0 || (two && !a.c0)) s.zeros.assign(static_cast<size_t>(B * std::max(R, H)), T(0));
    s.h0 = a.h0 ? a.h0 : s.zeros.data();
    s.c0 = a.c0 ? a.c0 : s.zeros.data();
    if (B * R > 0) std::memcpy(a.h_n, s.h0, sizeof(T) * static_cast<size_t>(B * R));
    if (two && B * H > 0) std::memcpy(a.c_n, s.c0, sizeof(T) * static_cast<size_t>(B * H));
    return s;
}

template <class T>
void gated_step(const GatedStepArgs<T>& args);

template <class T>
void gated_backward(const GatedBackwardArgs<T>& args);

}  // namespace rnnfast
