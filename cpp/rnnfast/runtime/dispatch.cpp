#include "dispatch.hpp"

#include "products.hpp"

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace rnnfast {
namespace {

struct IsaEntry {
    const char* name;
    const KernelTable<float>& (*f32)();
    const KernelTable<double>& (*f64)();
    bool (*cpu_has)();
};

bool always() {
    return true;
}
#if defined(RNNFAST_X86_ISAS)
// __builtin_cpu_supports also checks that the OS saves the wider registers (XGETBV).
bool cpu_has_avx2() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
bool cpu_has_avx512() {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
           cpu_has_avx2();
}
#endif

// Lowest first.
const IsaEntry kIsas[] = {
    {"baseline", &isa_baseline::table_f32, &isa_baseline::table_f64, &always},
#if defined(RNNFAST_X86_ISAS)
    {"avx2", &isa_avx2::table_f32, &isa_avx2::table_f64, &cpu_has_avx2},
    {"avx512", &isa_avx512::table_f32, &isa_avx512::table_f64, &cpu_has_avx512},
#endif
};
constexpr int kIsaCount = static_cast<int>(sizeof(kIsas) / sizeof(kIsas[0]));

int best_supported() {
    int best = 0;
    for (int i = 0; i < kIsaCount; ++i)
        if (kIsas[i].cpu_has()) best = i;
    return best;
}

int find(const std::string& name) {
    for (int i = 0; i < kIsaCount; ++i)
        if (name == kIsas[i].name) return i;
    return -1;
}

std::string g_note;

int initial_isa() {
    const int best = best_supported();
    const char* env = std::getenv("RNNFAST_ISA");
    if (env == nullptr || *env == '\0') return best;
    const int wanted = find(env);
    if (wanted < 0) {
        g_note =
            std::string("RNNFAST_ISA=") + env + " is not a known ISA; using " + kIsas[best].name;
        return best;
    }
    if (wanted > best) {
        g_note =
            std::string("RNNFAST_ISA=") + env + " is not supported here; using " + kIsas[best].name;
        return best;
    }
    return wanted;
}

std::atomic<int> g_active{initial_isa()};

}  // namespace

std::vector<std::string> compiled_isas() {
    std::vector<std::string> names;
    for (const auto& e : kIsas) {
        // Reading a table's entries runs none of its code: safe for an ISA this CPU lacks.
        if (!complete(e.f32()) || !complete(e.f64()))
            throw std::logic_error(std::string("the kernel table of ISA '") + e.name +
                                   "' has an empty entry (kernels/simd_kernels.inl's kTable)");
        names.emplace_back(e.name);
    }
    return names;
}

std::vector<std::string> supported_isas() {
    std::vector<std::string> names;
    for (const auto& e : kIsas)
        if (e.cpu_has()) names.emplace_back(e.name);
    return names;
}

std::string active_isa() {
    return kIsas[g_active.load()].name;
}
std::string isa_note() {
    return g_note;
}

void set_active_isa(const std::string& name) {
    const int i = find(name);
    if (i < 0 || !kIsas[i].cpu_has())
        throw std::invalid_argument("isa: expected one of the supported ISAs, got '" + name + "'");
    g_active.store(i);
}

template <>
const KernelTable<float>& kernels<float>() {
    if (thread_products() == Products::bf16) return bf16_table();  // products.hpp
    return kIsas[g_active.load()].f32();
}
template <>
const KernelTable<double>& kernels<double>() {
    return kIsas[g_active.load()].f64();
}

}  // namespace rnnfast
