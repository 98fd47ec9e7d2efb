#include <algorithm>
#include <cstring>
#include <vector>

#include "backward_parts.hpp"
#include "dispatch.hpp"
#include "elementwise.hpp"
#include "embedding.hpp"
#include "gemm.hpp"
#include "rnn.hpp"
#include "step_barrier.hpp"
#include "threads.hpp"

namespace rnnfast {

// delta_t = (dy_t + delta_{t+1} W_hh) * act'(h_t), found by a backward loop whose only
// sequential work is that product; the weight and input gradients are GEMMs over many rows.
// Time is walked back in chunks of steps: each chunk's deltas are found, then turned into
// gradients at once, so the deltas need a chunk of memory, not all of T.
template <class T>
void rnn_backward(const BackwardArgs<T>& a) {
    const index T_ = a.steps, B = a.batch, D = a.input_size, H = a.hidden_size;
    const index step_size = B * H;
    const KernelTable<T>& kt = kernels<T>();
    const index panels = panel_count(H, kt.nr);
    const int threads =
        threads_for(2.0 * double(B) * double(H) * double(H), std::max(panels, B), Sync::barrier);

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

    const index chunk = std::min(T_, std::max<index>(1, kChunkRows / B));
    const int big_threads =
        threads_for(2.0 * double(chunk * B) * double(H) * double(std::max(D, H)),
                    std::max(panels, chunk * B), Sync::fork_join);
    // B(k = j, n = i) = W_hh[j, i]: the recurrent term delta_t W_hh.
    const std::vector<T> packed_hh = pack_whole(kt, MatView<T>{a.w_hh, H, 1}, H, H, threads);
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
    bool have_later = false;
    bool first_chunk = true;
    const std::vector<index> active = active_rows(a.lengths, T_, B);
    // Token input: the deltas summed per id, (vocab, H); the input gradients come from it.
    std::vector<T> token_delta(a.ids ? static_cast<size_t>(a.vocab * H) : 0);

    for (index t1 = T_; t1 > 0; t1 -= chunk) {
        const index t0 = std::max<index>(0, t1 - chunk), steps = t1 - t0;
        // Start from dy (the direct gradient of every h_t), zero at padded steps, plus dh_n at
        // each sequence's own last step (rows [active[t+1], active[t]) end at step t).
        copy_or_zero(gather, a.dy ? a.dy + t0 * step_size : nullptr, steps * step_size);
        if (leaky) copy_or_zero<T>(delta.data(), nullptr, steps * step_size);
        for (index i = 0; i < steps; ++i) {
            const index t = t0 + i, rows = active[static_cast<size_t>(t)];
            T* g = gather + i * step_size;
            std::memset(g + rows * H, 0, sizeof(T) * static_cast<size_t>((B - rows) * H));
            if (a.dh_n)
                for (index r = active[static_cast<size_t>(t + 1)]; r < rows; ++r)
                    for (index j = 0; j < H; ++j)
                        g[r * H + j] += a.dh_n[r * H + j];
        }

        StepBarrier barrier;
#pragma omp parallel num_threads(threads)
        {
#pragma omp single
            barrier.reset(team_size());
            GemmTask<T> step;
            step.M = B;
            step.N = H;
            step.packed_b = packed_hh.data();
            step.ldc = H;
            step.ldaux = H;
            step.accumulate = true;
            step.op = leaky ? Epilogue::none : grad;
            for (index i = steps - 1; i >= 0; --i) {
                const index t = t0 + i;
                // Only the sequences still running at step t: padded rows stay zero.
                const Share s = share_of(active[static_cast<size_t>(t)], panels, kt.mr,
                                         thread_index(), team_size());
                const Block own{s.m0, s.m1, std::min(H, s.p0 * kt.nr), std::min(H, s.p1 * kt.nr)};
                const T* next = i + 1 < steps ? delta.data() + (i + 1) * step_size
                                              : (have_later ? later.data() : nullptr);
                T* g = gather + i * step_size;
                if (leaky) {
                    const T* g_next = i + 1 < steps ? state_grad.data() + (i + 1) * step_size
                                                    : (have_later ? later_grad.data() : nullptr);
                    if (g_next) add_scaled(g, g_next, H, own, T(1) - a.alpha);
                }
                // The very last step has no recurrent term (K = 0: the epilogue alone).
                step.K = next ? H : 0;
                step.A = {next, H, 1};
                step.C = g;
                step.aux = a.y + t * step_size;
                kt.gemm_block(step, s.m0, s.m1, s.p0, s.p1);
                if (leaky)
                    leaky_delta(delta.data() + i * step_size, g, a.y + t * step_size,
                                t > 0 ? a.y + (t - 1) * step_size : h_start, H, own, a.alpha,
                                a.act);
                barrier.wait();
            }
        }

        const index rows = steps * B;
        const T* dl = delta.data();
        const bool acc = !first_chunk;
        if (a.ids)  // padded steps' deltas are zero: their ids add nothing
            embedding_backward(a.ids + t0 * B, rows, dl, H, token_delta.data());
        else  // dW_ih (+)= delta^T X over the chunk's rows.
            gemm(kt, H, D, rows, MatView<T>{dl, 1, H}, MatView<T>{a.x + t0 * B * D, D, 1}, a.dw_ih,
                 D, acc, big_threads);
        // dW_hh (+)= sum_t delta_t^T h_{t-1}; at t = 0, h_{-1} is h0 (zeros when absent).
        const index skip = t0 == 0 ? B : 0;
        gemm(kt, H, H, rows - skip, MatView<T>{dl + skip * H, 1, H},
             MatView<T>{a.y + (t0 * B + skip - B) * H, H, 1}, a.dw_hh, H, acc, big_threads);
        if (t0 == 0 && a.h0)
            gemm(kt, H, H, B, MatView<T>{dl, 1, H}, MatView<T>{a.h0, H, 1}, a.dw_hh, H, true,
                 big_threads);
        // dX = delta W_ih for the chunk's rows (a sixth of the step's FLOPs when D = H).
        if (!a.ids && a.dx)
            gemm(kt, rows, D, H, MatView<T>{dl, H, 1}, MatView<T>{a.w_ih, D, 1}, a.dx + t0 * B * D,
                 D, false, big_threads);
        add_column_sums(dl, rows, H, a.db, acc, big_threads);

        std::memcpy(later.data(), dl, sizeof(T) * static_cast<size_t>(step_size));
        if (leaky)
            std::memcpy(later_grad.data(), state_grad.data(),
                        sizeof(T) * static_cast<size_t>(step_size));
        have_later = true;
        first_chunk = false;
    }

    if (a.ids) {
        // With S the per-id delta sums (vocab x H): dW_ih = S^T E and d(table) = S W_ih.
        const index V = a.vocab;
        const int vocab_threads = threads_for(2.0 * double(V) * double(H) * double(D),
                                              std::max(panels, V), Sync::fork_join);
        gemm(kt, H, D, V, MatView<T>{token_delta.data(), 1, H}, MatView<T>{a.x, D, 1}, a.dw_ih, D,
             false, vocab_threads);
        if (a.dx)
            gemm(kt, V, D, H, MatView<T>{token_delta.data(), H, 1}, MatView<T>{a.w_ih, D, 1}, a.dx,
                 D, false, vocab_threads);
    }

    // dh0 = delta_0 W_hh (+ (1 - alpha) g_0 for leaky units), no activation; a sequence of
    // length 0 passes dh_n straight to dh0 (its h_n is h0).
    for (index i = 0; i < step_size; ++i)
        a.dh0[i] = leaky ? (T(1) - a.alpha) * later_grad[i] : T(0);
    if (a.dh_n)
        for (index i = active[0] * H; i < step_size; ++i)
            a.dh0[i] += a.dh_n[i];
    GemmTask<T> last;
    last.accumulate = true;
    last.M = B;
    last.N = H;
    last.K = H;
    last.A = {later.data(), H, 1};
    last.packed_b = packed_hh.data();
    last.C = a.dh0;
    last.ldc = H;
    run_task(kt, last, threads);
}

template void rnn_backward(const BackwardArgs<float>&);
template void rnn_backward(const BackwardArgs<double>&);

}  // namespace rnnfast
