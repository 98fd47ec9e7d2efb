#include "threads.hpp"

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

// Below this many FLOPs per step a second thread costs more in barriers than it saves.
constexpr double kFlopsPerThread = 65536.0;

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

int threads_for(double flops_per_step, index limit) {
    int n = get_num_threads();
    const double useful = flops_per_step / kFlopsPerThread;
    if (useful < n) n = useful < 1.0 ? 1 : static_cast<int>(useful);
    if (limit < n) n = limit < 1 ? 1 : static_cast<int>(limit);
    return n;
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
