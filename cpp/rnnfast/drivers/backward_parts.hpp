// Pieces shared by the backward drivers (rnn_backward.cpp, rnn_backward_masked.cpp).
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>

#include <vector>

#include "rnn.hpp"
#include "rnnfast/gemm/team_gemm.hpp"
#include "rnnfast/runtime/kernel_table.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "rnnfast/runtime/types.hpp"

namespace rnnfast {

// Rows (steps x batch) of deltas kept at once: enough for the weight-gradient GEMMs to run at
// full speed, small enough that the working memory does not grow with T.
constexpr index kChunkRows = 1024;

template <class T>
void copy_or_zero(T* dst, const T* src, index n) {
    if (n <= 0) return;
    if (src)
        std::memcpy(dst, src, sizeof(T) * static_cast<size_t>(n));
    else
        std::memset(dst, 0, sizeof(T) * static_cast<size_t>(n));
}

// db[j] (+)= sum over rows of delta[r, j] for columns [c0, c1) (one member's part); rows summed
// in order, so the result does not depend on how the columns are split.
template <class T>
void add_column_sums(const T* delta, index rows, index cols, T* db, bool accumulate, index c0,
                     index c1) {
    if (!accumulate)
        for (index j = c0; j < c1; ++j)
            db[j] = T(0);
    for (index r = 0; r < rows; ++r)
        for (index j = c0; j < c1; ++j)
            db[j] += delta[r * cols + j];
}

// dst[0, n) = src[0, n), each member copying its part.
template <class T>
void team_copy(const Team& team, T* dst, const T* src, index n) {
    const Range mine = team_range(team, n, 16);
    if (mine.end > mine.begin)
        std::memcpy(dst + mine.begin, src + mine.begin,
                    sizeof(T) * static_cast<size_t>(mine.end - mine.begin));
}

struct BackwardTeam {
    int team, steps;
};

// One chunk of time steps' contribution to the weight and input gradients, once its deltas are
// known: dW_ih (+)= delta^T X (with token input, the deltas summed per id instead),
// dW_hh (+)= delta^T prev, dX = delta W_ih, db (+)= column sums of delta.
template <class T>
struct ChunkGradients {
    index t0 = 0, rows = 0;    // the chunk's first step, and its rows (steps x B)
    const T* delta = nullptr;  // (rows, H)
    bool accumulate = false;   // add to what the chunks walked before left
    // What W_hh multiplied at the chunk's rows (h_{t-1}, times the mask under recurrent
    // dropout), in two pieces: rows [split, rows) from `rest`, rows [0, split) from `first`
    // (null: zeros, which add nothing).
    const T* rest = nullptr;
    index split = 0;
    const T* first = nullptr;
};

// The buffers of chunk_gradients, allocated once per call for chunks of up to chunk_rows rows:
// room for team_gemm's K-blocks of the B operands with N = D (X for dW_ih, W_ih for dX) and
// N = H (prev for dW_hh), no larger than those GEMMs read, and left uninitialised (every use
// writes before it reads: a zeroed buffer of fresh pages cost page faults on every call); with
// token input, the per-id delta sums (vocab, H), zeroed.
template <class T>
struct GradientBuffers {
    index x_rows = 0, h_rows = 0;
    std::unique_ptr<T[]> packed_x, packed_h;
    std::vector<T> token_delta;
    GradientBuffers(const KernelTable<T>& kt, const BackwardArgs<T>& a, index chunk_rows);
};

// The chunk's gradients, computed by the team inside the backward's region (no barrier of its
// own when the members split columns). Each member keeps to the same columns throughout the
// call, those share_of gives it: of dW_ih, dX and W_ih the D-panels, of dW_hh, db and W_hh
// the H-panels, as in the step loop (weight-stationary). Every delta must be published (a
// barrier) before, and the members must meet after, before the deltas are overwritten.
template <class T>
void chunk_gradients(const KernelTable<T>& kt, const Team& team, const BackwardArgs<T>& a,
                     const ChunkGradients<T>& c, GradientBuffers<T>& buffers);

// With token input, after the walk: with S the per-id delta sums (vocab x H), dW_ih = S^T E and
// d(table) = S W_ih (outside any parallel region).
template <class T>
void token_gradients(const KernelTable<T>& kt, const BackwardArgs<T>& a,
                     const GradientBuffers<T>& buffers);

// The team of a backward call's region: `team` threads, the first `steps` of them running the
// step loop (B x H x H per step between two barriers may be worth fewer threads than the
// chunk's gradient GEMMs; the others wait for it). When the step loop alone would run on one
// thread, the GEMMs are worth more threads only if they pay for starting a team.
template <class T>
BackwardTeam backward_team(const KernelTable<T>& kt, const BackwardArgs<T>& a, index chunk) {
    const index B = a.batch, D = a.input_size, H = a.hidden_size;
    const index panels = (H + kt.nr - 1) / kt.nr;
    const int steps =
        threads_for(2.0 * double(B) * double(H) * double(H), std::max(panels, B), Sync::barrier);
    const int gemms =
        threads_for(2.0 * double(chunk * B) * double(H) * double(std::max(D, H)),
                    std::max(panels, chunk * B), steps > 1 ? Sync::barrier : Sync::fork_join);
    return {std::max(steps, gemms), steps};
}

// Working memory that every use writes in full before reading it: left uninitialised, as
// zeroing it would be one more pass over it per call.
template <class T>
std::unique_ptr<T[]> scratch(index n) {
    return std::unique_ptr<T[]>(new T[static_cast<size_t>(n)]);
}

// The backward of the masked drivers (general step masks, recurrent dropout); rnn_backward
// calls it when the arguments have either, after handling the empty cases.
template <class T>
void rnn_backward_masked(const BackwardArgs<T>& args);

}  // namespace rnnfast
