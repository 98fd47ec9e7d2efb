// The data cache sizes of the CPU this process runs on, read once at run time, and the GEMM's
// cache blocking derived from them. The kernels are compiled without knowing the machine, so
// their blocking cannot be constants: a k-block sized for one L1 thrashes a smaller one.
#pragma once

#include "types.hpp"

namespace rnnfast {

// Bytes of each data cache level available to one core (a shared level divided by the CPUs that
// share it), and where the figures came from ("sysfs", "cpuid" or "default").
struct CacheSizes {
    index l1d, l2, l3;
    const char* source;
};

// Linux's sysfs (/sys/devices/system/cpu/cpu0/cache) first, then cpuid (leaf 4 on Intel,
// 0x8000001D on AMD), then conservative defaults (32 KiB, 256 KiB, 1 MiB) for a level neither
// gives. Read once; every later call returns the same figures.
const CacheSizes& cache_sizes();

// The loop blocks of the GEMM for one register tile (mr rows x nr columns of `elem` bytes each):
//   kc  rows of a packed B panel (kc x nr), an eighth of L2, that every row tile of an M-block
//       passes over, each pass one k-block of the C tile held in registers;
//   mc  rows of A packed at once (mc x kc), kept in L2 while they meet every panel; a multiple
//       of mr, so that threads splitting rows at multiples of mr see the same tiles;
//   nc  columns of B packed at once (kc x nc) for the large GEMMs, kept in a core's share of L3;
//       a multiple of nr;
//   kc_step  the k-block where A is read in place (the recurrent step, M = B): a panel of that
//       many rows fills half of L2, so that K = H up to a few thousand is one pass.
struct GemmBlocking {
    index kc, mc, nc, kc_step;
};
GemmBlocking gemm_blocking(const CacheSizes& caches, int mr, int nr, int elem);

}  // namespace rnnfast
