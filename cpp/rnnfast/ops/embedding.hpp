// The embedding table's gradient: rows of the output gradient added into the rows of their ids.
#pragma once

#include <cstdint>

#include "rnnfast/runtime/types.hpp"

namespace rnnfast {

// grad[ids[i], :] += rows[i, :] for i in order (ids in [0, table rows), checked by the caller),
// rows (n x dim), grad (table rows x dim). Threads take disjoint column ranges, so each
// element's sum runs in the order of i whatever the thread count.
template <class T>
void embedding_backward(const std::int64_t* ids, index n, const T* rows, index dim, T* grad);

// The same for columns [c0, c1) only: one member's part, from inside a parallel region.
template <class T>
void embedding_backward_columns(const std::int64_t* ids, index n, const T* rows, index dim, T* grad,
                                index c0, index c1);

}  // namespace rnnfast
