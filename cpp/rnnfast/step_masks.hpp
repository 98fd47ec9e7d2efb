// Which steps of each sequence run and which outputs hold its state, under a general keep mask
// and lengths (see rnn.hpp): the tables the masked forward and backward drivers select by.
#pragma once

#include <cstdint>
#include <vector>

#include "types.hpp"

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

}  // namespace rnnfast
