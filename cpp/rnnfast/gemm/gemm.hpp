// Parallel GEMM on top of the active kernel table: how work is split between threads, and
// packing of B in K-chunks so that the packed copy stays small whatever K is.
#pragma once

#include <vector>

#include "rnnfast/runtime/kernel_table.hpp"
#include "rnnfast/runtime/uninitialized.hpp"

namespace rnnfast {

// The share of a GEMM one thread computes: rows [m0, m1) x column panels [p0, p1).
struct Share {
    index m0, m1, p0, p1;
};

// Splits column panels between threads when there are enough of them (each thread then keeps
// its own slice of B in cache for the whole call: weight-stationary), else splits rows.
Share share_of(index M, index panels, int mr, int thread, int threads);

// A time step's share: share_of's column split, unless a few panels split unevenly between the
// threads (3 unit blocks between 2: 2 to 1) and the rows balance clearly better; then rows.
// On 2 cores, 80x48x200x96 ran no faster on 2 threads than on 1 with the 2:1 column split.
Share step_share_of(index M, index panels, int mr, int thread, int threads);

inline index panel_count(index N, int nr) {
    return (N + nr - 1) / nr;
}

// Packs all of B (K x N) for the kernels, in parallel.
template <class T>
Packed<T> pack_whole(const KernelTable<T>& kt, MatView<T> B, index K, index N, int threads);

// A task on a B packed already (all of K): C (M x N, leading dimension ldc) = A B; the caller
// sets A and whatever else it needs (accumulate, bias, the epilogue).
template <class T>
GemmTask<T> packed_task(index M, index N, index K, const T* packed_b, T* C, index ldc) {
    GemmTask<T> t;
    t.M = M;
    t.N = N;
    t.K = K;
    t.packed_b = packed_b;
    t.C = C;
    t.ldc = ldc;
    return t;
}

// Rows [m0, m1) x column panels [p0, p1) of a task whose B is packed already, on this thread;
// nothing when either range is empty (a thread with no share of a step).
template <class T>
void run_block(const KernelTable<T>& kt, const GemmTask<T>& task, index m0, index m1, index p0,
               index p1) {
    if (m1 > m0 && p1 > p0) kt.gemm_block(task, m0, m1, p0, p1);
}

// Runs a task whose B is packed already; call from outside any parallel region.
template <class T>
void run_task(const KernelTable<T>& kt, const GemmTask<T>& task, int threads);

// C (=|+=) A B with the given epilogue; packs B chunk by chunk along K.
template <class T>
void gemm(const KernelTable<T>& kt, index M, index N, index K, MatView<T> A, MatView<T> B, T* C,
          index ldc, bool accumulate, int threads, const T* bias = nullptr,
          Epilogue op = Epilogue::none, const T* aux = nullptr, index ldaux = 0);

}  // namespace rnnfast
