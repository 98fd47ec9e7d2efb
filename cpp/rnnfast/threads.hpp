// The thread count the drivers use, and the OpenMP shims that let the build run without OpenMP.
#pragma once

#include "types.hpp"

namespace rnnfast {

int get_num_threads();
void set_num_threads(int n);  // n >= 1; throws std::invalid_argument otherwise
bool openmp_enabled();

// Threads worth using for a problem of `flops` per synchronised step: small steps are
// dominated by barrier cost, so they use fewer threads than asked (never more than `limit`).
int threads_for(double flops_per_step, index limit);

// This thread's index and the team size inside a parallel region (0 and 1 without OpenMP).
int thread_index();
int team_size();

}  // namespace rnnfast
