#include "threads.hpp"

#include "step_barrier.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>

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

// Below these many FLOPs per thread, a thread costs more in synchronisation than it saves:
// a barrier among spinning threads takes well under a microsecond, waking a team several.
constexpr double kFlopsPerThreadBarrier = 65536.0;
constexpr double kFlopsPerThreadForkJoin = 1048576.0;

}  // namespace

int get_num_threads() {
    return g_threads.load();
}

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

int helper_threads_in_use() {
    return g_helpers.load();
}

bool oversubscribed() {
    return g_claimed.load(std::memory_order_relaxed) > get_num_threads();
}

int peak_helper_threads(bool reset) {
    return reset ? g_peak_helpers.exchange(g_helpers.load()) : g_peak_helpers.load();
}

int threads_for(double flops, index limit, Sync sync) {
    int n = get_num_threads();
    if (t_share > 0 && t_share < n) n = t_share;
    if (n > 1 && contention_backoff_seconds() > 0.0) n = 1;
    const double useful =
        flops / (sync == Sync::barrier ? kFlopsPerThreadBarrier : kFlopsPerThreadForkJoin);
    if (useful < n) n = useful < 1.0 ? 1 : static_cast<int>(useful);
    if (limit < n) n = limit < 1 ? 1 : static_cast<int>(limit);
    return n;
}

int pass_team(int stepping, int projection, double projection_flops, double step_flops) {
    if (projection <= stepping) return stepping;
    return stepping == 1 && projection_flops < step_flops ? 1 : projection;
}

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

namespace {
thread_local PassThreads t_last_pass;
}  // namespace

void record_pass_threads(PassThreads used) {
    t_last_pass = used;
}
PassThreads last_pass_threads() {
    return t_last_pass;
}

}  // namespace rnnfast
