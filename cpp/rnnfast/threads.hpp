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
// `limit`, the number of independent parts, nor than this call's ThreadShare).
int threads_for(double flops, index limit, Sync sync);

// One kernel call's share of the thread budget (get_num_threads()), held for the call's
// lifetime on the calling thread. Calls running at the same time (several Python threads; the
// GIL is released inside kernels) split the budget instead of each starting a full team: the
// first takes what is free, later ones what is left, at least their own thread. So the helper
// threads of all running calls together never exceed get_num_threads() - 1, and 8 Python
// threads on 2 cores do not become 16 spinning OpenMP threads. The share never changes results:
// every output element is summed in the same order whatever the team size.
class ThreadShare {
public:
    ThreadShare();
    ~ThreadShare();
    ThreadShare(const ThreadShare&) = delete;
    ThreadShare& operator=(const ThreadShare&) = delete;
    int threads() const { return granted_; }

private:
    int granted_;
    int outer_;  // the share this thread held before (a call made from inside another)
};

// Helper threads (team members beyond the calling threads) claimed right now, and the most
// claimed at once since the last reset: what the tests use to show the budget holds.
int helper_threads_in_use();
int peak_helper_threads(bool reset);

// This thread's index and the team size inside a parallel region (0 and 1 without OpenMP).
int thread_index();
int team_size();

// A barrier for the once-per-time-step meeting of a parallel region's team. libgomp's barrier
// makes a futex system call every time the last thread arrives, even in a team of one; at
// thousands of short steps per call that dominates. This one spins (yielding after a while, in
// case the machine is oversubscribed) and costs nothing for a team of one. Call reset() with the
// team's real size inside the region (e.g. in `omp single`) before the first wait().
//
// It also watches for a machine busier than the team: a wait that outlasts the spinning means a
// teammate was off its core (another process, or more threads than cores). When that is common
// in a region, the destructor starts a contention back-off (see below).
class StepBarrier {
public:
    StepBarrier() = default;
    StepBarrier(const StepBarrier&) = delete;
    StepBarrier& operator=(const StepBarrier&) = delete;
    ~StepBarrier();
    void reset(int team) {
        team_ = team;
        arrived_.store(0, std::memory_order_relaxed);
    }
    void wait();

private:
    int team_ = 1;
    std::atomic<int> arrived_{0};
    std::atomic<unsigned> generation_{0};
    std::atomic<int> waits_{0};   // waits that had to spin (not the last arrival)
    std::atomic<int> stalls_{0};  // of those, waits that outlasted the spinning
};

// Contention back-off: after a region whose team kept stalling, threads_for() gives one thread
// for kContentionBackoffSeconds, then tries the full budget again. On a machine whose cores are
// taken by others, a team that meets every step runs several times slower than one thread;
// one thread is what it can count on. Seconds of back-off left (0 when none), and a reset for tests.
double contention_backoff_seconds();
void clear_contention_backoff();

}  // namespace rnnfast
