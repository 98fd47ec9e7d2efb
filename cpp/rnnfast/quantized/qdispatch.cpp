// Which quantized path runs: the CPU's features, the active float ISA and a forced choice.
#include <atomic>
#include <stdexcept>

#if defined(RNNFAST_X86_ISAS)
#include <cpuid.h>
#endif

#include "qops.hpp"
#include "rnnfast/runtime/dispatch.hpp"

namespace rnnfast::quantized {
namespace {

struct PathEntry {
    const char* name;
    const QuantKernels& (*kernels)();
    bool (*cpu_has)();
    int float_level;  // the float ISA it needs to be chosen automatically: 0 baseline, 1 avx2, 2
                      // avx512
};

bool always() {
    return true;
}
#if defined(RNNFAST_X86_ISAS)
// __builtin_cpu_supports checks the OS saves the registers too (XGETBV).
bool has_avx2() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
bool has_avx512() {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") && has_avx2();
}
bool has_avx_vnni() {
    return has_avx2() && __builtin_cpu_supports("avxvnni");
}
bool has_avx512_vnni() {
    return has_avx512() && __builtin_cpu_supports("avx512vnni");
}
bool has_avx512_bf16() {
    return has_avx512() && __builtin_cpu_supports("avx512bf16");
}
// g++ 12's __builtin_cpu_supports knows no AMX names: CPUID leaf 7 EDX bits 22 (AMX-BF16),
// 24 (AMX-TILE), 25 (AMX-INT8), the OS's XCR0 bits 17-18 (tile state), then Linux's permission.
bool amx_check() {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const unsigned need = (1u << 22) | (1u << 24) | (1u << 25);
    if ((d & need) != need || !(c & (1u << 27)) || !has_avx512()) return false;  // 27: OSXSAVE
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    return qpath_amx::request_tile_permission();
}
bool has_amx() {
    static const bool ok = amx_check();  // the permission request runs once
    return ok;
}
#endif

// Lowest first.
const PathEntry kPaths[] = {
    {"baseline", &qpath_baseline::kernels, &always, 0},
#if defined(RNNFAST_X86_ISAS)
    {"avx2", &qpath_avx2::kernels, &has_avx2, 1},
    {"avx_vnni", &qpath_avx_vnni::kernels, &has_avx_vnni, 1},
    {"avx512_vnni", &qpath_avx512_vnni::kernels, &has_avx512_vnni, 2},
    {"avx512_bf16", &qpath_avx512_bf16::kernels, &has_avx512_bf16, 2},
    {"amx", &qpath_amx::kernels, &has_amx, 2},
#endif
};
constexpr int kPathCount = static_cast<int>(sizeof(kPaths) / sizeof(kPaths[0]));

bool serves(const PathEntry& e, Kind kind) {
    return kind == Kind::int8 ? e.kernels().int8_block != nullptr
                              : e.kernels().bf16_block != nullptr;
}

int float_level() {
    const std::string isa = active_isa();
    return isa == "avx512" ? 2 : isa == "avx2" ? 1 : 0;
}

std::atomic<int> g_forced{-1};  // index into kPaths, or -1: automatic

// The highest runnable path serving `kind` at or below `limit` (and, when automatic, allowed by
// the float ISA). Baseline serves both kinds, so there always is one.
int chosen(Kind kind) {
    const int forced = g_forced.load();
    const int top = forced >= 0 ? forced : kPathCount - 1;
    const int level = float_level();
    for (int i = top; i > 0; --i) {
        const PathEntry& e = kPaths[i];
        if (!serves(e, kind) || !e.cpu_has()) continue;
        if (forced < 0 && e.float_level > level) continue;
        return i;
    }
    return 0;
}

}  // namespace

std::vector<std::string> runnable_paths() {
    std::vector<std::string> names;
    for (const auto& e : kPaths)
        if (e.cpu_has()) names.emplace_back(e.name);
    return names;
}

std::vector<std::string> runnable_paths(Kind kind) {
    std::vector<std::string> names;
    for (const auto& e : kPaths)
        if (e.cpu_has() && serves(e, kind)) names.emplace_back(e.name);
    return names;
}

std::string path_name(Kind kind) {
    return kPaths[chosen(kind)].name;
}

void set_path(const std::string& name) {
    if (name.empty()) {
        g_forced.store(-1);
        return;
    }
    for (int i = 0; i < kPathCount; ++i)
        if (name == kPaths[i].name && kPaths[i].cpu_has()) {
            g_forced.store(i);
            return;
        }
    std::string known;
    for (const auto& p : runnable_paths())
        known += (known.empty() ? "" : ", ") + p;
    throw std::invalid_argument("name: expected '' or one of the paths this CPU runs (" + known +
                                "), got '" + name + "'");
}

const QuantKernels& active_kernels(Kind kind) {
    return kPaths[chosen(kind)].kernels();
}

}  // namespace rnnfast::quantized
