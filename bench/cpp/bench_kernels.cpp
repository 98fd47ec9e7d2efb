// Google Benchmark micro-benchmarks of the kernels, on the active ISA (RNNFAST_ISA picks a
// lower one). Build: cmake -S . -B build-bench -DRNNFAST_BUILD_BENCHMARKS=ON && cmake --build
// build-bench --target rnnfast_bench_kernels; run: ./build-bench/rnnfast_bench_kernels.
// Counters: FLOPS is floating-point operations per second of the timed work.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "rnnfast/drivers/rnn.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"

namespace {

using rnnfast::index;

std::vector<float> random_vector(index n, float scale, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& e : v)
        e = dist(gen);
    return v;
}

// One recurrent step h_t = tanh(h_{t-1} W_hh^T) on a pre-packed W_hh: args B, H, and 0 to
// leave out the tanh (to see what the epilogue costs).
void BM_RecurrentStep(benchmark::State& state) {
    const index B = state.range(0), H = state.range(1);
    rnnfast::set_num_threads(1);
    const auto& kt = rnnfast::kernels<float>();
    const auto w = random_vector(H * H, 0.05f, 1);
    const auto h_prev = random_vector(B * H, 1.0f, 2);
    auto out = random_vector(B * H, 1.0f, 3);
    const auto packed = rnnfast::pack_whole(kt, rnnfast::MatView<float>{w.data(), 1, H}, H, H, 1);
    rnnfast::GemmTask<float> task;
    task.M = B;
    task.N = H;
    task.K = H;
    task.A = {h_prev.data(), H, 1};
    task.packed_b = packed.data();
    task.C = out.data();
    task.ldc = H;
    task.accumulate = false;
    task.op = state.range(2) ? rnnfast::Epilogue::tanh : rnnfast::Epilogue::none;
    const index panels = rnnfast::panel_count(H, kt.nr);
    for (auto _ : state) {
        kt.gemm_block(task, 0, B, 0, panels);
        benchmark::DoNotOptimize(out.data());
    }
    state.counters["FLOPS"] =
        benchmark::Counter(2.0 * double(B * H * H), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_RecurrentStep)
    ->Args({1, 64, 0})
    ->Args({1, 64, 1})
    ->Args({16, 128, 1})
    ->Args({64, 256, 1})
    ->Args({32, 512, 1})
    ->Args({64, 1024, 1})
    ->Args({1, 1024, 1});

// One streaming step (rnn_step: unpacked dot products and the activation): args B, D, H.
void BM_Step(benchmark::State& state) {
    const index B = state.range(0), D = state.range(1), H = state.range(2);
    const auto x = random_vector(B * D, 1.0f, 11), h = random_vector(B * H, 1.0f, 12);
    const auto w_ih = random_vector(H * D, 0.05f, 13), w_hh = random_vector(H * H, 0.05f, 14);
    std::vector<float> h_next(static_cast<size_t>(B * H));
    rnnfast::StepArgs<float> args;
    args.batch = B;
    args.input_size = D;
    args.hidden_size = H;
    args.x = x.data();
    args.h = h.data();
    args.w_ih = w_ih.data();
    args.w_hh = w_hh.data();
    args.h_next = h_next.data();
    for (auto _ : state) {
        rnnfast::rnn_step(args);
        benchmark::DoNotOptimize(h_next.data());
    }
}
BENCHMARK(BM_Step)->Args({1, 32, 64})->Args({1, 32, 256});

// A large GEMM C = A B with B packed in K-chunks (the input projection / dW shapes): M, N, K.
void BM_Gemm(benchmark::State& state) {
    const index M = state.range(0), N = state.range(1), K = state.range(2);
    rnnfast::set_num_threads(1);
    const auto& kt = rnnfast::kernels<float>();
    const auto a = random_vector(M * K, 1.0f, 4);
    const auto b = random_vector(K * N, 1.0f, 5);
    std::vector<float> c(static_cast<size_t>(M * N));
    for (auto _ : state) {
        rnnfast::gemm(kt, M, N, K, rnnfast::MatView<float>{a.data(), K, 1},
                      rnnfast::MatView<float>{b.data(), N, 1}, c.data(), N, false, 1);
        benchmark::DoNotOptimize(c.data());
    }
    state.counters["FLOPS"] =
        benchmark::Counter(2.0 * double(M * N * K), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Gemm)->Args({1600, 1024, 1024})->Args({3200, 256, 128})->Args({512, 512, 512});

// Threads for the whole-sequence benchmarks: RNNFAST_BENCH_THREADS, 1 by default.
int sequence_threads() {
    const char* env = std::getenv("RNNFAST_BENCH_THREADS");
    return env && std::atoi(env) > 0 ? std::atoi(env) : 1;
}

// Whole-sequence forward and backward of one layer: T, B, D, H.
void BM_Forward(benchmark::State& state) {
    const index T = state.range(0), B = state.range(1), D = state.range(2), H = state.range(3);
    rnnfast::set_num_threads(sequence_threads());
    const auto x = random_vector(T * B * D, 1.0f, 6);
    const auto w_ih = random_vector(H * D, 0.05f, 7), w_hh = random_vector(H * H, 0.05f, 8);
    std::vector<float> y(static_cast<size_t>(T * B * H)), h_n(static_cast<size_t>(B * H));
    rnnfast::ForwardArgs<float> args;
    args.steps = T;
    args.batch = B;
    args.input_size = D;
    args.hidden_size = H;
    args.x = x.data();
    args.w_ih = w_ih.data();
    args.w_hh = w_hh.data();
    args.y = y.data();
    args.h_n = h_n.data();
    for (auto _ : state) {
        rnnfast::rnn_forward(args);
        benchmark::DoNotOptimize(y.data());
    }
    state.counters["FLOPS"] = benchmark::Counter(2.0 * double(T * B) * double(D * H + H * H),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Backward(benchmark::State& state) {
    const index T = state.range(0), B = state.range(1), D = state.range(2), H = state.range(3);
    rnnfast::set_num_threads(sequence_threads());
    const auto x = random_vector(T * B * D, 1.0f, 6);
    const auto w_ih = random_vector(H * D, 0.05f, 7), w_hh = random_vector(H * H, 0.05f, 8);
    const auto y = random_vector(T * B * H, 0.9f, 9), dy = random_vector(T * B * H, 1.0f, 10);
    std::vector<float> dx(static_cast<size_t>(T * B * D)), dh0(static_cast<size_t>(B * H));
    std::vector<float> dw_ih(static_cast<size_t>(H * D)), dw_hh(static_cast<size_t>(H * H));
    std::vector<float> db(static_cast<size_t>(H));
    rnnfast::BackwardArgs<float> args;
    args.steps = T;
    args.batch = B;
    args.input_size = D;
    args.hidden_size = H;
    args.x = x.data();
    args.w_ih = w_ih.data();
    args.w_hh = w_hh.data();
    args.y = y.data();
    args.dy = dy.data();
    args.dx = dx.data();
    args.dh0 = dh0.data();
    args.dw_ih = dw_ih.data();
    args.dw_hh = dw_hh.data();
    args.db = db.data();
    for (auto _ : state) {
        rnnfast::rnn_backward(args);
        benchmark::DoNotOptimize(dx.data());
    }
    state.counters["FLOPS"] = benchmark::Counter(4.0 * double(T * B) * double(D * H + H * H),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

#define RNNFAST_GRID                                        \
    Args({200, 1, 32, 64})                                  \
        ->Args({100, 16, 64, 128})                          \
        ->Args({50, 64, 128, 256})                          \
        ->Args({50, 32, 256, 256})                          \
        ->Args({100, 32, 64, 256}) /* examples/charlm.py */ \
        ->Args({50, 32, 512, 512})                          \
        ->Args({25, 64, 1024, 1024})                        \
        ->Args({100, 1, 1024, 1024})                        \
        ->Unit(benchmark::kMillisecond)
BENCHMARK(BM_Forward)->RNNFAST_GRID;
BENCHMARK(BM_Backward)->RNNFAST_GRID;

}  // namespace

BENCHMARK_MAIN();
