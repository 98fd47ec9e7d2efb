// GEMMs computed by the team of a parallel region that is already running. The backward's
// weight and input gradients run inside the region of its step loop, so a chunk of time steps
// costs no fork/join: each member computes its share with KernelTable::gemm_block, on B packed
// inside the region.
#pragma once

#include "gemm.hpp"
#include "rnnfast/runtime/step_barrier.hpp"

namespace rnnfast {

// The members of a running region and where they meet.
struct Team {
    int me;    // this member's index, in [0, size)
    int size;  // the team's size (team_size() in the region)
    StepBarrier* barrier;
};

// Rows of B packed at a time by team_gemm (as gemm() does): a packed K-block of 256 rows stays in
// L2 for N up to ~1024 floats whatever K is.
constexpr index kTeamPackRows = 256;

// Rows of the buffer team_gemm packs into, for GEMMs of K up to max_k: no more than it reads.
inline index team_pack_rows(index max_k) {
    return max_k < kTeamPackRows ? (max_k < 1 ? 1 : max_k) : kTeamPackRows;
}

// Elements of a buffer of `rows` (team_pack_rows) for a B of N columns.
template <class T>
index team_pack_size(const KernelTable<T>& kt, index rows, index N) {
    return kt.packed_b_size(rows, N);
}

// Packs this member's part of all of B (K x N) into dst (kt.packed_b_size(K, N) elements): the
// panels split_point gives it. The members must meet (a barrier) before reading other panels.
template <class T>
void team_pack(const KernelTable<T>& kt, const Team& team, MatView<T> B, index K, index N, T* dst);

// C (=|+=) A B, every member calling with the same arguments. B is packed K-block by K-block
// into `packed`, a buffer of packed_rows >= min(K, kTeamPackRows) rows (team_pack_size). When the
// column panels are split between the members (panels >= team: weight-stationary, each member keeps
// reading the same columns of B and writing the same columns of C), each member packs exactly the
// panels it multiplies and the members never wait for each other; when the rows are split, they
// meet after each pack and before the next. Each output element is summed in the same order
// whatever the team's size.
template <class T>
void team_gemm(const KernelTable<T>& kt, const Team& team, index M, index N, index K, MatView<T> A,
               MatView<T> B, T* C, index ldc, bool accumulate, T* packed, index packed_rows);

// A task whose B is packed already (the whole K), this member's share of it; no barrier.
template <class T>
void team_task(const KernelTable<T>& kt, const Team& team, const GemmTask<T>& task);

// [begin, end) of this member's part of n items split evenly (in granules of `granule`).
struct Range {
    index begin, end;
};
Range team_range(const Team& team, index n, index granule = 1);

}  // namespace rnnfast
