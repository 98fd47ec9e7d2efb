#include "qproducts.hpp"

#include "rnnfast/runtime/threads.hpp"

namespace rnnfast::quantized {
namespace {

constexpr index kDenseRows = 1024;  // rows of a dense product per pass (bounds the buffers)
// Rows of one block of a thread's share in project(): its raw products stay small (and in
// cache) whatever M is.
constexpr index kBlockRows = 32;

int product_threads(index M, const PackedMatrix& w, Sync sync) {
    return threads_for(2.0 * double(M) * double(w.rows) * double(w.cols), std::max(M, w.panels()),
                       sync);
}

}  // namespace

void project(Prepared& a, const float* x, index M, const float* add, index add_rs, float* dst,
             index ldd) {
    const PackedMatrix& w = *a.w;
    if (M == 0 || w.rows == 0) return;
    const int threads = product_threads(M, w, Sync::fork_join);
#pragma omp parallel num_threads(threads)
    {
        const int ti = thread_index(), nt = team_size();
        a.prepare(x, w.cols, M * ti / nt, M * (ti + 1) / nt, false);
#pragma omp barrier
        const Share s = share_of(M, w.panels(), kShareRows, ti, nt);
        Products mine(w, std::min(kBlockRows, M));
        for (index r0 = s.m0; r0 < s.m1 && s.p0 < s.p1; r0 += kBlockRows) {
            const index r1 = std::min(s.m1, r0 + kBlockRows);
            mine.compute(a, r0, r1, s.p0, s.p1);
            mine.finish(a, r0, add, add_rs, dst, ldd,
                        columns_of(Share{r0, r1, s.p0, s.p1}, w.rows));
        }
    }
}

void matmul_int32(const std::int8_t* qa, index M, const PackedMatrix& w, std::int32_t* acc) {
    if (M == 0 || w.rows == 0) return;
    Prepared a(w, active_kernels(Kind::int8), M);
    for (index i = 0; i < M; ++i) {
        std::memcpy(a.q.data() + i * a.lda, qa + i * w.cols, static_cast<size_t>(w.cols));
        std::memset(a.q.data() + i * a.lda + w.cols, 0, static_cast<size_t>(a.lda - w.cols));
    }
    Products out(w, M);
    const int threads = product_threads(M, w, Sync::fork_join);
#pragma omp parallel num_threads(threads)
    {
        const Share s = share_of(M, w.panels(), kShareRows, thread_index(), team_size());
        Int8Task t{a.q.data() + s.m0 * a.lda, a.lda, &w, out.acc.data() + s.m0 * out.ldc, out.ldc};
        if (s.m0 < s.m1 && s.p0 < s.p1) a.k->int8_block(t, 0, s.m1 - s.m0, s.p0, s.p1);
    }
    for (index i = 0; i < M; ++i)
        std::memcpy(acc + i * w.rows, out.acc.data() + i * out.ldc,
                    sizeof(std::int32_t) * static_cast<size_t>(w.rows));
}

void dense(const float* x, index M, const PackedMatrix& w, const float* bias, float* y) {
    Prepared a(w, active_kernels(w.kind), std::min(M, kDenseRows));
    for (index m0 = 0; m0 < M; m0 += kDenseRows) {
        const index rows = std::min(kDenseRows, M - m0);
        project(a, x + m0 * w.cols, rows, bias, 0, y + m0 * w.rows, w.rows);
    }
}

}  // namespace rnnfast::quantized
