// The per-time-step barrier of the recurrence's thread team, and the contention back-off it
// triggers when the machine is busier than the team.
#pragma once

#include <atomic>

namespace rnnfast {

// A barrier for the once-per-time-step meeting of a parallel region's team. libgomp's barrier
// makes a futex system call every time the last thread arrives, even in a team of one; at
// thousands of short steps per call that dominates. This one spins (yielding after a while, in
// case the machine is oversubscribed) and costs nothing for a team of one. Call reset() with the
// team's real size inside the region (e.g. in `omp single`) before the first wait().
//
// It also watches for a machine busier than the team: a wait that outlasts the spinning means a
// teammate was off its core (another process, or more threads than cores). When that is common
// in two regions in a row, the second's destructor starts a contention back-off (see below).
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
    void wait() { meet(true); }
    // The wait of a member that had no share of the work since the last meeting (it sat out a
    // part run by fewer threads): long by design, so it is not taken for a busy machine.
    void wait_idle() { meet(false); }

  private:
    void meet(bool watch);
    int team_ = 1;
    std::atomic<int> arrived_{0};
    std::atomic<unsigned> generation_{0};
    std::atomic<int> waits_{0};   // waits that had to spin (not the last arrival)
    std::atomic<int> stalls_{0};  // of those, waits that outlasted the spinning
};

// Contention back-off: after two regions in a row whose teams kept stalling (one alone may be
// a process's first, starting its threads), threads_for() gives one thread for half a second,
// then tries the full budget again. On a machine whose cores are taken by others, a team that
// meets every step runs several times slower than one thread; one thread is what it can count
// on. Seconds of back-off left (0 when none), and a reset for tests.
double contention_backoff_seconds();
void clear_contention_backoff();

}  // namespace rnnfast
