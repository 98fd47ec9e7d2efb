#include "threads.hpp"

#include <atomic>
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

int threads_for(double flops, index limit, Sync sync) {
    int n = get_num_threads();
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
    for (unsigned spins = 0; generation_.load(std::memory_order_acquire) == generation; ++spins) {
        if (spins > 20000) std::this_thread::yield();
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
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

}  // namespace rnnfast
