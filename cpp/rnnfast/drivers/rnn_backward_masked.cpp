#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backward_parts.hpp"
#include "rnn.hpp"
#include "rnnfast/cells/elman.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/ops/embedding.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "step_masks.hpp"
#include "time_loop.hpp"

namespace rnnfast {

namespace {

template <class T, class Cell>
struct MaskedBackwardPass : TimeLoopPass {
    static_assert(single_product_cell<Cell>(), "a cell of one state, gate group and product");
    const BackwardArgs<T>& a;
    const index B, H, step_size;
    const KernelTable<T>& kt;
    const StepMasks masks;
    const std::vector<index> source;
    const std::vector<index> active;  // every row runs every step (lengths are in the masks)
    const index chunk;
    const BackwardTeam team_plan;
    // B(k = j, n = i) = W_hh[j, i]: rho = delta W_hh.
    const std::unique_ptr<T[]> packed_hh;  // all packed
    GradientBuffers<T> buffers;
    // Scratch that every step writes in full before anything reads it: not zeroed.
    const std::unique_ptr<T[]> delta, prev;
    // g_t is read only by step t - 1: two slots, by the step's parity.
    const std::unique_ptr<T[]> state_grad, rho;
    // delta and g of the step after the chunk (the first step of the chunk walked before).
    const std::unique_ptr<T[]> later, later_grad;
    const std::vector<T> zeros;
    const T* h_start;

    explicit MaskedBackwardPass(const BackwardArgs<T>& args)
        : a(args),
          B(args.batch),
          H(args.hidden_size),
          step_size(B * H),
          kt(kernels<T>()),
          masks(step_masks(args.keep, args.lengths, args.zero_output_for_mask, args.steps, B)),
          source(state_sources(masks, args.steps, B)),
          active(active_rows(nullptr, args.steps, B)),
          chunk(std::min(args.steps, std::max<index>(1, kChunkRows / B))),
          team_plan(backward_team(kt, args, chunk)),
          packed_hh(scratch<T>(kt.packed_b_size(H, H))),
          buffers(kt, args, chunk * B),
          delta(scratch<T>(chunk * step_size)),
          prev(scratch<T>(chunk * step_size)),
          state_grad(scratch<T>(2 * step_size)),
          rho(scratch<T>(step_size)),
          later(scratch<T>(step_size)),
          later_grad(scratch<T>(step_size)),
          zeros(static_cast<size_t>(args.h0 ? H : step_size), T(0)),
          h_start(args.h0 ? args.h0 : zeros.data()) {}

    LoopShape shape() const {
        return {{a.steps, chunk, true, false},  // in reverse, one region
                {team_plan.team, team_plan.steps},
                {B, active.data(), masks.keep.data()},
                kernel_columns(kt, Cell::columns(H))};
    }

    // Every row at every step, so a member's block is the same throughout: what it reads of
    // g_{t+1} and rho it wrote itself.
    struct Member {
        MaskedBackwardPass& p;
        const Team team;
        GemmTask<T> back;
        MaskedGradStep<T> st;

        Member(MaskedBackwardPass& pass, const Team& t, int)
            : p(pass),
              team(t),
              back(packed_task<T>(p.B, p.H, p.H, p.packed_hh.get(), p.rho.get(), p.H)) {
            st.out_t = nullptr;
            st.y = p.a.y;
            st.batch = p.B;
            st.h0 = p.h_start;
            st.zeros = p.zeros.data();
            st.mask = p.a.recurrent_mask;
            st.alpha = p.a.alpha;
            st.act = p.a.act;
        }

        void chunk_begin(const Chunk& c) {
            if (!c.first) return;
            team_pack(p.kt, team, MatView<T>{p.a.w_hh, p.H, 1}, p.H, p.H, p.packed_hh.get());
            team.barrier->wait();
        }

        void step(const Chunk& c, const Step& step) {
            const index B = p.B, H = p.H, step_size = p.step_size, i = step.i, t = step.t;
            const Share& s = step.share;
            const bool last = t + 1 == p.a.steps;
            st.t = t;
            st.g = p.state_grad.get() + (i & 1) * step_size;
            st.delta = p.delta.get() + i * step_size;
            st.prev = p.prev.get() + i * step_size;
            st.dy = p.a.dy ? p.a.dy + t * step_size : nullptr;
            st.out_t = p.masks.out.data() + t * B;
            st.dh_n = last ? p.a.dh_n : nullptr;
            st.source_prev = t > 0 ? p.source.data() + (t - 1) * B : nullptr;
            st.keep_t = step.keep;
            st.rho = last ? nullptr : p.rho.get();
            st.keep_next = last ? nullptr : p.masks.keep.data() + (t + 1) * B;
            st.g_next = last              ? nullptr
                        : i + 1 < c.steps ? p.state_grad.get() + ((i + 1) & 1) * step_size
                                          : p.later_grad.get();
            if (!last) {
                back.A = {i + 1 < c.steps ? p.delta.get() + (i + 1) * step_size : p.later.get(), H,
                          1};
                p.kt.gemm_block(back, s.m0, s.m1, s.p0, s.p1);
            }
            Cell::masked_backward_step(st, H, step.own);
        }

        void chunk_end(const Chunk& c) {
            ChunkGradients<T> g;
            g.t0 = c.t0;
            g.rows = c.steps * p.B;
            g.delta = p.delta.get();
            g.accumulate = c.t0 + c.steps < p.a.steps;
            g.rest = p.prev.get();  // what W_hh read: h_{t-1} * mask
            chunk_gradients(p.kt, team, p.a, g, p.buffers);
            team_copy(team, p.later.get(), p.delta.get(), p.step_size);
            team_copy(team, p.later_grad.get(), p.state_grad.get(), p.step_size);
            team.barrier->wait();  // before the next chunk overwrites the deltas
            if (!c.last) return;
            // dh0: what step 0 sends back to h0, by the same rule as every other step.
            GemmTask<T> first = packed_task<T>(p.B, p.H, p.H, p.packed_hh.get(), p.rho.get(), p.H);
            first.A = {p.later.get(), p.H, 1};
            team_task(p.kt, team, first);
        }
    };
};

}  // namespace

// BPTT under general step masks and recurrent dropout. With g_t the total gradient of the state
// h_t and rho_{t+1} = delta_{t+1} W_hh:
//   g_t = [y_t is h_t] dy_t + (h_{t+1} kept ? mask * rho_{t+1} + (1 - alpha) g_{t+1} : g_{t+1})
//   delta_t = [h_t kept] alpha g_t act'(a_t)
// (a carried output is the state itself from a sequence's first kept step on, so dy reaches the
// state wherever y_t is h_t and nowhere else; see StepMasks). The sequential part per step is
// still one GEMM over the batch, rho; the select is element-wise in the thread's own block.
// The states the backward needs (h_{t-1} for dW_hh and leaky units) are gathered from y by
// state_sources. As in rnn_backward, time is walked back in chunks of steps in one region of
// the time loop, each chunk's deltas turned into weight and input gradients by large GEMMs.
template <class T>
void rnn_backward_masked(const BackwardArgs<T>& a) {
    MaskedBackwardPass<T, ElmanCell<T>> pass(a);
    run_time_loop(pass.shape(), pass);
    ElmanCell<T>::masked_initial_state_grad(a.dh0, pass.later_grad.get(), pass.rho.get(),
                                            pass.masks.keep.data(), a.recurrent_mask, a.alpha,
                                            a.batch, a.hidden_size);
    if (a.ids) token_gradients(pass.kt, a, pass.buffers);
}

template void rnn_backward_masked(const BackwardArgs<float>&);
template void rnn_backward_masked(const BackwardArgs<double>&);

}  // namespace rnnfast
