// Softmax cross-entropy over the rows of a (rows x classes) matrix, with its gradient, in one
// pass per row. No Python here.
#pragma once

#include <cstdint>

#include "rnnfast/runtime/types.hpp"

namespace rnnfast {

// For each row r with weight w[r] (0 leaves the row out: its gradient is 0 and its target
// is not read): grad[r] = w[r] * (softmax(logits[r]) - onehot(targets[r])), and the result is
// sum over rows of w[r] * -log softmax(logits[r])[targets[r]], summed in row order (so it does
// not depend on the thread count). Targets of weighted rows must lie in [0, classes).
template <class T>
double softmax_cross_entropy(const T* logits, index rows, index classes,
                             const std::int64_t* targets, const T* weights, T* grad);

}  // namespace rnnfast
