#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backward_parts.hpp"
#include "rnn.hpp"
#include "rnnfast/cells/elman_leaky.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/gemm/stream_pack.hpp"
#include "rnnfast/ops/embedding.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/step_barrier.hpp"
#include "rnnfast/runtime/threads.hpp"

namespace rnnfast {

// delta_t = (dy_t + delta_{t+1} W_hh) * act'(h_t), found by a backward loop whose only
// sequential work is that product; the weight and input gradients are GEMMs over many rows.
// Time is walked back in chunks of steps: each chunk's deltas are found, then turned into
// gradients at once, so the deltas need a chunk of memory, not all of T.
//
// The whole walk is one parallel region: per chunk the team splits the set-up of its steps,
// meets, runs the step loop (one barrier per step), then computes the chunk's gradients
// (chunk_gradients, no fork/join) and meets before the next chunk overwrites the deltas.
template <class T>
void rnn_backward(const BackwardArgs<T>& a) {
    const index T_ = a.steps, B = a.batch, D = a.input_size, H = a.hidden_size;
    const index step_size = B * H;

    // Nothing flows through a step (H = 0: nothing to flow); with T = 0, h_n is h0.
    if (T_ == 0 || B == 0 || H == 0) {
        copy_or_zero(a.dh0, a.dh_n, step_size);
        if (a.dx) copy_or_zero<T>(a.dx, nullptr, (a.ids ? a.vocab : T_ * B) * D);
        copy_or_zero<T>(a.dw_ih, nullptr, H * D);
        copy_or_zero<T>(a.dw_hh, nullptr, H * H);
        copy_or_zero<T>(a.db, nullptr, H);
        return;
    }
    if (a.keep || a.recurrent_mask) return rnn_backward_masked(a);

    const KernelTable<T>& kt = kernels<T>();
    const index panels = panel_count(H, kt.nr);
    const index chunk = std::min(T_, std::max<index>(1, kChunkRows / B));
    const BackwardTeam team_plan = backward_team(kt, a, chunk);
    // B(k = j, n = i) = W_hh[j, i]: the recurrent term delta_t W_hh. A small batch of one
    // (streams()) streams it instead (matvec).
    const bool stream = streams<T>(B, H);
    const std::unique_ptr<T[]> packed_hh =  // every element packed before it is read
        scratch<T>(stream ? stream_packed_size(kt, H, H) : kt.packed_b_size(H, H));
    GradientBuffers<T> buffers(kt, a, chunk * B);
    const Epilogue grad = gradient_epilogue(a.act);
    std::vector<T> delta(static_cast<size_t>(chunk * step_size));
    std::vector<T> later(static_cast<size_t>(step_size));  // delta of the step after the chunk
    // Leaky units need the state gradient g_t beside delta_t (g_t reaches h_{t-1} directly, not
    // only through the activation); the plain unit folds g into delta in the GEMM's epilogue.
    const bool leaky = a.alpha != T(1);
    std::vector<T> state_grad(leaky ? static_cast<size_t>(chunk * step_size) : 0);
    std::vector<T> later_grad(leaky ? static_cast<size_t>(step_size) : 0);
    std::vector<T> zeros(leaky && !a.h0 ? static_cast<size_t>(step_size) : 0);
    const T* h_start = a.h0 ? a.h0 : zeros.data();
    T* gather = leaky ? state_grad.data() : delta.data();  // where dy and dh_n collect
    const std::vector<index> active = active_rows(a.lengths, T_, B);

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
        if (!stream) {
            team_pack(kt, team, MatView<T>{a.w_hh, H, 1}, H, H, packed_hh.get());
        } else {  // the columns of the member's step share (the same at every step: B = 1)
            const Share s = share_of(1, panels, kt.mr, team.me, stepping);
            if (team.me < stepping)
                stream_pack(kt, MatView<T>{a.w_hh, H, 1}, H, std::min(H, s.p0 * kt.nr),
                            std::min(H, s.p1 * kt.nr), packed_hh.get());
        }

        for (index t1 = T_; t1 > 0; t1 -= chunk) {
            const index t0 = std::max<index>(0, t1 - chunk), steps = t1 - t0;
            const bool have_later = t1 < T_;
            // Start from dy (the direct gradient of every h_t), zero at padded steps, plus dh_n
            // at each sequence's own last step (rows [active[t+1], active[t]) end at step t).
            const Range mine = team_range(team, steps);
            for (index i = mine.begin; i < mine.end; ++i) {
                const index t = t0 + i, rows = active[static_cast<size_t>(t)];
                T* g = gather + i * step_size;
                copy_or_zero(g, a.dy ? a.dy + t * step_size : nullptr, step_size);
                if (leaky) copy_or_zero<T>(delta.data() + i * step_size, nullptr, step_size);
                std::memset(g + rows * H, 0, sizeof(T) * static_cast<size_t>((B - rows) * H));
                if (a.dh_n)
                    for (index r = active[static_cast<size_t>(t + 1)]; r < rows; ++r)
                        for (index j = 0; j < H; ++j)
                            g[r * H + j] += a.dh_n[r * H + j];
            }
            team_barrier.wait();  // also publishes the packed weights, the first time

            if (team.me < stepping) {
                GemmTask<T> step;
                step.M = B;
                step.N = H;
                step.packed_b = packed_hh.get();
                step.ldc = H;
                step.ldaux = H;
                step.accumulate = true;
                step.op = leaky ? Epilogue::none : grad;
                for (index i = steps - 1; i >= 0; --i) {
                    const index t = t0 + i;
                    // Only the sequences still running at step t: padded rows stay zero.
                    const Share s =
                        share_of(active[static_cast<size_t>(t)], panels, kt.mr, team.me, stepping);
                    const Block own{s.m0, s.m1, std::min(H, s.p0 * kt.nr),
                                    std::min(H, s.p1 * kt.nr)};
                    const T* next = i + 1 < steps ? delta.data() + (i + 1) * step_size
                                                  : (have_later ? later.data() : nullptr);
                    T* g = gather + i * step_size;
                    if (leaky) {
                        const T* g_next = i + 1 < steps
                                              ? state_grad.data() + (i + 1) * step_size
                                              : (have_later ? later_grad.data() : nullptr);
                        if (g_next) add_scaled(g, g_next, H, own, T(1) - a.alpha);
                    }
                    // The very last step has no recurrent term (K = 0: the epilogue alone).
                    step.K = next ? H : 0;
                    step.A = {next, H, 1};
                    step.C = g;
                    step.aux = a.y + t * step_size;
                    if (!stream)
                        kt.gemm_block(step, s.m0, s.m1, s.p0, s.p1);
                    else if (s.m1 > s.m0)  // the sequence is still running
                        kt.matvec(packed_hh.get() + own.c0 * H, step.K, next, g + own.c0,
                                  own.c1 - own.c0, step.op, step.aux + own.c0);
                    if (leaky)
                        leaky_delta(delta.data() + i * step_size, g, a.y + t * step_size,
                                    t > 0 ? a.y + (t - 1) * step_size : h_start, H, own, a.alpha,
                                    a.act);
                    step_barrier.wait();
                }
            }
            // The step loop's last barrier published the deltas to the members that ran it.
            if (stepping < team.size) {
                if (team.me < stepping)
                    team_barrier.wait();
                else
                    team_barrier.wait_idle();
            }

            ChunkGradients<T> c;
            c.t0 = t0;
            c.rows = steps * B;
            c.delta = delta.data();
            c.accumulate = have_later;
            // h_{t-1} is y_{t-1}; at t = 0 it is h0 (zeros when absent).
            c.split = t0 == 0 ? B : 0;
            c.rest = a.y + (t0 * B + c.split - B) * H;
            c.first = a.h0;
            chunk_gradients(kt, team, a, c, buffers);
            team_copy(team, later.data(), delta.data(), step_size);
            if (leaky) team_copy(team, later_grad.data(), state_grad.data(), step_size);
            team_barrier.wait();  // before the next chunk overwrites the deltas
        }

        // dh0 = delta_0 W_hh (+ (1 - alpha) g_0 for leaky units), no activation; a sequence of
        // length 0 passes dh_n straight to dh0 (its h_n is h0). Each member of the step loop
        // computes its block, on the weights it read there.
        if (team.me < stepping) {
            const Share s = share_of(B, panels, kt.mr, team.me, stepping);
            const index c0 = std::min(H, s.p0 * kt.nr), c1 = std::min(H, s.p1 * kt.nr);
            for (index r = s.m0; r < s.m1; ++r)
                for (index j = c0; j < c1; ++j) {
                    const index i = r * H + j;
                    a.dh0[i] = leaky ? (T(1) - a.alpha) * later_grad[i] : T(0);
                    if (a.dh_n && r >= active[0]) a.dh0[i] += a.dh_n[i];
                }
            GemmTask<T> last;
            last.accumulate = true;
            last.M = B;
            last.N = H;
            last.K = H;
            last.A = {later.data(), H, 1};
            last.packed_b = packed_hh.get();
            last.C = a.dh0;
            last.ldc = H;
            if (!stream)
                kt.gemm_block(last, s.m0, s.m1, s.p0, s.p1);
            else
                kt.matvec(packed_hh.get() + c0 * H, H, later.data(), a.dh0 + c0, c1 - c0,
                          Epilogue::none, nullptr);
        }
    }

    if (a.ids) token_gradients(kt, a, buffers);
}

template void rnn_backward(const BackwardArgs<float>&);
template void rnn_backward(const BackwardArgs<double>&);

}  // namespace rnnfast
