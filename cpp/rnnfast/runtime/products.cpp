#include "products.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "dispatch.hpp"
#include "rnnfast/quantized/qops.hpp"

namespace rnnfast {
namespace {

thread_local Products t_products = Products::float32;
enum class Path { automatic, emulated, avx512_bf16 };
std::atomic<Path> g_path{Path::automatic};

void round_all(float* p, index n) {
    for (index i = 0; i < n; ++i)
        p[i] = round_to_bf16(p[i]);
}

// A rounded copy's buffer, per thread and per use (the kernels below hold two at once).
float* rounded_buffer(int slot, index n) {
    thread_local std::vector<float> buffers[2];
    std::vector<float>& b = buffers[slot];
    if (b.size() < static_cast<size_t>(n)) b.resize(static_cast<size_t>(n));
    return b.data();
}

const float* rounded_copy(int slot, const float* x, index n) {
    float* out = rounded_buffer(slot, n);
    for (index i = 0; i < n; ++i)
        out[i] = round_to_bf16(x[i]);
    return out;
}

// The product entries of a float table made to multiply bf16-rounded operands: products of two
// bf16 values are exact in float32, so the float kernels then sum exactly what VDPBF16PS would
// (in their own order). The native table takes dot_rows and matvec from here as well: they run
// only at a batch of one with H <= 90 (gemm/stream_pack.hpp), where a copy costs nothing.
template <const KernelTable<float>& (*Base)()>
struct RoundedProducts {
    static void pack_b(MatView<float> B, index K, index N, index p0, index p1, float* dst) {
        Base().pack_b(B, K, N, p0, p1, dst);
        const index nr = Base().nr;  // the float layout: panel p at p * K * nr
        round_all(dst + p0 * K * nr, (p1 - p0) * K * nr);
    }
    static void gemm_block(const GemmTask<float>& t, index m0, index m1, index p0, index p1) {
        if (m1 <= m0 || t.K == 0) return Base().gemm_block(t, m0, m1, p0, p1);
        // A's rows [m0, m1), rounded, row-major; the task still reads them by their row numbers
        // (the float kernel's blocking follows the task's M), so the view starts m0 rows early.
        float* rows = rounded_buffer(0, (m1 - m0) * t.K);
        for (index r = m0; r < m1; ++r)
            for (index k = 0; k < t.K; ++k)
                rows[(r - m0) * t.K + k] = round_to_bf16(t.A.p[r * t.A.rs + k * t.A.cs]);
        GemmTask<float> u = t;
        const auto start = reinterpret_cast<std::uintptr_t>(rows) -
                           static_cast<std::uintptr_t>(m0 * t.K) * sizeof(float);
        u.A = MatView<float>{reinterpret_cast<const float*>(start), t.K, 1};
        Base().gemm_block(u, m0, m1, p0, p1);
    }
    static void dot_rows(const float* W, index rows, index cols, const float* v, float* out) {
        Base().dot_rows(rounded_copy(0, W, rows * cols), rows, cols, rounded_copy(1, v, cols), out);
    }
    static void dot_rows_pair(const float* W1, index cols1, const float* v1, const float* W2,
                              index cols2, const float* v2, index rows, float* out) {
        dot_rows(W1, rows, cols1, v1, out);  // (the rounded copies are per operand)
        dot_rows(W2, rows, cols2, v2, out);
    }
    static void matvec(const float* b, index K, const float* v, float* out, index n, Epilogue op,
                       const float* aux) {
        const index nr = Base().nr, width = (n + nr - 1) / nr * nr;
        Base().matvec(rounded_copy(0, b, K * width), K, rounded_copy(1, v, K), out, n, op, aux);
    }
    static KernelTable<float> table(const char* name) {
        KernelTable<float> k = Base();
        k.isa = name;
        k.pack_b = &pack_b;
        k.gemm_block = &gemm_block;
        k.dot_rows = &dot_rows;
        k.dot_rows_pair = &dot_rows_pair;
        k.matvec = &matvec;
        k.rounds_operands = true;
        return k;
    }
};

#if defined(RNNFAST_X86_ISAS)
bool cpu_has_avx512_bf16() {
    return __builtin_cpu_supports("avx512bf16");
}

// The avx512 float table with a native GEMM: dot_rows and matvec keep the rounded copies.
KernelTable<float> native_table(const char* name, Bf16Gemm g) {
    KernelTable<float> t = RoundedProducts<&isa_avx512::table_f32>::table(name);
    t.pack_b = g.pack_b;
    t.gemm_block = g.gemm_block;
    return t;
}
const KernelTable<float>& avx512_bf16_table() {
    static const KernelTable<float> k = native_table("avx512_bf16", isa_avx512::bf16_gemm());
    return k;
}
const KernelTable<float>& amx_table() {
    static const KernelTable<float> k = native_table("amx_bf16", isa_avx512::amx_bf16_gemm());
    return k;
}
// AMX as the quantized paths found it: CPUID, the OS's tile state and Linux's permission.
bool cpu_has_amx() {
    static const bool ok = [] {
        for (const std::string& p : quantized::runnable_paths())
            if (p == "amx") return true;
        return false;
    }();
    return ok;
}
#endif

bool native_runs() {
#if defined(RNNFAST_X86_ISAS)
    return active_isa() == "avx512" && cpu_has_avx512_bf16();
#else
    return false;
#endif
}

// The native path now: AMX where the CPU has it (unless the test switch asks for the other).
std::string native_path() {
    if (!native_runs()) return "";
#if defined(RNNFAST_X86_ISAS)
    const std::string wanted = g_path.load() == Path::avx512_bf16 ? "avx512_bf16" : "";
    if (wanted.empty() && cpu_has_amx()) return "amx";
#endif
    return "avx512_bf16";
}

const KernelTable<float>& emulated_table() {
    static const KernelTable<float> base =
        RoundedProducts<&isa_baseline::table_f32>::table("baseline+bf16-emulated");
#if defined(RNNFAST_X86_ISAS)
    static const KernelTable<float> avx2 =
        RoundedProducts<&isa_avx2::table_f32>::table("avx2+bf16-emulated");
    static const KernelTable<float> avx512 =
        RoundedProducts<&isa_avx512::table_f32>::table("avx512+bf16-emulated");
    const std::string isa = active_isa();
    if (isa == "avx512") return avx512;
    if (isa == "avx2") return avx2;
#endif
    return base;
}

}  // namespace

float round_to_bf16(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u)
        u |= 0x00400000u;  // a NaN stays a quiet NaN
    else
        u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    float r;
    std::memcpy(&r, &u, sizeof(r));
    return r;
}

std::string bf16_unavailable_reason() {
    if (!bf16_products_path().empty()) return "";
    return "bf16 products need a CPU with AVX512-BF16 (VDPBF16PS) or AMX, and the avx512 "
           "kernels active; the kernels active here are '" +
           active_isa() +
           "' (rnnfast.show_config() lists what this CPU has). Emulated bf16 would only be "
           "slower than float32: use precision='float32' here";
}

std::string bf16_products_path() {
    if (g_path.load() == Path::emulated) return "emulated";
    return native_path();
}

void set_bf16_path(const std::string& name) {
    if (name.empty()) {
        g_path.store(Path::automatic);
    } else if (name == "emulated") {
        g_path.store(Path::emulated);
    } else if (name == "avx512_bf16" && native_runs()) {
        g_path.store(Path::avx512_bf16);
    } else if (name == "amx" && native_runs()
#if defined(RNNFAST_X86_ISAS)
               && cpu_has_amx()
#endif
    ) {
        g_path.store(Path::automatic);
    } else {
        throw std::invalid_argument(
            "path: expected '', 'emulated' or a bf16 path this CPU runs (" +
            (native_path().empty() ? std::string("none here") : native_path()) + "), got '" + name +
            "'");
    }
}

void set_bf16_emulation(bool on) {
    g_path.store(on ? Path::emulated : Path::automatic);
}
bool bf16_emulation() {
    return g_path.load() == Path::emulated;
}

const KernelTable<float>& bf16_table() {
    const std::string path = bf16_products_path();
    if (path == "emulated") return emulated_table();
#if defined(RNNFAST_X86_ISAS)
    if (path == "amx") return amx_table();
    if (path == "avx512_bf16") return avx512_bf16_table();
#endif
    throw std::runtime_error(bf16_unavailable_reason());
}

void set_thread_products(Products p) {
    if (p == Products::bf16) bf16_table();  // throws where there is none
    t_products = p;
}
Products thread_products() {
    return t_products;
}

}  // namespace rnnfast
