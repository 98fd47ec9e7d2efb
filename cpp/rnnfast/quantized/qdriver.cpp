// The quantized Elman forward over a whole sequence: the one Elman pass (drivers/elman_pass.hpp)
// on the products of qproducts.hpp (ElmanProducts below), int8 or bf16.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "qproducts.hpp"
#include "rnnfast/cells/elman.hpp"
#include "rnnfast/drivers/elman_pass.hpp"
#include "rnnfast/drivers/rnn.hpp"
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

// The Product of the one Elman pass (drivers/elman_pass.hpp) on quantized weights: the input
// projection of a chunk is one product run before the chunk's region, and each step's product
// over the running rows dequantizes, adds the projection in place and applies the activation.
template <class Cell>
struct ElmanProducts {
    const ForwardArgs& q;
    const index B, D, H;
    const PackedMatrix& w_hh;
    const QuantKernels& k;
    const bool tanh_state;
    const int threads, team;
    const index chunk;
    static constexpr bool region_per_chunk = true;  // the projection runs before each region
    const LoopShape::Columns columns;
    Prepared projection;
    // Each thread prepares the h_{t-1} rows its product reads, in buffers of its own.
    std::vector<Prepared> own_input;
    std::vector<Products> own_products;

    ElmanProducts(const rnnfast::ForwardArgs<float>& args, const ForwardArgs& quantized)
        : q(quantized),
          B(args.batch),
          D(args.input_size),
          H(args.hidden_size),
          w_hh(*quantized.w_hh),
          k(active_kernels(w_hh.kind)),
          tanh_state(args.act == Activation::tanh),
          threads(threads_for(2.0 * double(B) * double(H) * double(H), std::max(w_hh.panels(), B),
                              Sync::barrier)),
          team(threads),
          chunk(std::min(args.steps, std::max(kChunkSteps, kChunkValues / (B * H)))),
          columns{Cell::columns(H), w_hh.panels(), kPanel, kShareRows},
          projection(*quantized.w_ih, k, chunk * B) {
        for (int i = 0; i < threads; ++i) {
            own_input.emplace_back(w_hh, k, B);
            own_products.emplace_back(w_hh, B);
        }
    }

    void finish() {}  // quantized weights are packed once, by rnnfast.quantize

    void before_region(const Chunk& c, float* out) {
        project(projection, q.x + c.t0 * B * D, c.steps * B, q.bias, 0, out, H);
    }

    struct Member {
        ElmanProducts& p;
        Prepared& mine;
        Products& products;

        Member(ElmanProducts& pass, const Team& team, int)
            : p(pass),
              mine(pass.own_input[static_cast<size_t>(team.me)]),
              products(pass.own_products[static_cast<size_t>(team.me)]) {}
        void chunk_begin(const Chunk&, float*) {}

        void step(const Step& st, const float* h_prev, float* h) {
            const index H = p.H;
            const Share& s = st.share;
            if (s.m0 < s.m1 && s.p0 < s.p1) {
                mine.prepare(h_prev, H, s.m0, s.m1, p.tanh_state);
                products.compute(mine, s.m0, s.m1, s.p0, s.p1);
                products.finish(mine, s.m0, h, H, h, H, st.own);  // pre = projection + product
                activate(h, H, st.own, p.q.act);
            }
        }
    };
};

}  // namespace

void rnn_forward(const ForwardArgs& q) {
    rnnfast::ForwardArgs<float> a;  // what the pass reads besides the weights
    a.steps = q.steps;
    a.batch = q.batch;
    a.input_size = q.input_size;
    a.hidden_size = q.hidden_size;
    a.x = q.x;
    a.h0 = q.h0;
    a.lengths = q.lengths;
    a.act = q.act;
    a.alpha = q.alpha;
    a.y = q.y;
    a.h_n = q.h_n;
    run_elman_forward<float, ElmanCell<float>, ElmanProducts<ElmanCell<float>>>(a, q);
}

}  // namespace rnnfast::quantized
