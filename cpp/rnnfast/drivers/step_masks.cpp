#include "step_masks.hpp"

#include "rnn.hpp"

namespace rnnfast {

std::vector<index> active_rows(const index* lengths, index steps, index batch) {
    std::vector<index> active(static_cast<size_t>(steps + 1), lengths ? 0 : batch);
    active[static_cast<size_t>(steps)] = 0;
    if (lengths)
        for (index b = 0; b < batch; ++b)
            for (index t = 0; t < lengths[b]; ++t)
                ++active[static_cast<size_t>(t)];
    return active;
}

StepMasks step_masks(const std::uint8_t* keep, const index* lengths, bool zero_output_for_mask,
                     index steps, index batch) {
    StepMasks m;
    const size_t n = static_cast<size_t>(steps * batch);
    m.keep.resize(n);
    m.out.resize(n);
    for (index b = 0; b < batch; ++b) {
        const index length = lengths ? lengths[b] : steps;
        bool seen = false;  // a kept step so far: from then on the carried output is the state
        for (index t = 0; t < steps; ++t) {
            const size_t i = static_cast<size_t>(t * batch + b);
            const bool k = t < length && (keep == nullptr || keep[i] != 0);
            seen = seen || k;
            m.keep[i] = k ? 1 : 0;
            m.out[i] = (zero_output_for_mask ? k : seen && t < length) ? 1 : 0;
        }
    }
    return m;
}

std::vector<index> state_sources(const StepMasks& masks, index steps, index batch) {
    std::vector<index> source(static_cast<size_t>(steps * batch));
    for (index b = 0; b < batch; ++b) {
        index s = -1;
        for (index t = 0; t < steps; ++t) {
            const size_t i = static_cast<size_t>(t * batch + b);
            if (masks.out[i]) s = t;
            source[i] = s;
        }
    }
    return source;
}

}  // namespace rnnfast
