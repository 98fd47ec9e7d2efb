#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backward_parts.hpp"
#include "rnn.hpp"
#include "rnnfast/cells/elman.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/gemm/stream_pack.hpp"
#include "rnnfast/ops/embedding.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "time_loop.hpp"

namespace rnnfast {

namespace {

// delta_t = (dy_t + delta_{t+1} W_hh) * act'(h_t), found by a backward loop whose only
// sequential work is that product; the weight and input gradients are GEMMs over many rows.
// Time is walked back in chunks of steps: each chunk's deltas are found, then turned into
// gradients at once, so the deltas need a chunk of memory, not all of T.
//
// The whole walk is one region of the time loop: per chunk the team splits the set-up of its
// steps, meets, runs the step loop (one barrier per step), then computes the chunk's gradients
// (chunk_gradients, no fork/join) and meets before the next chunk overwrites the deltas.
template <class T, class Cell>
struct BackwardPass : TimeLoopPass {
    static_assert(single_product_cell<Cell>(), "a cell of one state, gate group and product");
    const BackwardArgs<T>& a;
    const index B, D, H, step_size;
    const KernelTable<T>& kt;
    const index panels, chunk;
    const BackwardTeam team_plan;
    // B(k = j, n = i) = W_hh[j, i]: the recurrent term delta_t W_hh. A small batch of one
    // (streams()) streams it instead (matvec).
    const bool stream;
    // from the layer's cache, or every element packed before it is read
    CachedPack<T> packed_hh;
    GradientBuffers<T> buffers;
    const Epilogue grad;
    std::vector<T> delta;
    std::vector<T> later;  // delta of the step after the chunk
    // Leaky units need the state gradient g_t beside delta_t (g_t reaches h_{t-1} directly, not
    // only through the activation); the plain unit folds g into delta in the GEMM's epilogue.
    const bool leaky;
    std::vector<T> state_grad, later_grad, zeros;
    const T* h_start;
    T* gather;  // where dy and dh_n collect
    const std::vector<index> active;

    explicit BackwardPass(const BackwardArgs<T>& args)
        : a(args),
          B(args.batch),
          D(args.input_size),
          H(args.hidden_size),
          step_size(B * H),
          kt(kernels<T>()),
          panels(panel_count(H, kt.nr)),
          chunk(std::min(args.steps, std::max<index>(1, kChunkRows / B))),
          team_plan(backward_team(kt, args, chunk)),
          stream(streams(kt, B, H)),
          packed_hh(args.cache,
                    PackKey{args.w_hh, &kt, H, H, 0,
                            stream ? PackRole::stream_grad : PackRole::recurrent_grad},
                    stream ? stream_packed_size(kt, H, H) : kt.packed_b_size(H, H)),
          buffers(kt, args, chunk * B),
          grad(Cell::gradient_step_epilogue(args.act, args.alpha)),
          delta(static_cast<size_t>(chunk * step_size)),
          later(static_cast<size_t>(step_size)),
          leaky(args.alpha != T(1)),
          state_grad(leaky ? static_cast<size_t>(chunk * step_size) : 0),
          later_grad(leaky ? static_cast<size_t>(step_size) : 0),
          zeros(leaky && !args.h0 ? static_cast<size_t>(step_size) : 0),
          h_start(args.h0 ? args.h0 : zeros.data()),
          gather(leaky ? state_grad.data() : delta.data()),
          active(active_rows(args.lengths, args.steps, B)) {}

    LoopShape shape() const {
        return {{a.steps, chunk, true, false},  // in reverse, one region
                {team_plan.team, team_plan.steps},
                {B, active.data(), nullptr},
                kernel_columns(kt, Cell::columns(H))};
    }

    struct Member {
        BackwardPass& p;
        const Team team;
        const int stepping;
        GemmTask<T> task;

        Member(BackwardPass& pass, const Team& t, int steppers)
            : p(pass),
              team(t),
              stepping(steppers),
              task(packed_task<T>(p.B, p.H, 0, p.packed_hh.data(), nullptr, p.H)) {
            task.ldaux = p.H;
            task.accumulate = true;
            task.op = p.grad;
        }

        void pack_weights() {
            const index H = p.H;
            if (p.packed_hh.ready()) return;
            if (!p.stream) {
                team_pack(p.kt, team, MatView<T>{p.a.w_hh, H, 1}, H, H, p.packed_hh.room());
            } else {  // the columns of the member's step share (the same at every step: B = 1)
                const Share s = share_of(1, p.panels, p.kt.mr, team.me, stepping);
                if (team.me < stepping)
                    stream_pack(p.kt, MatView<T>{p.a.w_hh, H, 1}, H, std::min(H, s.p0 * p.kt.nr),
                                std::min(H, s.p1 * p.kt.nr), p.packed_hh.room());
            }
        }

        // Start from dy (the direct gradient of every h_t), zero at padded steps, plus dh_n at
        // each sequence's own last step (rows [active[t+1], active[t]) end at step t).
        void chunk_begin(const Chunk& c) {
            const index B = p.B, H = p.H, step_size = p.step_size;
            if (c.first) pack_weights();
            const Range mine = team_range(team, c.steps);
            for (index i = mine.begin; i < mine.end; ++i) {
                const index t = c.t0 + i, rows = p.active[static_cast<size_t>(t)];
                T* g = p.gather + i * step_size;
                copy_or_zero(g, p.a.dy ? p.a.dy + t * step_size : nullptr, step_size);
                if (p.leaky) copy_or_zero<T>(p.delta.data() + i * step_size, nullptr, step_size);
                std::memset(g + rows * H, 0, sizeof(T) * static_cast<size_t>((B - rows) * H));
                if (p.a.dh_n)
                    for (index r = p.active[static_cast<size_t>(t + 1)]; r < rows; ++r)
                        for (index j = 0; j < H; ++j)
                            g[r * H + j] += p.a.dh_n[r * H + j];
            }
            team.barrier->wait();  // also publishes the packed weights, the first time
        }

        // Only the sequences still running at step t: padded rows stay zero.
        void step(const Chunk& c, const Step& st) {
            const index H = p.H, step_size = p.step_size, i = st.i, t = st.t;
            const Share& s = st.share;
            const Block& own = st.own;
            const bool have_later = c.t0 + c.steps < p.a.steps;
            const T* next = i + 1 < c.steps ? p.delta.data() + (i + 1) * step_size
                                            : (have_later ? p.later.data() : nullptr);
            T* g = p.gather + i * step_size;
            if (p.leaky) {
                const T* g_next = i + 1 < c.steps ? p.state_grad.data() + (i + 1) * step_size
                                                  : (have_later ? p.later_grad.data() : nullptr);
                if (g_next) Cell::carry_state_grad(g, g_next, H, own, p.a.alpha);
            }
            // The very last step has no recurrent term (K = 0: the epilogue alone).
            task.K = next ? H : 0;
            task.A = {next, H, 1};
            task.C = g;
            task.aux = p.a.y + t * step_size;
            if (!p.stream)
                p.kt.gemm_block(task, s.m0, s.m1, s.p0, s.p1);
            else if (s.m1 > s.m0)  // the sequence is still running
                p.kt.matvec(p.packed_hh.data() + own.c0 * H, task.K, next, g + own.c0,
                            own.c1 - own.c0, task.op, task.aux + own.c0);
            if (p.leaky)
                Cell::delta_from_state_grad(
                    p.delta.data() + i * step_size, g, p.a.y + t * step_size,
                    t > 0 ? p.a.y + (t - 1) * step_size : p.h_start, H, own, p.a.alpha, p.a.act);
        }

        void chunk_end(const Chunk& c) {
            const index B = p.B, H = p.H, step_size = p.step_size, t0 = c.t0;
            ChunkGradients<T> g;
            g.t0 = t0;
            g.rows = c.steps * B;
            g.delta = p.delta.data();
            g.accumulate = t0 + c.steps < p.a.steps;
            // h_{t-1} is y_{t-1}; at t = 0 it is h0 (zeros when absent).
            g.split = t0 == 0 ? B : 0;
            g.rest = p.a.y + (t0 * B + g.split - B) * H;
            g.first = p.a.h0;
            chunk_gradients(p.kt, team, p.a, g, p.buffers);
            team_copy(team, p.later.data(), p.delta.data(), step_size);
            if (p.leaky) team_copy(team, p.later_grad.data(), p.state_grad.data(), step_size);
            team.barrier->wait();  // before the next chunk overwrites the deltas
            if (c.last) initial_state_grad();
        }

        // dh0 = delta_0 W_hh (+ (1 - alpha) g_0 for leaky units), no activation; a sequence of
        // length 0 passes dh_n straight to dh0 (its h_n is h0). Each member of the step loop
        // computes its block, on the weights it read there.
        void initial_state_grad() {
            if (team.me >= stepping) return;
            const index B = p.B, H = p.H;
            const Share s = share_of(B, p.panels, p.kt.mr, team.me, stepping);
            const index c0 = std::min(H, s.p0 * p.kt.nr), c1 = std::min(H, s.p1 * p.kt.nr);
            for (index r = s.m0; r < s.m1; ++r)
                for (index j = c0; j < c1; ++j) {
                    const index i = r * H + j;
                    p.a.dh0[i] = p.leaky ? (T(1) - p.a.alpha) * p.later_grad[i] : T(0);
                    if (p.a.dh_n && r >= p.active[0]) p.a.dh0[i] += p.a.dh_n[i];
                }
            GemmTask<T> last = packed_task<T>(B, H, H, p.packed_hh.data(), p.a.dh0, H);
            last.accumulate = true;
            last.A = {p.later.data(), H, 1};
            if (!p.stream)
                p.kt.gemm_block(last, s.m0, s.m1, s.p0, s.p1);
            else
                p.kt.matvec(p.packed_hh.data() + c0 * H, H, p.later.data(), p.a.dh0 + c0, c1 - c0,
                            Epilogue::none, nullptr);
        }
    };
};

}  // namespace

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

    BackwardPass<T, ElmanCell<T>> pass(a);
    run_time_loop(pass.shape(), pass);
    pass.packed_hh.publish();
    if (a.ids) token_gradients(pass.kt, a, pass.buffers);
}

template void rnn_backward(const BackwardArgs<float>&);
template void rnn_backward(const BackwardArgs<double>&);

}  // namespace rnnfast
