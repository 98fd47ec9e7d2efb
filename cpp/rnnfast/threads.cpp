#include "threads.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace rnnfast {
namespace {

int default_threads() {
#if defined(_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
}

std::atomic<int> g_threads{default_threads()};

// Threads claimed by the ThreadShares alive now (each counts its calling thread), and the
// high-water mark of the helper threads among them.
std::atomic<int> g_claimed{0};
std::atomic<int> g_helpers{0};
std::atomic<int> g_peak_helpers{0};

// The calling thread's share while a kernel call runs; 0 outside one (no cap but the budget).
thread_local int t_share = 0;

// Contention back-off (see threads.hpp): until this steady_clock time (ns), one thread.
constexpr double kContentionBackoffSeconds = 1.0;
std::atomic<long long> g_backoff_until_ns{0};

// A cheap clock for the barrier's stall test (the time stamp counter on x86: a few ns).
unsigned long long cycle_count() {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

// When this thread last left a StepBarrier::wait (cycle_count()).
thread_local unsigned long long t_last_wait_end = 0;

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Below these many FLOPs per thread, a thread costs more in synchronisation than it saves:
// a barrier among spinning threads takes well under a microsecond, waking a team several.
constexpr double kFlopsPerThreadBarrier = 65536.0;
constexpr double kFlopsPerThreadForkJoin = 1048576.0;

}  // namespace

int get_num_threads() { return g_threads.load(); }

void set_num_threads(int n) {
    if (n < 1)
        throw std::invalid_argument("n: expected a thread count >= 1, got " + std::to_string(n));
    g_threads.store(n);
}

bool openmp_enabled() {
#if defined(_OPENMP)
    return true;
#else
    return false;
#endif
}

ThreadShare::ThreadShare() : outer_(t_share) {
    if (outer_ > 0) {  // nested: the outer call's team is this thread's budget already
        granted_ = 1;
        t_share = 1;
        return;
    }
    const int budget = get_num_threads();
    int claimed = g_claimed.load();
    int want = 1;
    do {
        want = std::max(1, std::min(budget, budget - claimed));
    } while (!g_claimed.compare_exchange_weak(claimed, claimed + want));
    granted_ = want;
    t_share = want;
    const int helpers = g_helpers.fetch_add(want - 1) + want - 1;
    int peak = g_peak_helpers.load();
    while (helpers > peak && !g_peak_helpers.compare_exchange_weak(peak, helpers)) {
    }
}

ThreadShare::~ThreadShare() {
    t_share = outer_;
    if (outer_ > 0) return;
    g_helpers.fetch_sub(granted_ - 1);
    g_claimed.fetch_sub(granted_);
}

int helper_threads_in_use() { return g_helpers.load(); }

int peak_helper_threads(bool reset) {
    return reset ? g_peak_helpers.exchange(g_helpers.load()) : g_peak_helpers.load();
}

int threads_for(double flops, index limit, Sync sync) {
    int n = get_num_threads();
    if (t_share > 0 && t_share < n) n = t_share;
    if (n > 1 && now_ns() < g_backoff_until_ns.load(std::memory_order_relaxed)) n = 1;
    const double useful =
        flops / (sync == Sync::barrier ? kFlopsPerThreadBarrier : kFlopsPerThreadForkJoin);
    if (useful < n) n = useful < 1.0 ? 1 : static_cast<int>(useful);
    if (limit < n) n = limit < 1 ? 1 : static_cast<int>(limit);
    return n;
}

void StepBarrier::wait() {
    if (team_ <= 1) return;
    const unsigned generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) == team_ - 1) {
        arrived_.store(0, std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);  // publishes this step's writes
        return;
    }
    // More threads claimed than the budget (callers beyond it each run on their own thread):
    // the teammate we wait for may be off its core, so give ours up at once instead of spinning.
    const unsigned patience = g_claimed.load(std::memory_order_relaxed) > get_num_threads() ? 0 : 20000;
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
    const bool stalled = spins > 20000 && left - arrived > arrived - t_last_wait_end;
    t_last_wait_end = left;
    waits_.fetch_add(1, std::memory_order_relaxed);
    if (stalled) stalls_.fetch_add(1, std::memory_order_relaxed);
}

StepBarrier::~StepBarrier() {
    // A quarter of the waits stalled, over enough of them to be no accident: back off.
    const int waits = waits_.load(), stalls = stalls_.load();
    if (waits >= 8 && 4 * stalls >= waits)
        g_backoff_until_ns.store(now_ns() + static_cast<long long>(kContentionBackoffSeconds * 1e9));
}

double contention_backoff_seconds() {
    const long long left = g_backoff_until_ns.load() - now_ns();
    return left > 0 ? double(left) * 1e-9 : 0.0;
}

void clear_contention_backoff() { g_backoff_until_ns.store(0); }

int thread_index() {
#if defined(_OPENMP)
    return omp_get_thread_num();
#else
    return 0;
#endif
}

int team_size() {
#if defined(_OPENMP)
    return omp_get_num_threads();
#else
    return 1;
#endif
}

}  // namespace rnnfast
