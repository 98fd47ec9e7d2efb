#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backward_parts.hpp"
#include "rnn.hpp"
#include "rnnfast/cells/elman_masked.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/ops/embedding.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/step_barrier.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "step_masks.hpp"

namespace rnnfast {

// BPTT under general step masks and recurrent dropout. With g_t the total gradient of the state
// h_t and rho_{t+1} = delta_{t+1} W_hh:
//   g_t = [y_t is h_t] dy_t + (h_{t+1} kept ? mask * rho_{t+1} + (1 - alpha) g_{t+1} : g_{t+1})
//   delta_t = [h_t kept] alpha g_t act'(a_t)
// (a carried output is the state itself from a sequence's first kept step on, so dy reaches the
// state wherever y_t is h_t and nowhere else; see StepMasks). The sequential part per step is
// still one GEMM over the batch, rho; the select is element-wise in the thread's own block.
// The states the backward needs (h_{t-1} for dW_hh and leaky units) are gathered from y by
// state_sources. As in rnn_backward, time is walked back in chunks of steps, each chunk's deltas
// turned into weight and input gradients by large GEMMs.
template <class T>
void rnn_backward_masked(const BackwardArgs<T>& a) {
    const index T_ = a.steps, B = a.batch, D = a.input_size, H = a.hidden_size;
    const index step_size = B * H;
    const KernelTable<T>& kt = kernels<T>();
    const index panels = panel_count(H, kt.nr);
    const StepMasks masks = step_masks(a.keep, a.lengths, a.zero_output_for_mask, T_, B);
    const std::vector<index> source = state_sources(masks, T_, B);

    const index chunk = std::min(T_, std::max<index>(1, kChunkRows / B));
    const BackwardTeam team_plan = backward_team(kt, a, chunk);
    // B(k = j, n = i) = W_hh[j, i]: rho = delta W_hh.
    const std::unique_ptr<T[]> packed_hh = scratch<T>(kt.packed_b_size(H, H));  // all packed
    GradientBuffers<T> buffers(kt, a, chunk * B);
    // Scratch that every step writes in full before anything reads it: not zeroed.
    const index chunk_size = chunk * step_size;
    const std::unique_ptr<T[]> delta = scratch<T>(chunk_size), prev = scratch<T>(chunk_size);
    // g_t is read only by step t - 1: two slots, by the step's parity.
    const std::unique_ptr<T[]> state_grad = scratch<T>(2 * step_size), rho = scratch<T>(step_size);
    // delta and g of the step after the chunk (the first step of the chunk walked before).
    const std::unique_ptr<T[]> later = scratch<T>(step_size), later_grad = scratch<T>(step_size);
    const std::vector<T> zeros(static_cast<size_t>(a.h0 ? H : step_size), T(0));
    const T* h_start = a.h0 ? a.h0 : zeros.data();

    // One parallel region for the whole walk, as in rnn_backward.
    StepBarrier step_barrier, team_barrier;
#pragma omp parallel num_threads(team_plan.team)
    {
#pragma omp single
        {
            team_barrier.reset(team_size());
            step_barrier.reset(std::min(team_plan.steps, team_size()));
        }
        const Team team{thread_index(), team_size(), &team_barrier};
        const int stepping = std::min(team_plan.steps, team.size);
        team_pack(kt, team, MatView<T>{a.w_hh, H, 1}, H, H, packed_hh.get());
        team_barrier.wait();

        for (index t1 = T_; t1 > 0; t1 -= chunk) {
            const index t0 = std::max<index>(0, t1 - chunk), steps = t1 - t0;
            if (team.me < stepping) {
                GemmTask<T> back;
                back.M = B;
                back.N = H;
                back.K = H;
                back.packed_b = packed_hh.get();
                back.C = rho.get();
                back.ldc = H;
                // Every row at every step, so a member's block is the same throughout: what it
                // reads of g_{t+1} and rho it wrote itself.
                const Share s = share_of(B, panels, kt.mr, team.me, stepping);
                const Block own{s.m0, s.m1, std::min(H, s.p0 * kt.nr), std::min(H, s.p1 * kt.nr)};
                MaskedGradStep<T> st;
                st.out_t = nullptr;
                st.y = a.y;
                st.batch = B;
                st.h0 = h_start;
                st.zeros = zeros.data();
                st.mask = a.recurrent_mask;
                st.alpha = a.alpha;
                st.act = a.act;
                for (index i = steps - 1; i >= 0; --i) {
                    const index t = t0 + i;
                    const bool last = t + 1 == T_;
                    st.t = t;
                    st.g = state_grad.get() + (i & 1) * step_size;
                    st.delta = delta.get() + i * step_size;
                    st.prev = prev.get() + i * step_size;
                    st.dy = a.dy ? a.dy + t * step_size : nullptr;
                    st.out_t = masks.out.data() + t * B;
                    st.dh_n = last ? a.dh_n : nullptr;
                    st.source_prev = t > 0 ? source.data() + (t - 1) * B : nullptr;
                    st.keep_t = masks.keep.data() + t * B;
                    st.rho = last ? nullptr : rho.get();
                    st.keep_next = last ? nullptr : masks.keep.data() + (t + 1) * B;
                    st.g_next = last            ? nullptr
                                : i + 1 < steps ? state_grad.get() + ((i + 1) & 1) * step_size
                                                : later_grad.get();
                    if (!last) {
                        back.A = {i + 1 < steps ? delta.get() + (i + 1) * step_size : later.get(),
                                  H, 1};
                        kt.gemm_block(back, s.m0, s.m1, s.p0, s.p1);
                    }
                    masked_grad_step(st, H, own);
                    step_barrier.wait();
                }
            }
            if (stepping < team.size) {  // the members that sat the step loop out meet it
                if (team.me < stepping)
                    team_barrier.wait();
                else
                    team_barrier.wait_idle();
            }

            ChunkGradients<T> c;
            c.t0 = t0;
            c.rows = steps * B;
            c.delta = delta.get();
            c.accumulate = t1 < T_;
            c.rest = prev.get();  // what W_hh read: h_{t-1} * mask
            chunk_gradients(kt, team, a, c, buffers);
            team_copy(team, later.get(), delta.get(), step_size);
            team_copy(team, later_grad.get(), state_grad.get(), step_size);
            team_barrier.wait();  // before the next chunk overwrites the deltas
        }

        // dh0: what step 0 sends back to h0, by the same rule as every other step.
        GemmTask<T> first;
        first.M = B;
        first.N = H;
        first.K = H;
        first.A = {later.get(), H, 1};
        first.packed_b = packed_hh.get();
        first.C = rho.get();
        first.ldc = H;
        team_task(kt, team, first);
    }
    state_grad_before(a.dh0, later_grad.get(), rho.get(), masks.keep.data(), a.recurrent_mask,
                      a.alpha, B, H);

    if (a.ids) token_gradients(kt, a, buffers);
}

template void rnn_backward_masked(const BackwardArgs<float>&);
template void rnn_backward_masked(const BackwardArgs<double>&);

}  // namespace rnnfast
