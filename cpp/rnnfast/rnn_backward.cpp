#include <algorithm>
#include <cstring>
#include <vector>

#include "dispatch.hpp"
#include "gemm.hpp"
#include "rnn.hpp"
#include "threads.hpp"

namespace rnnfast {
namespace {

template <class T>
void copy_or_zero(T* dst, const T* src, index n) {
    if (n <= 0) return;
    if (src)
        std::memcpy(dst, src, sizeof(T) * static_cast<size_t>(n));
    else
        std::memset(dst, 0, sizeof(T) * static_cast<size_t>(n));
}

// db[j] = sum over rows of delta[r, j]; columns split between threads, rows summed in order,
// so the result does not depend on the thread count.
template <class T>
void column_sums(const T* delta, index rows, index cols, T* db, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (index j0 = 0; j0 < cols; j0 += 64) {
        const index j1 = std::min(cols, j0 + 64);
        for (index j = j0; j < j1; ++j) db[j] = T(0);
        for (index r = 0; r < rows; ++r)
            for (index j = j0; j < j1; ++j) db[j] += delta[r * cols + j];
    }
}

}  // namespace

// delta_t = (dy_t + dh_{t+1}-contribution) * act'(h_t), found by a backward loop whose only
// sequential work is dh_{t-1} = delta_t W_hh; everything else is a GEMM over all T*B rows.
template <class T>
void rnn_backward(const BackwardArgs<T>& a) {
    const index T_ = a.steps, B = a.batch, D = a.input_size, H = a.hidden_size;
    const index step_size = B * H;
    const KernelTable<T>& kt = kernels<T>();
    const index panels = panel_count(H, kt.nr);
    const int threads = threads_for(2.0 * double(B) * double(H) * double(H), std::max(panels, B));
    const int big_threads = threads_for(2.0 * double(T_ * B) * double(H) * double(std::max(D, H)),
                                        std::max(panels, T_ * B));

    if (T_ == 0) {  // h_n is h0: its gradient passes straight through
        copy_or_zero(a.dh0, a.dh_n, step_size);
        std::memset(a.dw_ih, 0, sizeof(T) * static_cast<size_t>(H * D));
        std::memset(a.dw_hh, 0, sizeof(T) * static_cast<size_t>(H * H));
        std::memset(a.db, 0, sizeof(T) * static_cast<size_t>(H));
        return;
    }

    // delta starts as dy (the direct gradient of every h_t), plus dh_n at the last step.
    std::vector<T> delta(static_cast<size_t>(T_ * step_size));
    copy_or_zero(delta.data(), a.dy, T_ * step_size);
    T* last = delta.data() + (T_ - 1) * step_size;
    if (a.dh_n)
        for (index i = 0; i < step_size; ++i) last[i] += a.dh_n[i];

    // B(k = j, n = i) = W_hh[j, i]: dh_prev = delta_t W_hh.
    const std::vector<T> packed_hh = pack_whole(kt, MatView<T>{a.w_hh, H, 1}, H, H, threads);
    const Epilogue grad = gradient_epilogue(a.act);

    if (step_size > 0) {
#pragma omp parallel num_threads(threads)
        {
            const Share s = share_of(B, panels, kt.mr, thread_index(), team_size());
            GemmTask<T> step;
            step.M = B;
            step.N = H;
            step.packed_b = packed_hh.data();
            step.ldc = H;
            step.ldaux = H;
            step.accumulate = true;
            step.op = grad;
            // Last step: no recurrent term, only delta *= act'(h_T) (a GEMM with K = 0).
            step.K = 0;
            step.A = {nullptr, 0, 0};
            step.C = last;
            step.aux = a.y + (T_ - 1) * step_size;
            kt.gemm_block(step, s.m0, s.m1, s.p0, s.p1);
#pragma omp barrier
            step.K = H;
            for (index t = T_ - 2; t >= 0; --t) {
                step.A = {delta.data() + (t + 1) * step_size, H, 1};
                step.C = delta.data() + t * step_size;
                step.aux = a.y + t * step_size;
                kt.gemm_block(step, s.m0, s.m1, s.p0, s.p1);
#pragma omp barrier
            }
            // dh0 = delta_0 W_hh, no activation.
            step.A = {delta.data(), H, 1};
            step.C = a.dh0;
            step.accumulate = false;
            step.op = Epilogue::none;
            step.aux = nullptr;
            kt.gemm_block(step, s.m0, s.m1, s.p0, s.p1);
        }
    }

    const index rows = T_ * B;
    const T* dl = delta.data();
    // dW_ih = delta^T X (H x D), over all T*B rows at once.
    gemm(kt, H, D, rows, MatView<T>{dl, 1, H}, MatView<T>{a.x, D, 1}, a.dw_ih, D, false,
         big_threads);
    // dW_hh = sum_t delta_t^T h_{t-1}: rows 1.. pair with y[0..T-2], row block 0 with h0.
    gemm(kt, H, H, rows - B, MatView<T>{dl + step_size, 1, H}, MatView<T>{a.y, H, 1}, a.dw_hh, H,
         false, big_threads);
    if (a.h0)
        gemm(kt, H, H, B, MatView<T>{dl, 1, H}, MatView<T>{a.h0, H, 1}, a.dw_hh, H, true,
             big_threads);
    // dX = delta W_ih (T*B x D).
    gemm(kt, rows, D, H, MatView<T>{dl, H, 1}, MatView<T>{a.w_ih, D, 1}, a.dx, D, false,
         big_threads);
    column_sums(dl, rows, H, a.db, big_threads);
}

template void rnn_backward(const BackwardArgs<float>&);
template void rnn_backward(const BackwardArgs<double>&);

}  // namespace rnnfast
