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

// The team of a pass whose steps run on `stepping` threads and whose input projection alone
// would take `projection` threads: a team larger than its stepping threads only where the
// projection's FLOPs are at least the steps' (`step_flops`, all of them). Otherwise the extra
// member mostly waits through the steps, and a 2-vCPU guest's waiting sibling slowed the
// stepping one: 0.88-0.97x one thread at 200x1x32x64 (GRU, LSTM) and 150x1x50x200 (Elman),
// AVX-512, where the projection is 0.25-0.5x the steps' work.
int pass_team(int stepping, int projection, double projection_flops, double step_flops);

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

// The threads the latest recurrent pass on the calling thread ran with: `stepping` members ran
// its steps in a region of `team` (the time loop records them; a diagnostic, for the benches
// that show which thread count a layer chose for a shape).
struct PassThreads {
    int stepping = 0, team = 0;
};
void record_pass_threads(PassThreads used);
PassThreads last_pass_threads();

// This thread's index and the team size inside a parallel region (0 and 1 without OpenMP).
int thread_index();
int team_size();

// True while more threads are claimed than the budget (callers beyond it each run on their own
// thread): a teammate may be off its core, so waiting threads should give theirs up at once.
bool oversubscribed();

}  // namespace rnnfast
