#include "step_barrier.hpp"

#include <chrono>
#include <thread>

#include "threads.hpp"

namespace rnnfast {
namespace {

// Pause-instruction spins before a waiting thread starts yielding its core.
constexpr unsigned kSpins = 20000;

// Contention back-off (see step_barrier.hpp): until this steady_clock time (ns), one thread.
constexpr double kContentionBackoffSeconds = 0.5;
std::atomic<long long> g_backoff_until_ns{0};
// Regions in a row whose team kept stalling, and how many start a back-off. One such region
// alone is no evidence of a busy machine: the first region of a process (OpenMP starting its
// threads, the first touch of every buffer) stalled at half its waits on an idle machine and
// backed off, so the next half second of 2-thread calls ran on one thread (LSTM 64x8x300x300
// forward, float32, 2 threads, AMD EPYC Zen 3: 14 ms a call for 0.5 s after the first, then
// 6-9 ms). On a busy machine every region stalls: the back-off starts one region later.
std::atomic<int> g_contended_in_row{0};
constexpr int kContendedRegionsToBackOff = 2;

// A cheap clock for the barrier's stall test (the time stamp counter on x86: a few ns).
unsigned long long cycle_count() {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return static_cast<unsigned long long>(
        std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

// When this thread last left a StepBarrier::wait (cycle_count()).
thread_local unsigned long long t_last_wait_end = 0;

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

void StepBarrier::meet(bool watch) {
    if (team_ <= 1) return;
    const unsigned generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) == team_ - 1) {
        arrived_.store(0, std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);  // publishes this step's writes
        return;
    }
    // When more threads are claimed than the budget, the teammate we wait for may be off its
    // core: give ours up at once instead of spinning.
    const unsigned patience = oversubscribed() ? 0 : kSpins;
    const unsigned long long arrived = cycle_count();
    unsigned spins = 0;
    for (; generation_.load(std::memory_order_acquire) == generation; ++spins) {
        if (spins > patience) std::this_thread::yield();
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    // A stall: the wait outlasted the spinning and was longer than this thread's own work
    // since its last wait. The shares are equal, so a teammate taking over twice as long was
    // not running; a wait that long on a busy step alone is only imbalance.
    const unsigned long long left = cycle_count();
    const bool stalled = spins > kSpins && left - arrived > arrived - t_last_wait_end;
    t_last_wait_end = left;
    if (!watch) return;
    waits_.fetch_add(1, std::memory_order_relaxed);
    if (stalled) stalls_.fetch_add(1, std::memory_order_relaxed);
}

StepBarrier::~StepBarrier() {
    // Half the waits stalled, over enough of them to be no accident: back off. (A team
    // sharing its cores with a busy process stalls at nearly every step; on an idle machine a
    // rare descheduled step must not cost a back-off.)
    const int waits = waits_.load(), stalls = stalls_.load();
    if (waits < 16) return;  // too few to tell either way
    if (2 * stalls < waits) {
        g_contended_in_row.store(0);
        return;
    }
    if (g_contended_in_row.fetch_add(1) + 1 < kContendedRegionsToBackOff) return;
    g_contended_in_row.store(0);
    g_backoff_until_ns.store(now_ns() + static_cast<long long>(kContentionBackoffSeconds * 1e9));
}

double contention_backoff_seconds() {
    const long long left = g_backoff_until_ns.load() - now_ns();
    return left > 0 ? double(left) * 1e-9 : 0.0;
}

void clear_contention_backoff() {
    g_backoff_until_ns.store(0);
    g_contended_in_row.store(0);
}

}  // namespace rnnfast
