#include "cache_info.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace rnnfast {
namespace {

constexpr index kDefaultL1 = 32 << 10, kDefaultL2 = 256 << 10, kDefaultL3 = 1 << 20;

// The first line of a small sysfs file, or "" when it cannot be read.
bool read_line(const char* path, char* out, int size) {
    std::FILE* f = std::fopen(path, "r");
    if (!f) return false;
    const bool ok = std::fgets(out, size, f) != nullptr;
    std::fclose(f);
    if (ok) out[std::strcspn(out, "\n")] = '\0';
    return ok;
}

// CPUs in a sysfs cpu list such as "0-3,8-11".
int count_cpus(const char* list) {
    int count = 0;
    const char* p = list;
    while (*p) {
        int a = 0, b = 0, used = 0;
        if (std::sscanf(p, "%d-%d%n", &a, &b, &used) == 2 && b >= a) {
            count += b - a + 1;
        } else if (std::sscanf(p, "%d%n", &a, &used) == 1) {
            count += 1;
        } else {
            break;
        }
        p += used;
        if (*p == ',') ++p;
    }
    return std::max(count, 1);
}

// Size strings as sysfs writes them: "48K", "2048K", "32M".
index parse_size(const char* s) {
    long long v = 0;
    char unit = '\0';
    if (std::sscanf(s, "%lld%c", &v, &unit) < 1 || v <= 0) return 0;
    if (unit == 'K' || unit == 'k') v <<= 10;
    if (unit == 'M' || unit == 'm') v <<= 20;
    if (unit == 'G' || unit == 'g') v <<= 30;
    return static_cast<index>(v);
}

// Fills the levels sysfs knows (per core: divided by the CPUs sharing each cache).
void from_sysfs(index level_size[4]) {
    for (int i = 0; i < 16; ++i) {
        char path[128], level[16], type[32], size[32], shared[256];
        const char* base = "/sys/devices/system/cpu/cpu0/cache/index";
        std::snprintf(path, sizeof path, "%s%d/level", base, i);
        if (!read_line(path, level, sizeof level)) break;
        std::snprintf(path, sizeof path, "%s%d/type", base, i);
        if (!read_line(path, type, sizeof type) || std::strcmp(type, "Instruction") == 0) continue;
        std::snprintf(path, sizeof path, "%s%d/size", base, i);
        if (!read_line(path, size, sizeof size)) continue;
        std::snprintf(path, sizeof path, "%s%d/shared_cpu_list", base, i);
        const int sharing = read_line(path, shared, sizeof shared) ? count_cpus(shared) : 1;
        const int l = level[0] - '0';
        if (l >= 1 && l <= 3) level_size[l] = parse_size(size) / sharing;
    }
}

#if defined(__x86_64__) || defined(__i386__)
// Deterministic cache parameters: cpuid leaf 4 (Intel) or 0x8000001D (AMD), one sub-leaf per
// cache: size = ways * partitions * line size * sets, shared by EAX[25:14] + 1 logical CPUs.
void from_cpuid(index level_size[4]) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    const bool amd = b == 0x68747541;  // "Auth"enticAMD
    const unsigned leaf = amd ? 0x8000001Du : 4u;
    if (!amd && a < 4) return;
    for (unsigned sub = 0; sub < 16; ++sub) {
        if (!__get_cpuid_count(leaf, sub, &a, &b, &c, &d)) return;
        const unsigned type = a & 31u;  // 0: no more caches, 1: data, 2: instruction, 3: unified
        if (type == 0) break;
        if (type == 2) continue;
        const unsigned level = (a >> 5) & 7u, sharing = ((a >> 14) & 0xfffu) + 1;
        const index size = index((b >> 22) + 1) * index(((b >> 12) & 0x3ffu) + 1) *
                           index((b & 0xfffu) + 1) * index(c + 1);
        if (level >= 1 && level <= 3 && level_size[level] == 0)
            level_size[level] = size / index(sharing);
    }
}
#endif

CacheSizes detect() {
    index sizes[4] = {0, 0, 0, 0};
    from_sysfs(sizes);
    const char* source = sizes[1] > 0 ? "sysfs" : "default";
#if defined(__x86_64__) || defined(__i386__)
    if (sizes[1] == 0 || sizes[2] == 0) {
        from_cpuid(sizes);
        if (sizes[1] > 0 && source[0] == 'd') source = "cpuid";
    }
#endif
    return {sizes[1] > 0 ? sizes[1] : kDefaultL1, sizes[2] > 0 ? sizes[2] : kDefaultL2,
            sizes[3] > 0 ? sizes[3] : std::max(kDefaultL3, sizes[2]), source};
}

index round_down(index v, index multiple) {
    return std::max(multiple, v / multiple * multiple);
}

}  // namespace

const CacheSizes& cache_sizes() {
    static const CacheSizes sizes = detect();
    return sizes;
}

GemmBlocking gemm_blocking(const CacheSizes& caches, int mr, int nr, int elem) {
    // After BLIS's reasoning (Low et al., "Analytical modeling is enough for high-performance
    // BLIS", 2016), the A block is sized to half of L2 and the B block to half of a core's L3.
    // The B panel (kc x nr) is not held to L1, as BLIS holds it, but to an eighth of L2: the
    // tile streams two vectors of it per 2 x mr FMAs, a rate L2 meets, and every k-block
    // re-reads and rewrites the C tile through the epilogue, which a longer block pays less
    // often. Measured against NumPy's OpenBLAS (SkylakeX kernel) in one process, 1 thread,
    // AMD EPYC (Zen 4: 32 KiB L1, 1 MiB L2), AVX-512: the projections and weight gradients at
    // 1024-1760 ran 0.92-0.99x OpenBLAS with kc = 256 (L1), 0.97-1.08x with 512 and
    // 0.99-1.09x with 1024 (float32); float64 0.90-0.98x -> 0.97-1.06x. 1536 and 2048 were
    // level with 1024. An earlier Xeon (48 KiB L1, 2 MiB L2) ran 384 5-10% faster than 192.
    const index kc = std::clamp<index>(caches.l2 / 8 / (index(nr) * elem) / 8 * 8, 64, 1024);
    const index mc = round_down(std::min<index>(caches.l2 / 2 / (kc * elem), 4096), mr);
    const index nc = round_down(std::min<index>(caches.l3 / 2 / (kc * elem), 8192), nr);
    // The recurrent step (A = h_{t-1} read in place, at most a few row tiles) meets each panel
    // once per row tile, and its C (B x G*H: a megabyte for the LSTM at B = 64, H = 1024) is
    // read and written once per k-block, from L3 where W_hh does not fit L2. One pass over a
    // panel held in L2 keeps the C tile in registers across all of K and runs the epilogue once:
    // rnnfast_bench_gemm, float32, AVX-512, 1 thread, AMD EPYC (Zen 4, 32 KiB L1, 1 MiB L2),
    // step rows M = 16-128, K = N = 1024 / 2048, with the 4 KiB aliasing fix (simd_kernels.inl):
    // 51-64 -> 74-104 GFLOP/s; M = 1 unchanged; the K = 64-512 rows within noise.
    const index kc_step = std::max(kc, round_down(caches.l2 / 2 / (index(nr) * elem), 8));
    return {kc, mc, nc, kc_step};
}

}  // namespace rnnfast
