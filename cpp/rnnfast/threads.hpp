// The thread count the drivers use, and the OpenMP shims that let the build run without OpenMP.
#pragma once

#include <atomic>

#include "types.hpp"

namespace rnnfast {

int get_num_threads();
void set_num_threads(int n);  // n >= 1; throws std::invalid_argument otherwise
bool openmp_enabled();

// How the threads of a parallel piece of work meet: at a barrier inside one parallel region
// (cheap while the team spins), or by starting a new region (a fork-join, which may have to wake
// sleeping threads).
enum class Sync { barrier, fork_join };

// Threads worth using for `flops` of work between two synchronisations: small pieces are
// dominated by the synchronisation, so they use fewer threads than asked (never more than
// `limit`, the number of independent parts).
int threads_for(double flops, index limit, Sync sync);

// This thread's index and the team size inside a parallel region (0 and 1 without OpenMP).
int thread_index();
int team_size();

// A barrier for the once-per-time-step meeting of a parallel region's team. libgomp's barrier
// makes a futex system call every time the last thread arrives, even in a team of one; at
// thousands of short steps per call that dominates. This one spins (yielding after a while, in
// case the machine is oversubscribed) and costs nothing for a team of one. Call reset() with the
// team's real size inside the region (e.g. in `omp single`) before the first wait().
class StepBarrier {
public:
    void reset(int team) {
        team_ = team;
        arrived_.store(0, std::memory_order_relaxed);
    }
    void wait();

private:
    int team_ = 1;
    std::atomic<int> arrived_{0};
    std::atomic<unsigned> generation_{0};
};

}  // namespace rnnfast
