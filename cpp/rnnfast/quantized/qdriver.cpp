// The quantized products and the recurrent forward over a whole sequence. The forward is a pass
// of the float drivers' time loop (drivers/time_loop.hpp), as the float forward is: the input
// projection of a chunk of steps is one product, then each step is one product over the running
// sequences (sorted longest first) whose epilogue dequantizes, adds the projection and applies
// the activation; each thread owns the same column panels of W_hh at every step, with one
// barrier per step.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "qops.hpp"
#include "rnnfast/cells/elman_leaky.hpp"
#include "rnnfast/drivers/rnn.hpp"
#include "rnnfast/drivers/time_loop.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"

namespace rnnfast::quantized {
namespace {

constexpr int kShareRows = 4;            // rows granule when threads split rows
constexpr index kChunkSteps = 16;        // steps projected at once, at least ...
constexpr index kChunkValues = 1 << 18;  // ... or as many as make this many outputs
constexpr index kDenseRows = 1024;       // rows of a dense product per pass (bounds the buffers)

// An uninitialised buffer: every value is written before it is read, and zero-filling
// megabytes per call (then faulting the pages in) showed in profiles.
template <class T>
struct Buffer {
    std::unique_ptr<T[]> p;
    void resize(index n) { p.reset(n > 0 ? new T[static_cast<size_t>(n)] : nullptr); }
    T* data() const { return p.get(); }
};

// Activations of up to `capacity` rows prepared for products with `w` (its kind and K): int8
// rows (leading dimension w.pcols) with their scales, or bf16 rows.
struct Prepared {
    const PackedMatrix* w;
    const QuantKernels* k;
    index lda;
    Buffer<std::int8_t> q;
    Buffer<std::uint16_t> b;
    Buffer<float> scale;

    // The padding of each row, columns [K, lda), is zeroed here once: prepare() writes [0, K).
    Prepared(const PackedMatrix& m, const QuantKernels& kernels, index capacity)
        : w(&m), k(&kernels), lda(m.pcols) {
        const auto pad = static_cast<size_t>(lda - m.cols);
        if (m.kind == Kind::int8) {
            q.resize(capacity * lda);
            scale.resize(capacity);
            for (index r = 0; r < capacity; ++r)
                std::memset(q.data() + r * lda + m.cols, 0, pad);
        } else {
            b.resize(capacity * lda);
            for (index r = 0; r < capacity; ++r)
                std::memset(b.data() + r * lda + m.cols, 0, pad * sizeof(std::uint16_t));
        }
    }
    // Rows [m0, m1) of x (leading dimension ldx); a tanh layer's recurrent input takes the fixed
    // scale where it can.
    void prepare(const float* x, index ldx, index m0, index m1, bool tanh_state) {
        if (m1 <= m0) return;
        if (w->kind == Kind::int8)
            k->rows.quantize(x + m0 * ldx, ldx, m1 - m0, w->cols, q.data() + m0 * lda, lda,
                             scale.data() + m0, tanh_state);
        else
            k->rows.to_bf16(x + m0 * ldx, ldx, m1 - m0, w->cols, b.data() + m0 * lda, lda);
    }
};

// The raw products (int32 or float) of up to `capacity` rows, leading dimension w.prows: row i
// holds prepared row r0 + i of the last compute().
struct Products {
    index ldc;
    Buffer<std::int32_t> acc;
    Buffer<float> out;

    Products(const PackedMatrix& m, index capacity) : ldc(m.prows) {
        if (m.kind == Kind::int8)
            acc.resize(capacity * ldc);
        else
            out.resize(capacity * ldc);
    }
    // Rows [r0, r1) of `a` times panels [p0, p1) of its matrix.
    void compute(const Prepared& a, index r0, index r1, index p0, index p1) {
        if (r0 >= r1 || p0 >= p1) return;
        if (a.w->kind == Kind::int8)
            a.k->int8_block(Int8Task{a.q.data() + r0 * a.lda, a.lda, a.w, acc.data(), ldc}, 0,
                            r1 - r0, p0, p1);
        else
            a.k->bf16_block(Bf16Task{a.b.data() + r0 * a.lda, a.lda, a.w, out.data(), ldc}, 0,
                            r1 - r0, p0, p1);
    }
    // dst[r, j] = dequantized product + add[r * add_rs + j] (add may be dst itself, or null)
    // for rows r of blk (those of the last compute) and its columns; the contract's order:
    // float(acc) * (s_a * s_w), then the addition.
    void finish(const Prepared& a, index r0, const float* add, index add_rs, float* dst, index ldd,
                const Block& blk) const {
        const index n = blk.c1 - blk.c0, rows = blk.m1 - blk.m0;
        if (n <= 0 || rows <= 0) return;
        const index i = blk.m0 - r0;  // the block's first row in this buffer
        const float* ad = add ? add + blk.m0 * add_rs + blk.c0 : nullptr;
        float* d = dst + blk.m0 * ldd + blk.c0;
        if (a.w->kind == Kind::int8)
            a.k->rows.finish_int8(acc.data() + i * ldc + blk.c0, ldc, rows, a.scale.data() + blk.m0,
                                  a.w->scale.data() + blk.c0, ad, add_rs, d, ldd, n);
        else
            a.k->rows.finish_bf16(out.data() + i * ldc + blk.c0, ldc, rows, ad, add_rs, d, ldd, n);
    }
};

Block columns_of(const Share& s, index N) {
    return Block{s.m0, s.m1, std::min(N, s.p0 * kPanel), std::min(N, s.p1 * kPanel)};
}

// The activation over a block, by the active float kernels' vector epilogue (a K = 0 GEMM
// applies op(C) in place), so a quantized layer's tanh is the float layer's.
void activate(float* h, index ld, const Block& b, Activation act) {
    if (b.m1 <= b.m0 || b.c1 <= b.c0) return;
    const KernelTable<float>& kt = kernels<float>();
    static const float none = 0.0f;
    GemmTask<float> t;
    t.M = b.m1 - b.m0;
    t.N = b.c1 - b.c0;
    t.K = 0;
    t.A = {&none, 0, 0};
    t.packed_b = &none;
    t.C = h + b.m0 * ld + b.c0;
    t.ldc = ld;
    t.accumulate = true;
    t.op = forward_epilogue(act);
    kt.gemm_block(t, 0, t.M, 0, panel_count(t.N, kt.nr));
}

int product_threads(index M, const PackedMatrix& w, Sync sync) {
    return threads_for(2.0 * double(M) * double(w.rows) * double(w.cols), std::max(M, w.panels()),
                       sync);
}

// dst (M x N, leading dimension ldd) = Q(x) . w^T + add (see Products::finish), in parallel;
// `a` holds at least M rows. Each thread runs its share in blocks of kBlockRows rows, so its raw
// products stay small (and in cache) whatever M is.
constexpr index kBlockRows = 32;

void project(Prepared& a, const float* x, index M, const float* add, index add_rs, float* dst,
             index ldd) {
    const PackedMatrix& w = *a.w;
    if (M == 0 || w.rows == 0) return;
    const int threads = product_threads(M, w, Sync::fork_join);
#pragma omp parallel num_threads(threads)
    {
        const int ti = thread_index(), nt = team_size();
        a.prepare(x, w.cols, M * ti / nt, M * (ti + 1) / nt, false);
#pragma omp barrier
        const Share s = share_of(M, w.panels(), kShareRows, ti, nt);
        Products mine(w, std::min(kBlockRows, M));
        for (index r0 = s.m0; r0 < s.m1 && s.p0 < s.p1; r0 += kBlockRows) {
            const index r1 = std::min(s.m1, r0 + kBlockRows);
            mine.compute(a, r0, r1, s.p0, s.p1);
            mine.finish(a, r0, add, add_rs, dst, ldd,
                        columns_of(Share{r0, r1, s.p0, s.p1}, w.rows));
        }
    }
}

}  // namespace

void matmul_int32(const std::int8_t* qa, index M, const PackedMatrix& w, std::int32_t* acc) {
    if (M == 0 || w.rows == 0) return;
    Prepared a(w, active_kernels(Kind::int8), M);
    for (index i = 0; i < M; ++i) {
        std::memcpy(a.q.data() + i * a.lda, qa + i * w.cols, static_cast<size_t>(w.cols));
        std::memset(a.q.data() + i * a.lda + w.cols, 0, static_cast<size_t>(a.lda - w.cols));
    }
    Products out(w, M);
    const int threads = product_threads(M, w, Sync::fork_join);
#pragma omp parallel num_threads(threads)
    {
        const Share s = share_of(M, w.panels(), kShareRows, thread_index(), team_size());
        Int8Task t{a.q.data() + s.m0 * a.lda, a.lda, &w, out.acc.data() + s.m0 * out.ldc, out.ldc};
        if (s.m0 < s.m1 && s.p0 < s.p1) a.k->int8_block(t, 0, s.m1 - s.m0, s.p0, s.p1);
    }
    for (index i = 0; i < M; ++i)
        std::memcpy(acc + i * w.rows, out.acc.data() + i * out.ldc,
                    sizeof(std::int32_t) * static_cast<size_t>(w.rows));
}

void dense(const float* x, index M, const PackedMatrix& w, const float* bias, float* y) {
    Prepared a(w, active_kernels(w.kind), std::min(M, kDenseRows));
    for (index m0 = 0; m0 < M; m0 += kDenseRows) {
        const index rows = std::min(kDenseRows, M - m0);
        project(a, x + m0 * w.cols, rows, bias, 0, y + m0 * w.rows, w.rows);
    }
}

namespace {

// The recurrent forward as a pass of the time loop (drivers/time_loop.hpp), a region per chunk:
// the chunk's input projection is a product with its own thread count, run before the region.
struct ForwardPass : TimeLoopPass {
    const ForwardArgs& a;
    const index B, D, H, step_size;
    const PackedMatrix& w_hh;
    const QuantKernels& k;
    const std::vector<index> active;
    const bool tanh_state;
    const index panels;
    const int threads;
    const index chunk;
    // Steps t live in y, or in a ring of one chunk of steps when only h_T is kept.
    const bool keep_all;
    std::vector<float> carry, ring;
    Prepared projection;
    // Each thread prepares the h_{t-1} rows its product reads, in buffers of its own.
    std::vector<Prepared> own_input;
    std::vector<Products> own_products;
    float* buffer = nullptr;

    ForwardPass(const ForwardArgs& args, std::vector<float> start)
        : a(args),
          B(args.batch),
          D(args.input_size),
          H(args.hidden_size),
          step_size(B * H),
          w_hh(*args.w_hh),
          k(active_kernels(w_hh.kind)),
          active(active_rows(args.lengths, args.steps, B)),
          tanh_state(args.act == Activation::tanh),
          panels(w_hh.panels()),
          threads(threads_for(2.0 * double(B) * double(H) * double(H), std::max(panels, B),
                              Sync::barrier)),
          chunk(std::min(args.steps, std::max(kChunkSteps, kChunkValues / step_size))),
          keep_all(args.y != nullptr),
          carry(std::move(start)),
          ring(keep_all ? 0 : static_cast<size_t>(chunk * step_size)),
          projection(*args.w_ih, k, chunk * B) {
        for (int i = 0; i < threads; ++i) {
            own_input.emplace_back(w_hh, k, B);
            own_products.emplace_back(w_hh, B);
        }
    }

    LoopShape shape() const {
        LoopShape s;
        s.steps = a.steps;
        s.chunk = chunk;
        s.region_per_chunk = true;
        s.team = threads;
        s.stepping = threads;
        s.batch = B;
        s.active = active.data();
        s.columns = H;
        s.panels = panels;
        s.panel = kPanel;
        s.row_granule = kShareRows;
        return s;
    }

    void before_region(const Chunk& c) {
        buffer = keep_all ? a.y + c.t0 * step_size : ring.data();
        project(projection, a.x + c.t0 * B * D, c.steps * B, a.bias, 0, buffer, H);
    }

    void after_region(const Chunk& c) {
        if (keep_all)  // padded steps output zeros
            for (index t = c.t0; t < c.t0 + c.steps; ++t) {
                const index rows = active[static_cast<size_t>(t)];
                std::memset(a.y + t * step_size + rows * H, 0,
                            sizeof(float) * static_cast<size_t>((B - rows) * H));
            }
        std::memcpy(carry.data(), buffer + (c.steps - 1) * step_size,
                    sizeof(float) * static_cast<size_t>(step_size));
    }

    struct Member {
        ForwardPass& p;
        Prepared& mine;
        Products& products;

        Member(ForwardPass& pass, const Team& team, int)
            : p(pass),
              mine(pass.own_input[static_cast<size_t>(team.me)]),
              products(pass.own_products[static_cast<size_t>(team.me)]) {}

        void chunk_begin(const Chunk&) {}
        void chunk_end(const Chunk&) {}

        void step(const Chunk&, const Step& st) {
            const index H = p.H;
            const Share& s = st.share;
            const Block& own = st.own;
            const float* h_prev = st.i == 0 ? p.carry.data() : p.buffer + (st.i - 1) * p.step_size;
            float* h = p.buffer + st.i * p.step_size;
            if (s.m0 < s.m1 && s.p0 < s.p1) {
                mine.prepare(h_prev, H, s.m0, s.m1, p.tanh_state);
                products.compute(mine, s.m0, s.m1, s.p0, s.p1);
                products.finish(mine, s.m0, h, H, h, H, own);  // pre = projection + product
                activate(h, H, own, p.a.act);
                if (p.a.alpha != 1.0f) leaky_mix(h, h_prev, H, own, p.a.alpha);
                const Block ending{std::max(own.m0, st.ending), own.m1, own.c0, own.c1};
                for (index r = ending.m0; r < ending.m1; ++r)
                    std::memcpy(p.a.h_n + r * H + ending.c0, h + r * H + ending.c0,
                                sizeof(float) * static_cast<size_t>(ending.c1 - ending.c0));
            }
        }
    };
};

}  // namespace

void rnn_forward(const ForwardArgs& a) {
    const index T_ = a.steps, B = a.batch, H = a.hidden_size;
    const index step_size = B * H;
    std::vector<float> carry(static_cast<size_t>(step_size), 0.0f);
    if (a.h0 && step_size > 0) std::memcpy(carry.data(), a.h0, sizeof(float) * carry.size());
    if (step_size > 0) std::memcpy(a.h_n, carry.data(), sizeof(float) * carry.size());
    if (T_ == 0 || B == 0 || H == 0) return;
    ForwardPass pass(a, std::move(carry));
    run_time_loop(pass.shape(), pass);
}

}  // namespace rnnfast::quantized
