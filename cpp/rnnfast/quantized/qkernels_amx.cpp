// The AMX path (flags -mamx-tile -mamx-int8 -mamx-bf16 set in CMakeLists.txt): tdpbssd (s8 x s8,
// int32 sums: exact, no shift of the activations) and tdpbf16ps (bf16 pairs, float32 sums).
// The packed panels (qlayout.hpp) are already B tiles: 16 groups of 64 bytes, one per row.
// A tile block is up to 32 rows x 2 panels: four C tiles (tmm0-3), two A tiles (tmm4-5), two B
// tiles (tmm6-7), so each B tile loaded serves two A tiles and each A tile two B tiles.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <type_traits>

#include "qlayout.hpp"

namespace rnnfast::quantized::qpath_amx {
namespace {

// The 64-byte tile configuration of palette 1 (Intel SDM, LDTILECFG).
struct alignas(64) TileConfig {
    std::uint8_t palette = 1;
    std::uint8_t start_row = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
};

// rows0 / rows1: rows of the first and second A tile (rows1 may be 0: then tmm1-3 stay unused).
void configure(int rows0, int rows1) {
    TileConfig cfg;
    auto set = [&](int tmm, int rows) {
        cfg.rows[tmm] = static_cast<std::uint8_t>(rows);
        cfg.colsb[tmm] = rows ? 64 : 0;
    };
    set(0, rows0);  // C of A0 x B0
    set(1, rows0);  // C of A0 x B1
    set(2, rows1);  // C of A1 x B0
    set(3, rows1);  // C of A1 x B1
    set(4, rows0);  // A0
    set(5, rows1);  // A1
    set(6, 16);     // B0: 16 groups
    set(7, 16);     // B1
    _tile_loadconfig(&cfg);
}

// The tile product of the kind; the intrinsics take literal tile numbers (they are pasted into
// the instruction's text), hence a macro.
#define RNNFAST_AMX_DOT(c, a, b)     \
    do {                             \
        if constexpr (kInt8)         \
            _tile_dpbssd(c, a, b);   \
        else                         \
            _tile_dpbf16ps(c, a, b); \
    } while (0)

// Elem: the activation element type (int8 or bf16 bits); Out: the sum type.
template <class Task>
void amx_block(const Task& t, index m0, index m1, index p0, index p1) {
    using Elem =
        typename std::remove_const<typename std::remove_pointer<decltype(t.a)>::type>::type;
    using Out = typename std::remove_pointer<decltype(t.c)>::type;
    constexpr bool kInt8 = std::is_same<Elem, std::int8_t>::value;
    const PackedMatrix& w = *t.w;
    const index panel_bytes = w.panel_bytes();
    const index chunks = w.pcols * static_cast<index>(sizeof(Elem)) / 64;  // 64 bytes of k each
    const index a_stride = t.lda * static_cast<index>(sizeof(Elem));
    const index c_stride = t.ldc * static_cast<index>(sizeof(Out));
    int configured0 = -1, configured1 = -1;
    for (index i = m0; i < m1; i += 32) {
        const int rows0 = static_cast<int>(m1 - i < 16 ? m1 - i : 16);
        const int rows1 = static_cast<int>(m1 - i - rows0 < 16 ? m1 - i - rows0 : 16);
        if (rows0 != configured0 || rows1 != configured1) {
            configure(rows0, rows1);
            configured0 = rows0;
            configured1 = rows1;
        }
        const Elem* a0 = t.a + i * t.lda;
        const Elem* a1 = a0 + 16 * t.lda;
        for (index p = p0; p < p1; p += 2) {
            const bool two_panels = p + 1 < p1;
            const std::uint8_t* b0 = w.data.data() + p * panel_bytes;
            const std::uint8_t* b1 = b0 + panel_bytes;
            _tile_zero(0);
            _tile_zero(1);
            if (rows1) {
                _tile_zero(2);
                _tile_zero(3);
            }
            for (index c = 0; c < chunks; ++c) {
                const index off = c * 64 / static_cast<index>(sizeof(Elem));
                _tile_loadd(4, a0 + off, a_stride);
                _tile_loadd(6, b0 + c * 1024, 64);
                RNNFAST_AMX_DOT(0, 4, 6);
                if (rows1) {
                    _tile_loadd(5, a1 + off, a_stride);
                    RNNFAST_AMX_DOT(2, 5, 6);
                }
                if (two_panels) {
                    _tile_loadd(7, b1 + c * 1024, 64);
                    RNNFAST_AMX_DOT(1, 4, 7);
                    if (rows1) RNNFAST_AMX_DOT(3, 5, 7);
                }
            }
            Out* c0 = t.c + i * t.ldc + p * kPanel;
            _tile_stored(0, c0, c_stride);
            if (two_panels) _tile_stored(1, c0 + kPanel, c_stride);
            if (rows1) {
                _tile_stored(2, c0 + 16 * t.ldc, c_stride);
                if (two_panels) _tile_stored(3, c0 + 16 * t.ldc + kPanel, c_stride);
            }
        }
    }
    _tile_release();
}

// Below kFewRows rows, tiles would be mostly empty: AVX-512 VNNI computes the same exact sums
// faster (measured at B = 1: 1.2x float32 against 0.8x on tiles, H = 64).
constexpr index kFewRows = 8;

void int8_block(const Int8Task& t, index m0, index m1, index p0, index p1) {
    if (m1 - m0 < kFewRows)
        qpath_avx512_vnni::kernels().int8_block(t, m0, m1, p0, p1);
    else
        amx_block(t, m0, m1, p0, p1);
}
void bf16_block(const Bf16Task& t, index m0, index m1, index p0, index p1) {
    amx_block(t, m0, m1, p0, p1);
}

}  // namespace

// The row passes are AVX-512's (every AMX CPU has it): taken when first asked, at run time.
const QuantKernels& kernels() {
    static const QuantKernels k = {"amx", &int8_block, &bf16_block,
                                   qpath_avx512_vnni::kernels().rows};
    return k;
}

// Linux hands out the tile data state (8 KiB per thread) only on request, once per process.
bool request_tile_permission() {
#if defined(__linux__)
    constexpr long kReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr long kXtileData = 18;         // XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
#else
    return false;
#endif
}

}  // namespace rnnfast::quantized::qpath_amx
