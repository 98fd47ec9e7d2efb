// Which steps of each sequence run and which outputs hold its state, under a general keep mask
// and lengths (see rnn.hpp): the tables the masked forward and backward drivers select by; and
// the forward's element-wise passes for them, over one thread's block of a step.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "rnn.hpp"
#include "rnnfast/runtime/types.hpp"

namespace rnnfast {

struct StepMasks {
    // (T, B): step t of sequence b updates its state (the keep mask and t < lengths[b]).
    std::vector<std::uint8_t> keep;
    // (T, B): y_t of sequence b is its state h_t; elsewhere y_t is zeros. With the previous
    // output carried (Keras's default), a sequence's outputs from its first kept step on are
    // its states (a skipped step repeats y_{t-1} = h_{t-1} = h_t); before it they are zeros.
    // With zero_output_for_mask, only kept steps output their state. Past its length, zeros.
    std::vector<std::uint8_t> out;
};

// keep and lengths may be null (all kept; all of length T).
StepMasks step_masks(const std::uint8_t* keep, const index* lengths, bool zero_output_for_mask,
                     index steps, index batch);

// For the backward, which has y but not the states: source[t * B + b] is the step whose y row
// holds sequence b's state h_t (the last s <= t with out[s] set), or -1 where that state is
// still h0 (no kept step yet). A kept step's output is its state, so no kept step lies between.
std::vector<index> state_sources(const StepMasks& masks, index steps, index batch);

// Forward: a skipped row keeps its state, h_t = h_{t-1} (the GEMM computed it anyway: the
// step is one dense GEMM over every row, and the select is cheaper than compacting rows).
// A forward's outputs y (steps, B, width) once steps [t0, t1) have run: the rows past the
// running ones (active[t], padded steps) become zeros, and under a general mask (masks not
// null: every step has run) the outputs that are not the state.
template <class T>
void finish_outputs(T* y, const index* active, index t0, index t1, index B, index width,
                    const StepMasks* masks, index steps) {
    for (index t = t0; t < t1; ++t)
        std::memset(y + (t * B + active[t]) * width, 0,
                    sizeof(T) * static_cast<size_t>((B - active[t]) * width));
    if (masks)
        for (index i = 0; i < steps * B; ++i)
            if (!masks->out[static_cast<size_t>(i)])
                std::memset(y + i * width, 0, sizeof(T) * static_cast<size_t>(width));
}

// The rows a forward pass runs. Masked (a general mask, or the Elman cell's recurrent dropout):
// every row at every step, by the mask's tables with the lengths folded in (a skipped row is
// selected back to its state after the cell's epilogue); else the running rows of each step
// (lengths sorted longest first).
struct ForwardRows {
    bool masked;
    StepMasks masks;
    std::vector<index> active;

    ForwardRows(bool masked_rows, const std::uint8_t* keep, const index* lengths,
                bool zero_output_for_mask, index steps, index batch)
        : masked(masked_rows) {
        if (masked) masks = step_masks(keep, lengths, zero_output_for_mask, steps, batch);
        active = active_rows(masked ? nullptr : lengths, steps, batch);
    }
    const std::uint8_t* keep() const { return masked ? masks.keep.data() : nullptr; }
    // After a region: finish_outputs of its steps [t0, t1) where the pass keeps every output in
    // y (else y is null: nothing to do). A region per chunk gives t0 the chunk's first step;
    // one region for all chunks, 0. Masked, y held every state for the recurrence, and the
    // pass's one chunk holds all steps.
    template <class T>
    void finish(T* y, index t0, index t1, index batch, index width, index steps) const {
        if (y == nullptr) return;
        finish_outputs(y, active.data(), t0, t1, batch, width, masked ? &masks : nullptr, steps);
    }
};

// The state before the first step, already written to h_n (the final state of a sequence of
// length 0; the others overwrite theirs when they end): h0, or zeros (kept in `zeros`).
template <class T>
const T* start_state(const T* h0, T* h_n, index size, std::vector<T>& zeros) {
    if (h0 == nullptr) {
        zeros.assign(static_cast<size_t>(size), T(0));
        h0 = zeros.data();
    }
    if (size > 0) std::memcpy(h_n, h0, sizeof(T) * static_cast<size_t>(size));
    return h0;
}

template <class T>
void carry_skipped_rows(T* h, const T* h_prev, const std::uint8_t* keep_t, index ld, Block b) {
    for (index r = b.m0; r < b.m1; ++r)
        if (!keep_t[r])
            std::memcpy(h + r * ld + b.c0, h_prev + r * ld + b.c0,
                        sizeof(T) * static_cast<size_t>(b.c1 - b.c0));
}

// out = h * mask: h_{t-1} as the step's W_hh product reads it under recurrent dropout.
template <class T>
void apply_recurrent_mask(T* out, const T* h, const T* mask, index ld, Block b) {
    for (index r = b.m0; r < b.m1; ++r)
        for (index c = b.c0; c < b.c1; ++c)
            out[r * ld + c] = h[r * ld + c] * mask[r * ld + c];
}

// out = x * mask at every step of a (steps, batch, width) sequence, one (batch, width) mask
// shared by every step (a dropout mask, as the gated cells' per-gate ones).
template <class T>
void mask_every_step(T* out, const T* x, const T* mask, index steps, index batch, index width) {
    for (index t = 0; t < steps; ++t)
        apply_recurrent_mask(out + t * batch * width, x + t * batch * width, mask, width,
                             Block{0, batch, 0, width});
}

}  // namespace rnnfast
