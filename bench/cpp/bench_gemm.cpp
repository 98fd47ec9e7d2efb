// rnnfast's GEMM beside the machine's BLAS (OpenBLAS's cblas_sgemm / cblas_dgemm), on the
// shapes the recurrent layer runs, float32 and float64, on the active ISA (RNNFAST_ISA picks a
// lower one). OpenBLAS is linked into this benchmark only, never into the package.
//
// Build: cmake -S . -B build-bench -DRNNFAST_BUILD_BENCHMARKS=ON && cmake --build build-bench
// --target rnnfast_bench_gemm; run: ./build-bench/rnnfast_bench_gemm (threads:
// RNNFAST_BENCH_THREADS, 1 by default, for both libraries).
//
// Each iteration times one batch of rnnfast calls and one batch of BLAS calls, alternating, so
// both see the same machine state; the counters are medians over the iterations:
//   rnnfast_GFLOPS, blas_GFLOPS, ratio = rnnfast rate / BLAS rate (>= 1: rnnfast is faster).
// Kinds (the first argument):
//   0 step:       C (M x N) += A (M x K) W^T, W (N x K) packed once (the recurrent step: M = B,
//                 K = N = H; the BLAS call is what torch's per-step h @ W_hh^T does).
//   1 projection: C = X (M x K) W^T with W (N x K) packed in the call (M = T*B, K = D, N = H).
//   2 gradient:   C (M x N) += D^T X, D (K x M) and X (K x N) row-major (dW = delta^T x over
//                 K = T*B rows: M = H, N = D or H).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"

namespace {

using rnnfast::index;

// Seconds on the clock the rows use: with one thread, this thread's CPU time, which leaves out
// the time the thread waits for a core on a busy machine (both libraries then run in the calling
// thread); with more, the wall clock.
double now(bool cpu) {
    if (!cpu)
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

int bench_threads() {
    const char* env = std::getenv("RNNFAST_BENCH_THREADS");
    return env && std::atoi(env) > 0 ? std::atoi(env) : 1;
}

template <class T>
std::vector<T> random_vector(index n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    std::vector<T> v(static_cast<size_t>(n));
    for (auto& e : v)
        e = static_cast<T>(dist(gen));
    return v;
}

// The BLAS call per dtype: row-major C = alpha op(A) op(B) + beta C.
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, index M, index N, index K, const float* A,
               index lda, const float* B, index ldb, float beta, float* C, index ldc) {
    cblas_sgemm(CblasRowMajor, ta, tb, int(M), int(N), int(K), 1.0f, A, int(lda), B, int(ldb), beta,
                C, int(ldc));
}
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, index M, index N, index K, const double* A,
               index lda, const double* B, index ldb, double beta, double* C, index ldc) {
    cblas_dgemm(CblasRowMajor, ta, tb, int(M), int(N), int(K), 1.0, A, int(lda), B, int(ldb), beta,
                C, int(ldc));
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

template <class T>
void BM_GemmVsBlas(benchmark::State& state) {
    const int kind = int(state.range(0));
    const index M = state.range(1), K = state.range(2), N = state.range(3);
    const int threads = bench_threads();
    rnnfast::set_num_threads(threads);
    openblas_set_num_threads(threads);
    const auto& kt = rnnfast::kernels<T>();
    // kind 2 reads its A as a K x M matrix (the deltas), the others as M x K; the same buffer.
    const auto a = random_vector<T>(M * K, 1);
    const auto b = random_vector<T>(K * N, 2);  // W (N x K) for kinds 0-1, X (K x N) for 2
    std::vector<T> c(static_cast<size_t>(M * N), T(0)), c_blas = c;
    std::vector<T> packed;
    rnnfast::GemmTask<T> task;
    if (kind == 0) {
        packed = rnnfast::pack_whole(kt, rnnfast::MatView<T>{b.data(), 1, K}, K, N, 1);
        task.M = M;
        task.N = N;
        task.K = K;
        task.A = {a.data(), K, 1};
        task.packed_b = packed.data();
        task.C = c.data();
        task.ldc = N;
        task.accumulate = true;
    }
    const index panels = rnnfast::panel_count(N, kt.nr);
    auto run_rnnfast = [&] {
        if (kind == 0) {
            if (threads == 1)
                kt.gemm_block(task, 0, M, 0, panels);
            else
                rnnfast::run_task(kt, task, threads);
        } else if (kind == 1) {
            rnnfast::gemm(kt, M, N, K, rnnfast::MatView<T>{a.data(), K, 1},
                          rnnfast::MatView<T>{b.data(), 1, K}, c.data(), N, false, threads);
        } else {
            rnnfast::gemm(kt, M, N, K, rnnfast::MatView<T>{a.data(), 1, M},
                          rnnfast::MatView<T>{b.data(), N, 1}, c.data(), N, true, threads);
        }
    };
    auto run_blas = [&] {
        if (kind == 0)
            blas_gemm(CblasNoTrans, CblasTrans, M, N, K, a.data(), K, b.data(), K, T(1),
                      c_blas.data(), N);
        else if (kind == 1)
            blas_gemm(CblasNoTrans, CblasTrans, M, N, K, a.data(), K, b.data(), K, T(0),
                      c_blas.data(), N);
        else
            blas_gemm(CblasTrans, CblasNoTrans, M, N, K, a.data(), M, b.data(), N, T(1),
                      c_blas.data(), N);
    };
    // A batch of calls long enough (~4 MFLOP) for the clock; one warm-up call of each first.
    const double flops = 2.0 * double(M) * double(N) * double(K);
    const int reps = std::max(1, int(4e6 / flops));
    run_rnnfast();
    run_blas();
    std::vector<double> ours, theirs;
    const bool cpu = threads == 1;
    for (auto _ : state) {
        const double t0 = now(cpu);
        for (int r = 0; r < reps; ++r)
            run_rnnfast();
        const double t1 = now(cpu);
        for (int r = 0; r < reps; ++r)
            run_blas();
        const double t2 = now(cpu);
        benchmark::DoNotOptimize(c.data());
        benchmark::DoNotOptimize(c_blas.data());
        const double mine = t1 - t0;
        ours.push_back(mine / reps);
        theirs.push_back((t2 - t1) / reps);
        state.SetIterationTime(mine);  // the batch: Google Benchmark's own time is per batch
    }
    const double m_ours = median(ours), m_theirs = median(theirs);
    state.counters["rnnfast_GFLOPS"] = flops / m_ours * 1e-9;
    state.counters["blas_GFLOPS"] = flops / m_theirs * 1e-9;
    state.counters["ratio"] = m_theirs / m_ours;
    state.SetLabel(std::string(kt.isa) + (kind == 0 ? " step" : kind == 1 ? " proj" : " grad"));
}

// The recurrence: M = B in {1, 8, 16, 32, 64, 128}, K = N = H in {64, ..., 2048}.
void step_shapes(benchmark::internal::Benchmark* b) {
    for (index m : {1, 8, 16, 32, 64, 128})
        for (index h : {64, 128, 256, 512, 1024, 2048})
            b->Args({0, m, h, h});
}
// Projections (M = T*B, K = D, N = H) and gradients (M = H, K = T*B, N = D or H) of the
// bench.peers.compare's grid rows 50x64x128x256, 25x64x1024x1024, 50x16x1760x1760, 50x32x512x512.
void big_shapes(benchmark::internal::Benchmark* b) {
    for (auto s : {std::vector<index>{3200, 128, 256},
                   {1600, 512, 512},
                   {1600, 1024, 1024},
                   {800, 1760, 1760}}) {
        b->Args({1, s[0], s[1], s[2]});  // X W_ih^T
        b->Args({2, s[2], s[0], s[2]});  // dW_hh = delta^T h
        b->Args({2, s[2], s[0], s[1]});  // dW_ih = delta^T x
    }
}

BENCHMARK(BM_GemmVsBlas<float>)->Apply(step_shapes)->UseManualTime()->MinTime(0.2);
BENCHMARK(BM_GemmVsBlas<float>)->Apply(big_shapes)->UseManualTime()->Iterations(9);
BENCHMARK(BM_GemmVsBlas<double>)->Apply(step_shapes)->UseManualTime()->MinTime(0.2);
BENCHMARK(BM_GemmVsBlas<double>)->Apply(big_shapes)->UseManualTime()->Iterations(9);

}  // namespace

BENCHMARK_MAIN();
