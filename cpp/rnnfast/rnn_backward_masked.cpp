#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backward_parts.hpp"
#include "dispatch.hpp"
#include "embedding.hpp"
#include "gemm.hpp"
#include "masked_step.hpp"
#include "rnn.hpp"
#include "step_barrier.hpp"
#include "step_masks.hpp"
#include "threads.hpp"

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
    const int threads =
        threads_for(2.0 * double(B) * double(H) * double(H), std::max(panels, B), Sync::barrier);
    const StepMasks masks = step_masks(a.keep, a.lengths, a.zero_output_for_mask, T_, B);
    const std::vector<index> source = state_sources(masks, T_, B);

    const index chunk = std::min(T_, std::max<index>(1, kChunkRows / B));
    const int big_threads =
        threads_for(2.0 * double(chunk * B) * double(H) * double(std::max(D, H)),
                    std::max(panels, chunk * B), Sync::fork_join);
    // B(k = j, n = i) = W_hh[j, i]: rho = delta W_hh.
    const std::vector<T> packed_hh = pack_whole(kt, MatView<T>{a.w_hh, H, 1}, H, H, threads);
    // Scratch that every step writes in full before anything reads it: not zeroed.
    const index chunk_size = chunk * step_size;
    const std::unique_ptr<T[]> delta = scratch<T>(chunk_size), prev = scratch<T>(chunk_size);
    // g_t is read only by step t - 1: two slots, by the step's parity.
    const std::unique_ptr<T[]> state_grad = scratch<T>(2 * step_size), rho = scratch<T>(step_size);
    // delta and g of the step after the chunk (the first step of the chunk walked before).
    const std::unique_ptr<T[]> later = scratch<T>(step_size), later_grad = scratch<T>(step_size);
    const std::vector<T> zeros(static_cast<size_t>(a.h0 ? H : step_size), T(0));
    const T* h_start = a.h0 ? a.h0 : zeros.data();
    std::vector<T> token_delta(a.ids ? static_cast<size_t>(a.vocab * H) : 0);
    bool have_later = false;

    for (index t1 = T_; t1 > 0; t1 -= chunk) {
        const index t0 = std::max<index>(0, t1 - chunk), steps = t1 - t0;
        StepBarrier barrier;
#pragma omp parallel num_threads(threads)
        {
#pragma omp single
            barrier.reset(team_size());
            GemmTask<T> back;
            back.M = B;
            back.N = H;
            back.K = H;
            back.packed_b = packed_hh.data();
            back.C = rho.get();
            back.ldc = H;
            // Every row at every step, so a thread's block is the same throughout: what it
            // reads of g_{t+1} and rho it wrote itself.
            const Share s = share_of(B, panels, kt.mr, thread_index(), team_size());
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
                    back.A = {i + 1 < steps ? delta.get() + (i + 1) * step_size : later.get(), H,
                              1};
                    kt.gemm_block(back, s.m0, s.m1, s.p0, s.p1);
                }
                masked_grad_step(st, H, own);
                barrier.wait();
            }
        }

        const index rows = steps * B;
        const T* dl = delta.get();
        const bool acc = have_later;
        if (a.ids)  // skipped steps' deltas are zero: their ids add nothing
            embedding_backward(a.ids + t0 * B, rows, dl, H, token_delta.data());
        else  // dW_ih (+)= delta^T X over the chunk's rows.
            gemm(kt, H, D, rows, MatView<T>{dl, 1, H}, MatView<T>{a.x + t0 * B * D, D, 1}, a.dw_ih,
                 D, acc, big_threads);
        // dW_hh (+)= sum_t delta_t^T (h_{t-1} * mask): prev holds what W_hh read.
        gemm(kt, H, H, rows, MatView<T>{dl, 1, H}, MatView<T>{prev.get(), H, 1}, a.dw_hh, H, acc,
             big_threads);
        if (!a.ids && a.dx)  // dX = delta W_ih for the chunk's rows.
            gemm(kt, rows, D, H, MatView<T>{dl, H, 1}, MatView<T>{a.w_ih, D, 1}, a.dx + t0 * B * D,
                 D, false, big_threads);
        add_column_sums(dl, rows, H, a.db, acc, big_threads);
        std::memcpy(later.get(), dl, sizeof(T) * static_cast<size_t>(step_size));
        std::memcpy(later_grad.get(), state_grad.get(), sizeof(T) * static_cast<size_t>(step_size));
        have_later = true;
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

    // dh0: what step 0 sends back to h0, by the same rule as every other step.
    GemmTask<T> first;
    first.M = B;
    first.N = H;
    first.K = H;
    first.A = {later.get(), H, 1};
    first.packed_b = packed_hh.data();
    first.C = rho.get();
    first.ldc = H;
    run_task(kt, first, threads);
    state_grad_before(a.dh0, later_grad.get(), rho.get(), masks.keep.data(), a.recurrent_mask,
                      a.alpha, B, H);
}

template void rnn_backward_masked(const BackwardArgs<float>&);
template void rnn_backward_masked(const BackwardArgs<double>&);

}  // namespace rnnfast
