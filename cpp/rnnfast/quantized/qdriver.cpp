// The quantized recurrent forward over a whole sequence, a pass of the float drivers' time loop
// (drivers/time_loop.hpp) as the float forward is, on the products of qproducts.hpp: the input
// projection of a chunk of steps is one product, then each step is one product over the running
// sequences (sorted longest first) whose epilogue dequantizes, adds the projection and applies
// the activation; each thread owns the same column panels of W_hh at every step, with one
// barrier per step.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "qproducts.hpp"
#include "rnnfast/cells/elman.hpp"
#include "rnnfast/drivers/rnn.hpp"
#include "rnnfast/drivers/time_loop.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/runtime/dispatch.hpp"

namespace rnnfast::quantized {
namespace {

constexpr index kChunkSteps = 16;        // steps projected at once, at least ...
constexpr index kChunkValues = 1 << 18;  // ... or as many as make this many outputs

// The activation over a block, by the active float kernels' vector epilogue (a K = 0 GEMM
// applies op(C) in place), so a quantized layer's tanh is the float layer's.
void activate(float* h, index ld, const Block& b, Activation act) {
    if (b.m1 <= b.m0 || b.c1 <= b.c0) return;
    const KernelTable<float>& kt = kernels<float>();
    static const float none = 0.0f;
    GemmTask<float> t =
        packed_task<float>(b.m1 - b.m0, b.c1 - b.c0, 0, &none, h + b.m0 * ld + b.c0, ld);
    t.A = {&none, 0, 0};
    t.accumulate = true;
    t.op = forward_epilogue(act);
    kt.gemm_block(t, 0, t.M, 0, panel_count(t.N, kt.nr));
}

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
        return {{a.steps, chunk, false, true},  // a region per chunk
                {threads, threads},
                {B, active.data(), nullptr},
                {ElmanCell<float>::columns(H), panels, kPanel, kShareRows}};
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
                ElmanCell<float>::finish_step(h, h_prev, H, own, p.a.alpha);
                keep_final_state(p.a.h_n, h, H, own, st.ending);
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
