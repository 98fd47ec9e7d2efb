// The quantized gated forward (GRU, LSTM): the one gated pass (drivers/gated_pass.hpp) on the
// products of qproducts.hpp, int8 or bf16 (GatedProducts below). Per chunk of steps the input
// projection is one product (G*H wide), run before the chunk's region; each step's product
// reads the quantized h_{t-1} against W_hh, whose rows were packed in the gate layout with
// blocks of one panel (16 units, cells/gate_layout.hpp), so that a thread that owns a block's
// panels has every gate of its units and runs the float cell's epilogue at once. The reset_before
// GRU's W_hn (r * h) and the projected LSTM's W_hr m are the pass's sub-steps after a barrier.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "qops.hpp"
#include "qproducts.hpp"
#include "rnnfast/cells/gate_layout.hpp"
#include "rnnfast/cells/gated_cells.hpp"
#include "rnnfast/drivers/gated_pass.hpp"
#include "rnnfast/drivers/rnn.hpp"
#include "rnnfast/runtime/dispatch.hpp"

namespace rnnfast::quantized {
namespace {

constexpr index kChunkSteps = 16;        // steps projected at once, at least ...
constexpr index kChunkValues = 1 << 18;  // ... or as many as make this many projected values

// Panels [first, end) of a matrix packed in `layout` (blocks of kPanel units) for unit blocks
// [u0, u1): a full block's gates are whole panels, a last narrower one shares its last panel
// with the padding only.
index first_panel(const GateLayout& layout, index u0) {
    return layout.base(u0) / kPanel;
}
index end_panel(const GateLayout& layout, index u1) {
    return (layout.base(u1) + kPanel - 1) / kPanel;
}

std::vector<float> in_layout(const std::vector<float>& natural, const GateLayout& layout) {
    return natural.empty() ? natural : rows_in_layout(natural.data(), layout, 1);
}

// The Product of the gated pass on quantized weights (drivers/gated_pass.hpp lists what it
// gives). No token ids, general masks or dropout: the bindings refuse them.
template <class Cell>
struct GatedProducts : GatedSizes {
    const GatedForwardArgs<float>& a;
    const GatedWeights& w;
    const QuantKernels& k;
    const GateLayout layout;      // the projection's columns
    const GateLayout rec_layout;  // the recurrent product's: all gates, or r and z alone
    // A tanh cell's h_t (a mix of tanh values and h_{t-1}, or o * tanh(c)) lies in [-1, 1]:
    // its rows take the fixed int8 scale where they do (checked per row by the kernels).
    const bool tanh_state;
    const int threads, team;
    const index chunk;
    static constexpr bool region_per_chunk = true;  // the projection runs before each region
    static constexpr int row_granule = kShareRows;
    std::vector<float> bias_x, bias_h, gh, hn;
    Prepared projection;
    // Each thread prepares the rows its products read in buffers of its own.
    std::vector<Prepared> own_h, own_rh, own_m;
    std::vector<Products> own_rec, own_hn, own_hr;

    GatedProducts(const GatedForwardArgs<float>& args, const GatedWeights& weights)
        : GatedSizes(args, Cell::kGates),
          a(args),
          w(weights),
          k(active_kernels(weights.w_hh->kind)),
          layout{H, Cell::kGates, kPanel},
          rec_layout{H, Cell::kStepGates, kPanel},
          tanh_state(args.act == Pointwise::tanh && args.proj_size == 0),
          threads(threads_for(2.0 * double(B) * double(R) * double(GH),
                              std::max(layout.blocks(), B), Sync::barrier)),
          team(threads),
          chunk(std::min(args.steps,
                         std::max(kChunkSteps, kChunkValues / std::max<index>(1, B * GH)))),
          projection(*weights.w_ih, k, chunk * B) {
        bias_x = in_layout(projection_bias<Cell>(a), layout);
        bias_h = in_layout(recurrent_bias<Cell>(a), layout);
        gh.resize(static_cast<size_t>(B * rec_layout.columns()));
        if (Cell::kSecondProduct) hn.resize(static_cast<size_t>(B * H));
        for (int i = 0; i < threads; ++i) {
            own_h.emplace_back(*w.w_hh, k, B);
            own_rec.emplace_back(*w.w_hh, B);
            if (Cell::kSecondProduct) {
                own_rh.emplace_back(*w.w_hn, k, B);
                own_hn.emplace_back(*w.w_hn, B);
            }
            if (P > 0) {
                own_m.emplace_back(*w.w_hr, k, B);
                own_hr.emplace_back(*w.w_hr, B);
            }
        }
    }

    void finish() {}  // quantized weights are packed once, by rnnfast.quantize

    void before_region(const Chunk& c, float* gx) {
        project(projection, a.x + c.t0 * B * D, c.steps * B,
                bias_x.empty() ? nullptr : bias_x.data(), 0, gx, GH);
    }

    struct Member {
        GatedProducts& p;
        const Team team;
        const int stepping;
        const size_t me;
        index m0 = 0, m1 = 0, u0 = 0, u1 = 0;

        Member(GatedProducts& products, const Team& t, int stepping_members)
            : p(products), team(t), stepping(stepping_members), me(static_cast<size_t>(t.me)) {}
        void chunk_begin(const Chunk&, float*) {}

        // rows [m0, m1) of dst (leading dimension ldd) = Q(src rows) . W^T (+ bias) for
        // panels [q0, q1), columns [c0, c1), on this thread's buffers for W.
        static void product(Prepared& in, Products& out, const float* src, index lds, bool tanh,
                            index m0, index m1, index q0, index q1, const float* bias, float* dst,
                            index ldd, index c0, index c1) {
            if (m0 >= m1 || q0 >= q1) return;
            in.prepare(src, lds, m0, m1, tanh);
            out.compute(in, m0, m1, q0, q1);
            out.finish(in, m0, bias, 0, dst, ldd, Block{m0, m1, c0, c1});
        }

        void first(const Step& st, const float* h_prev) {
            u0 = st.share.p0, u1 = st.share.p1, m0 = st.share.m0, m1 = st.share.m1;
            const GateLayout& Lr = p.rec_layout;
            product(p.own_h[me], p.own_rec[me], h_prev, p.R, p.tanh_state, m0, m1,
                    first_panel(Lr, u0), end_panel(Lr, u1),
                    p.bias_h.empty() ? nullptr : p.bias_h.data(), p.gh.data(), Lr.columns(),
                    Lr.base(u0), Lr.base(u1));
        }
        const float* terms(index b, index u) const {
            return p.gh.data() + b * p.rec_layout.columns() + p.rec_layout.base(u);
        }
        const float* r_reads(const float* h_prev) const { return h_prev; }
        void second(const Step&, const float* rh) {
            // W_hn's panels are its units' blocks (one panel each)
            const index c0 = std::min(p.H, u0 * p.layout.block),
                        c1 = std::min(p.H, u1 * p.layout.block);
            product(p.own_rh[me], p.own_hn[me], rh, p.H, false, m0, m1, u0, u1, nullptr,
                    p.hn.data(), p.H, c0, c1);
        }
        const float* second_terms(index b) const { return p.hn.data() + b * p.H; }
        Block project(const Step& st, const float* m, float* h) {
            const Share sp = share_of(st.rows, p.w.w_hr->panels(), kShareRows, team.me, stepping);
            const index q0 = std::min(p.P, sp.p0 * kPanel), q1 = std::min(p.P, sp.p1 * kPanel);
            product(p.own_m[me], p.own_hr[me], m, p.H, false, sp.m0, sp.m1, sp.p0, sp.p1, nullptr,
                    h, p.R, q0, q1);
            return Block{sp.m0, sp.m1, q0, q1};
        }
    };
};

}  // namespace

void gated_forward(const GatedForwardArgs<float>& a, const GatedWeights& w) {
    with_gated_cell<float>(a.cell, [&](auto cell) {
        using Cell = decltype(cell);
        if constexpr (IsLstmForm<Cell>::value)
            throw std::invalid_argument(
                "cell: the LSTM's peepholes, input_forget and clip have no quantized kernels");
        else
            run_gated_forward<float, Cell, GatedProducts<Cell>>(a, w);
    });
}

}  // namespace rnnfast::quantized
