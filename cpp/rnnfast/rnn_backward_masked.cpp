#include <algorithm>
#include <cstring>
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
    const int threads = threads_for(2.0 * double(B) * double(H) * double(H), std::max(panels, B),
                                    Sync::barrier);
    const StepMasks masks = step_masks(a.keep, a.lengths, a.zero_output_for_mask, T_, B);
    const std::vector<index> source = state_sources(masks, T_, B);

    const index chunk = std::min(T_, std::max<index>(1, kChunkRows / B));
    const int big_threads = threads_for(2.0 * double(chunk * B) * double(H) * double(std::max(D, H)),
                                        std::max(panels, chunk * B), Sync::fork_join);
    // B(k = j, n = i) = W_hh[j, i]: rho = delta W_hh.
    const std::vector<T> packed_hh = pack_whole(kt, MatView<T>{a.w_hh, H, 1}, H, H, threads);
    const size_t chunk_size = static_cast<size_t>(chunk * step_size);
    std::vector<T> state_grad(chunk_size), delta(chunk_size), prev(chunk_size);
    std::vector<T> rho(static_cast<size_t>(step_size));
    // delta and g of the step after the chunk (the first step of the chunk walked before).
    std::vector<T> later(static_cast<size_t>(step_size)), later_grad(static_cast<size_t>(step_size));
    std::vector<T> zeros(a.h0 ? 0 : static_cast<size_t>(step_size));
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
            back.C = rho.data();
            back.ldc = H;
            // Every row at every step, so a thread's block is the same throughout: what it
            // reads of g_{t+1} and writes of rho it wrote itself (or before the barrier).
            const Share s = share_of(B, panels, kt.mr, thread_index(), team_size());
            const Block own{s.m0, s.m1, std::min(H, s.p0 * kt.nr), std::min(H, s.p1 * kt.nr)};
            for (index i = steps - 1; i >= 0; --i) {
                const index t = t0 + i;
                MaskedGradStep<T> st;
                st.g = state_grad.data() + i * step_size;
                st.delta = delta.data() + i * step_size;
                st.prev = prev.data() + i * step_size;
                st.h = a.y + t * step_size;
                st.keep_t = masks.keep.data() + t * B;
                st.mask = a.recurrent_mask;
                st.alpha = a.alpha;
                st.act = a.act;
                const bool last = t + 1 == T_;
                st.rho = last ? nullptr : rho.data();
                st.keep_next = last ? nullptr : masks.keep.data() + (t + 1) * B;
                st.g_next = last ? nullptr
                            : i + 1 < steps ? state_grad.data() + (i + 1) * step_size
                                            : later_grad.data();
                const T* next_delta = last ? nullptr
                                      : i + 1 < steps ? delta.data() + (i + 1) * step_size
                                                      : later.data();
                direct_state_grad(st.g, a.dy ? a.dy + t * step_size : nullptr,
                                  masks.out.data() + t * B, last ? a.dh_n : nullptr, H, own);
                gather_states(st.prev, a.y, t > 0 ? source.data() + (t - 1) * B : nullptr,
                              h_start, B, H, own);
                if (next_delta) {
                    back.A = {next_delta, H, 1};
                    kt.gemm_block(back, s.m0, s.m1, s.p0, s.p1);
                }
                masked_grad_step(st, H, own);
                barrier.wait();
            }
        }

        const index rows = steps * B;
        const T* dl = delta.data();
        const bool acc = have_later;
        if (a.ids)  // skipped steps' deltas are zero: their ids add nothing
            embedding_backward(a.ids + t0 * B, rows, dl, H, token_delta.data());
        else  // dW_ih (+)= delta^T X over the chunk's rows.
            gemm(kt, H, D, rows, MatView<T>{dl, 1, H}, MatView<T>{a.x + t0 * B * D, D, 1},
                 a.dw_ih, D, acc, big_threads);
        // dW_hh (+)= sum_t delta_t^T (h_{t-1} * mask): prev holds what W_hh read.
        gemm(kt, H, H, rows, MatView<T>{dl, 1, H}, MatView<T>{prev.data(), H, 1}, a.dw_hh, H,
             acc, big_threads);
        if (!a.ids)  // dX = delta W_ih for the chunk's rows.
            gemm(kt, rows, D, H, MatView<T>{dl, H, 1}, MatView<T>{a.w_ih, D, 1},
                 a.dx + t0 * B * D, D, false, big_threads);
        add_column_sums(dl, rows, H, a.db, acc, big_threads);
        std::memcpy(later.data(), dl, sizeof(T) * static_cast<size_t>(step_size));
        std::memcpy(later_grad.data(), state_grad.data(), sizeof(T) * static_cast<size_t>(step_size));
        have_later = true;
    }

    if (a.ids) {
        // With S the per-id delta sums (vocab x H): dW_ih = S^T E and d(table) = S W_ih.
        const index V = a.vocab;
        const int vocab_threads = threads_for(2.0 * double(V) * double(H) * double(D),
                                              std::max(panels, V), Sync::fork_join);
        gemm(kt, H, D, V, MatView<T>{token_delta.data(), 1, H}, MatView<T>{a.x, D, 1}, a.dw_ih,
             D, false, vocab_threads);
        gemm(kt, V, D, H, MatView<T>{token_delta.data(), H, 1}, MatView<T>{a.w_ih, D, 1}, a.dx,
             D, false, vocab_threads);
    }

    // dh0: what step 0 sends back to h0, by the same rule as every other step.
    GemmTask<T> first;
    first.M = B;
    first.N = H;
    first.K = H;
    first.A = {later.data(), H, 1};
    first.packed_b = packed_hh.data();
    first.C = rho.data();
    first.ldc = H;
    run_task(kt, first, threads);
    state_grad_before(a.dh0, later_grad.data(), rho.data(), masks.keep.data(), a.recurrent_mask,
                      a.alpha, B, H);
}

template void rnn_backward_masked(const BackwardArgs<float>&);
template void rnn_backward_masked(const BackwardArgs<double>&);

}  // namespace rnnfast
