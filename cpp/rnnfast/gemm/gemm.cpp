#include "gemm.hpp"

#include <algorithm>

#include "rnnfast/runtime/threads.hpp"

namespace rnnfast {
namespace {

index split_point(index total, int part, int parts, index granule) {
    const index units = (total + granule - 1) / granule;
    return std::min(total, units * part / parts * granule);
}

// Rows split, every panel to each thread.
Share row_share(index M, index panels, int mr, int thread, int threads) {
    return {split_point(M, thread, threads, mr), split_point(M, thread + 1, threads, mr), 0,
            panels};
}

// C = A W^T for a few rows of A, with W (N x K) stored row-major and read in place: each row
// of C is dot products along W's rows (KernelTable::dot_rows, the streaming step's kernel).
// The packed path moves all of W twice (the pack reads it and writes the copy, the kernel
// reads the copy) for M rows of work: at M = 1 that pack was most of a call (dense 1 x 1024 x
// 1024, float32, AVX-512, Zen 4: 4.2 GFLOP/s against OpenBLAS's gemv at 29). Up to
// kDotRowsMax rows, reading W once per row still moves less (M = 2, 3, 4 at K = N = 256:
// 13-18 -> 31-41, 17-18 -> 34-41, 23-25 -> 36-40 GFLOP/s; at M = 5 the two were level). Only the
// plain product (no epilogue function) comes here.
constexpr index kDotRowsMax = 4;

template <class T>
bool runs_as_dot_rows(index M, index K, MatView<T> A, MatView<T> B, Epilogue op, const T* aux) {
    return M <= kDotRowsMax && A.cs == 1 && B.rs == 1 && B.cs == K && op == Epilogue::none &&
           aux == nullptr;
}

// Each thread takes whole multiples of nr rows of W (a multiple of dot_rows's group of one row
// per lane), so every output sums in the same order whatever the thread count.
template <class T>
void gemm_dot_rows(const KernelTable<T>& kt, index M, index N, index K, MatView<T> A, const T* W,
                   T* C, index ldc, bool accumulate, int threads, const T* bias) {
#pragma omp parallel num_threads(threads)
    {
        const int t = thread_index(), nt = team_size();
        const index j0 = split_point(N, t, nt, kt.nr), j1 = split_point(N, t + 1, nt, kt.nr);
        for (index m = 0; m < M && j1 > j0; ++m) {
            T* c = C + m * ldc;
            for (index j = j0; j < j1; ++j)
                c[j] = (accumulate ? c[j] : T(0)) + (bias ? bias[j] : T(0));
            kt.dot_rows(W + j0 * K, j1 - j0, K, A.p + m * A.rs, c + j0);
        }
    }
}

}  // namespace

Share share_of(index M, index panels, int mr, int thread, int threads) {
    if (panels >= threads)
        return {0, M, split_point(panels, thread, threads, 1),
                split_point(panels, thread + 1, threads, 1)};
    return row_share(M, panels, mr, thread, threads);
}

Share step_share_of(index M, index panels, int mr, int thread, int threads) {
    if (threads <= 1 || panels < threads) return share_of(M, panels, mr, thread, threads);
    // The busiest thread's part of the work under each split (parts are contiguous runs of
    // whole panels, or of whole granules of rows).
    const index widest_panels = (panels + threads - 1) / threads;
    index widest_rows = 0;
    for (int t = 0; t < threads; ++t)
        widest_rows = std::max(widest_rows,
                               split_point(M, t + 1, threads, mr) - split_point(M, t, threads, mr));
    // Rows only where they balance clearly better: the columns keep each thread's slice of
    // the weights in its own cache (weight-stationary), which rows give up.
    if (10 * widest_rows * panels < 9 * widest_panels * M)
        return row_share(M, panels, mr, thread, threads);
    return share_of(M, panels, mr, thread, threads);
}

template <class T>
Packed<T> pack_whole(const KernelTable<T>& kt, MatView<T> B, index K, index N, int threads) {
    Packed<T> packed(static_cast<size_t>(kt.packed_b_size(K, N)));
    const index panels = panel_count(N, kt.nr);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (index p = 0; p < panels; ++p)
        kt.pack_b(B, K, N, p, p + 1, packed.data());
    return packed;
}

template <class T>
void run_task(const KernelTable<T>& kt, const GemmTask<T>& task, int threads) {
    const index panels = panel_count(task.N, kt.nr);
    if (task.M == 0 || panels == 0) return;
#pragma omp parallel num_threads(threads)
    {
        const Share s = share_of(task.M, panels, kt.mr, thread_index(), team_size());
        kt.gemm_block(task, s.m0, s.m1, s.p0, s.p1);
    }
}

template <class T>
void gemm(const KernelTable<T>& kt, index M, index N, index K, MatView<T> A, MatView<T> B, T* C,
          index ldc, bool accumulate, int threads, const T* bias, Epilogue op, const T* aux,
          index ldaux) {
    if (M == 0 || N == 0) return;
    if (runs_as_dot_rows(M, K, A, B, op, aux))
        return gemm_dot_rows(kt, M, N, K, A, B.p, C, ldc, accumulate, threads, bias);
    // B is packed one block of kc rows x nc columns at a time (the kernels' own k-block, so each
    // packed block is one pass of gemm_block, and a core's share of L3), never all of it.
    const GemmBlocking bk = kt.blocking();
    const index nc = std::min(N, bk.nc);
    Packed<T> packed(static_cast<size_t>(kt.packed_b_size(std::min(K, bk.kc), nc)));
    for (index j0 = 0; j0 < N; j0 += nc) {
        const index n = std::min(nc, N - j0);
        const index panels = panel_count(n, kt.nr);
        index k0 = 0;
        do {  // at least once: K == 0 still runs the epilogue (C = bias or 0, then op)
            const index kc = std::min(K - k0, bk.kc);
            const bool last = k0 + kc >= K;
            GemmTask<T> task;
            task.M = M;
            task.N = n;
            task.K = kc;
            task.A = {A.p + k0 * A.cs, A.rs, A.cs};
            task.packed_b = packed.data();
            task.C = C + j0;
            task.ldc = ldc;
            task.accumulate = accumulate || k0 > 0;
            task.bias = k0 == 0 && bias ? bias + j0 : nullptr;
            task.op = last ? op : Epilogue::none;
            task.aux = aux ? aux + j0 : nullptr;
            task.ldaux = ldaux;
            const MatView<T> Bk{B.p + k0 * B.rs + j0 * B.cs, B.rs, B.cs};
#pragma omp parallel num_threads(threads)
            {
                const int t = thread_index(), nt = team_size();
                const index p0 = split_point(panels, t, nt, 1);
                const index p1 = split_point(panels, t + 1, nt, 1);
                kt.pack_b(Bk, kc, n, p0, p1, packed.data());
#pragma omp barrier
                const Share s = share_of(M, panels, kt.mr, t, nt);
                kt.gemm_block(task, s.m0, s.m1, s.p0, s.p1);
            }
            k0 += kc;
        } while (k0 < K);
    }
}

#define RNNFAST_INSTANTIATE(T)                                                                 \
    template Packed<T> pack_whole(const KernelTable<T>&, MatView<T>, index, index, int);       \
    template void run_task(const KernelTable<T>&, const GemmTask<T>&, int);                    \
    template void gemm(const KernelTable<T>&, index, index, index, MatView<T>, MatView<T>, T*, \
                       index, bool, int, const T*, Epilogue, const T*, index);
RNNFAST_INSTANTIATE(float)
RNNFAST_INSTANTIATE(double)
#undef RNNFAST_INSTANTIATE

}  // namespace rnnfast
