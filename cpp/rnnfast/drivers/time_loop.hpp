// The one time loop of the recurrent drivers: the chunks of steps, the thread team and its one
// OpenMP parallel region, the barrier after each step, the lengths and the step masks. Every
// pass over time instantiates it with what differs; nothing else opens a region for the steps:
//   elman_pass.hpp   ElmanForwardPass<T, Cell, Product>: the Elman forward, on the float GEMMs
//                    (rnn_forward.cpp) or the int8 / bf16 products (quantized/qdriver.cpp)
//   gated_pass.hpp   GatedForwardPass<T, Cell, Product>: the GRU / LSTM forward, on the float
//                    GEMMs (gated_forward.cpp) or the int8 / bf16 products (quantized/qgated.cpp)
//   rnn_backward.cpp, rnn_backward_masked.cpp, gated_backward.cpp: the backwards (float only)
//   deep_forward.cpp, deep_backward.cpp: the deep transition's k layers per step
// Files under quantized/ hold products, never a pass.
//
// What the loop does. It walks time in chunks of `chunk` steps, from step 0 up or (reverse, the
// backward) from T - 1 down, the chunks aligned to the end it starts from. One team of `team`
// threads runs the walk in one region, or one region per chunk when the pass has serial work
// between chunks (region_per_chunk: an input projection with its own thread count, as the
// quantized products' and the gated forward's under token input or input dropout). Of the
// team, the first `stepping` members run the steps (a step's B x H x H may be worth fewer
// threads than the chunk's projection or gradient GEMMs); the others wait for them at the
// team barrier. At step t the running rows are [0, active[t]) (lengths: sequences sorted
// longest first, so each step is one dense product over them; active[t + 1] says which end at
// t), and keep[t * B + b] says whether row b runs step t at all (the general mask; a skipped
// row keeps its state). Each stepping member gets the same column panels at every step
// (weight-stationary: its slice of the packed recurrent weights stays in its cache), splitting
// rows instead when there are fewer panels than members, and the members meet at one barrier
// after each step.
//
// How a pass plugs in. A pass is a struct with a nested Member, built once per thread inside the
// region from (pass, team, stepping). The loop calls, all statically (templates, inlined: no
// virtual call and no std::function in the step loop):
//   pass.before_region(chunk), pass.after_region(chunk)  serially, outside the team, around each
//                                                         region (its first and last chunk)
//   member.chunk_begin(chunk), member.chunk_end(chunk)   every member, inside the team; they
//                                                         meet at team.barrier where they need to
//   member.step(chunk, step)                             each stepping member, once per step of
//                                                         the chunk, on its block `step.own`
// TimeLoopPass gives empty serial hooks to a pass that has none.
//
// How a cell plugs in. The loop knows nothing of the cell; a pass takes the cell as a template
// argument and calls it statically: cells/elman.hpp (ElmanCell) and cells/gated_cell.hpp (what
// GruCell, GruResetBeforeCell and LstmCell give) list the members. In short:
//   - its states, kStates: what is carried from step to step (Elman, GRU: h; LSTM: h and c).
//     The pass keeps one (B, H) slot per state per step, and a skipped or finished row carries
//     each.
//   - its gate groups, kGates (Elman 1, GRU 3, LSTM 4): the step's product has kGates * H
//     columns, and the packed recurrent weights order their columns so that a member's panels
//     hold every gate of its hidden units (cells/gate_layout.hpp): the epilogue then combines a
//     unit's gates in registers, with no barrier.
//   - its sub-steps: a product that reads what other members wrote in the same step (the GRU
//     reset_before's W_hn (r * h), kSecondProduct; the LSTM's projection W_hr m, kProjects; a
//     deep transition's k layers) is preceded by step.barrier->wait(), which every stepping
//     member calls the same number of times per step; the loop's own barrier still ends the
//     step.
//   - its epilogue after the products, on the member's block: Elman's activation (fused into
//     the product) and leaky mix (finish_step); a gated cell's forward_block (sigmoids, tanh,
//     state update) and second_block.
//   - what its backward needs stored per step: Elman nothing beyond y (act' is recovered from
//     h_t; kStoredSteps = 0); a gated cell kStored * H values per row (its gates, and c_t or
//     the n-term), in a workspace the forward's step writes and the backward's step reads.
//   - its backward step: from the state gradients of step t + 1 and the stored step, the
//     gradient of the pre-activations (Elman: carry_state_grad, delta_from_state_grad,
//     masked_backward_step; gated: grad_block, second_grad), whose product with W_hh is the
//     recurrent term of step t - 1 and which the chunk's gradient GEMMs turn into dW and dX.
//   - per-gate recurrent masks: Keras's recurrent dropout on a gated cell masks h_{t-1} once per
//     gate; the float product forms kStepGates masked copies of its rows and runs one product
//     per gate, each on its gate's columns.
// The string a binding receives becomes a cell type in one place (cells/gated_cells.hpp).
//
// How a product plugs in. The forward passes take the product as a third template argument:
// the projection of a chunk, the step's product(s) on a member's block, their thread counts
// and chunking (elman_pass.hpp and gated_pass.hpp list what it gives). The float GEMM and the
// quantized int8 / bf16 products give the same members, so a cell runs on either with one pass.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/gemm/team_gemm.hpp"
#include "rnnfast/runtime/cache_info.hpp"
#include "rnnfast/runtime/kernel_table.hpp"
#include "rnnfast/runtime/step_barrier.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "rnnfast/runtime/types.hpp"

namespace rnnfast {

// The forwards' chunk: the steps whose input projection (step_bytes each) runs as one GEMM
// before them. As many as half of L2 holds (at least 1), so that the projection is still in L2
// when its steps read it, and a bounded buffer (O(B * H) memory) whatever T is. Zen 4 (1 MiB
// L2), float32, 1 thread, alternating processes, against the 16 steps (or all T where every
// output was kept) before: the LSTM's 16 steps of B x G*H = 128 x 512 (4 MiB, L3) against 2,
// 100x128x128x128 49-51 -> 43-49 ms, 50x64x128x256 34-35 -> 29-32 ms; GRU 25x64x1024x1024 (1
// step) 227-240 -> 210-215 ms; Elman 25x64x1024x1024 79-81 -> 73-80 ms.
inline index projection_chunk_steps(index steps, index step_bytes) {
    const index fit = cache_sizes().l2 / 2 / std::max<index>(step_bytes, 1);
    return std::max<index>(1, std::min(steps, fit));
}

// What the loop walks, and how it splits each step.
struct LoopShape {
    struct Walk {
        index steps = 0;                // T
        index chunk = 1;                // steps per chunk
        bool reverse = false;           // from step T - 1 down to 0 (the backward)
        bool region_per_chunk = false;  // a region per chunk, the serial hooks between them
    } walk;
    struct Threads {
        int team = 1;      // asked for the region
        int stepping = 1;  // of them, those that run the steps
    } threads;
    struct Rows {
        index batch = 0;                     // B
        const index* active = nullptr;       // (T + 1): rows running at step t, active[T] = 0
        const std::uint8_t* keep = nullptr;  // (T, B) 0/1 or null: every running row runs
    } rows;
    struct Columns {
        index count = 0;   // of the step's product (kGates * H)
        index panels = 0;  // column panels of `panel` columns each
        index panel = 1;
        int row_granule = 1;  // rows split between members in multiples of this (the tile's mr)
    } columns;
};

// The column split of a step whose products run on the float kernels.
template <class T>
LoopShape::Columns kernel_columns(const KernelTable<T>& kt, index count) {
    return {count, panel_count(count, kt.nr), kt.nr, kt.mr};
}

// Whether a cell is of the Elman passes' kind: one state, one gate group, one product per step and
// nothing stored beyond y (the gated cells have passes of their own: gated_pass.hpp).
template <class Cell>
constexpr bool single_product_cell() {
    return Cell::kStates == 1 && Cell::kGates == 1 && Cell::kStepGemms == 1 &&
           Cell::kStoredSteps == 0;
}

// Steps [t0, t0 + steps), the walk's first and last chunk (in the walk's order).
struct Chunk {
    index t0 = 0, steps = 0;
    bool first = false, last = false;
};

// One step as a stepping member sees it.
struct Step {
    index t = 0, i = 0;                  // the step, and its index in the chunk
    index rows = 0;                      // rows running at step t (active[t])
    index ending = 0;                    // active[t + 1]: rows [ending, rows) end at step t
    const std::uint8_t* keep = nullptr;  // (B) row b runs step t, or null: all running rows do
    Share share;                         // the member's rows x column panels
    Block own;                           // the same as rows x columns
    StepBarrier* barrier = nullptr;      // the stepping members' barrier, for a sub-step meeting
};

// Rows of `block` whose sequence ends at this step (rows from `ending` on: Step::ending) keep
// their state: final[r, c0:c1] = state[r, c0:c1], both of leading dimension ld. Every forward
// pass writes h_n (and c_n) this way, each member on its own block.
template <class T>
void keep_final_state(T* final_state, const T* state, index ld, const Block& block, index ending) {
    for (index r = std::max(block.m0, ending); r < block.m1; ++r)
        std::memcpy(final_state + r * ld + block.c0, state + r * ld + block.c0,
                    sizeof(T) * static_cast<size_t>(block.c1 - block.c0));
}

// Empty serial hooks, for a pass that has no work outside the team.
struct TimeLoopPass {
    void before_region(const Chunk&) {}
    void after_region(const Chunk&) {}
};

namespace time_loop_detail {

inline index chunk_count(const LoopShape::Walk& s) {
    return (s.steps + s.chunk - 1) / s.chunk;
}

inline Chunk chunk_at(const LoopShape::Walk& s, index c) {
    Chunk k;
    if (s.reverse) {
        const index t1 = s.steps - c * s.chunk;
        k.t0 = std::max<index>(0, t1 - s.chunk);
        k.steps = t1 - k.t0;
    } else {
        k.t0 = c * s.chunk;
        k.steps = std::min(s.chunk, s.steps - k.t0);
    }
    k.first = c == 0;
    k.last = c + 1 == chunk_count(s);
    return k;
}

inline Step step_at(const LoopShape& shape, const Chunk& chunk, index i, int me, int stepping,
                    StepBarrier* barrier) {
    const LoopShape::Rows& r = shape.rows;
    const LoopShape::Columns& c = shape.columns;
    Step st;
    st.t = chunk.t0 + i;
    st.i = i;
    st.rows = r.active[st.t];
    st.ending = r.active[st.t + 1];
    st.keep = r.keep ? r.keep + st.t * r.batch : nullptr;
    st.share = step_share_of(st.rows, c.panels, c.row_granule, me, stepping);
    st.own = Block{st.share.m0, st.share.m1, std::min(c.count, st.share.p0 * c.panel),
                   std::min(c.count, st.share.p1 * c.panel)};
    st.barrier = barrier;
    return st;
}

// Chunks [c0, c1) in one region.
template <class Pass>
void run_region(const LoopShape& shape, Pass& pass, index c0, index c1) {
    StepBarrier step_barrier, team_barrier;
#pragma omp parallel num_threads(shape.threads.team)
    {
#pragma omp single
        {
            team_barrier.reset(team_size());
            step_barrier.reset(std::min(shape.threads.stepping, team_size()));
        }
        const Team team{thread_index(), team_size(), &team_barrier};
        const int stepping = std::min(shape.threads.stepping, team.size);
        typename Pass::Member member(pass, team, stepping);
        for (index c = c0; c < c1; ++c) {
            const Chunk chunk = chunk_at(shape.walk, c);
            member.chunk_begin(chunk);
            if (team.me < stepping)
                for (index n = 0; n < chunk.steps; ++n) {
                    const index i = shape.walk.reverse ? chunk.steps - 1 - n : n;
                    member.step(chunk, step_at(shape, chunk, i, team.me, stepping, &step_barrier));
                    step_barrier.wait();
                }
            // The last step's barrier published the chunk to the members that ran it; those
            // that sat it out meet them here.
            if (stepping < team.size) {
                if (team.me < stepping)
                    team_barrier.wait();
                else
                    team_barrier.wait_idle();
            }
            member.chunk_end(chunk);
        }
    }
}

}  // namespace time_loop_detail

// Walks shape.steps steps with `pass` (see the top of this file).
template <class Pass>
void run_time_loop(const LoopShape& shape, Pass& pass) {
    using namespace time_loop_detail;
    const index chunks = chunk_count(shape.walk);
    const index per_region = shape.walk.region_per_chunk ? 1 : chunks;
    record_pass_threads({std::min(shape.threads.stepping, shape.threads.team), shape.threads.team});
    for (index c = 0; c < chunks; c += per_region) {
        const index end = std::min(chunks, c + per_region);
        pass.before_region(chunk_at(shape.walk, c));
        run_region(shape, pass, c, end);
        pass.after_region(chunk_at(shape.walk, end - 1));
    }
}

}  // namespace rnnfast
