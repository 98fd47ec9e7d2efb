// The quantized gated forward (GRU, LSTM) over a whole sequence: the float gated driver's pass
// (drivers/gated_forward.cpp) with its products on the quantized ones of qproducts.hpp. Per
// chunk of steps the input projection is one product (G*H wide); each step is one product of
// the quantized h_{t-1} with W_hh, whose rows were packed in the gate layout with blocks of one
// panel (16 units, cells/gate_layout.hpp), so a thread that owns a block's panels has every gate
// of its units and runs the float cell's epilogue (cells/gru.hpp, lstm.hpp: the same code as the
// float layers) at once, with one barrier per step. The reset_before GRU's W_hn (r * h) and the
// projected LSTM's W_hr m read every unit of the step: a second product after a barrier, as in
// the float driver.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "qops.hpp"
#include "qproducts.hpp"
#include "rnnfast/cells/gate_layout.hpp"
#include "rnnfast/cells/gated_cells.hpp"
#include "rnnfast/drivers/rnn.hpp"
#include "rnnfast/drivers/time_loop.hpp"
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

template <class Cell>
struct GatedPass : TimeLoopPass {
    const GatedForwardArgs<float>& a;
    const GatedWeights& w;
    const index B, D, H, P, R, GH;
    const KernelTable<float>& kt;  // the gate functions of the float epilogue
    const QuantKernels& k;
    const GateLayout layout;      // the projection's columns
    const GateLayout rec_layout;  // the recurrent product's: all gates, or r and z alone
    // A tanh cell's h_t (a mix of tanh values and h_{t-1}, or o * tanh(c)) lies in [-1, 1]:
    // its rows take the fixed int8 scale where they do (checked per row by the kernels).
    const bool tanh_state;
    const std::vector<index> active;
    const int threads;
    const index chunk;
    const bool keep_all;
    const float *h_start, *c_start;
    std::vector<float> bias_x, bias_h, gx, gh, rh, hn, m, h_ring, c_ring;
    Prepared projection;
    // Each thread prepares the rows its products read in buffers of its own.
    std::vector<Prepared> own_h, own_rh, own_m;
    std::vector<Products> own_rec, own_hn, own_hr;

    GatedPass(const GatedForwardArgs<float>& args, const GatedWeights& weights, const float* h0,
              const float* c0)
        : a(args),
          w(weights),
          B(args.batch),
          D(args.input_size),
          H(args.hidden_size),
          P(args.proj_size),
          R(args.proj_size > 0 ? args.proj_size : args.hidden_size),
          GH(Cell::kGates * args.hidden_size),
          kt(kernels<float>()),
          k(active_kernels(weights.w_hh->kind)),
          layout{H, Cell::kGates, kPanel},
          rec_layout{H, Cell::kStepGates, kPanel},
          tanh_state(args.act == Pointwise::tanh && args.proj_size == 0),
          active(active_rows(args.lengths, args.steps, args.batch)),
          threads(threads_for(2.0 * double(B) * double(R) * double(GH),
                              std::max(layout.blocks(), B), Sync::barrier)),
          chunk(std::min(args.steps,
                         std::max(kChunkSteps, kChunkValues / std::max<index>(1, B * GH)))),
          keep_all(args.y != nullptr),
          h_start(h0),
          c_start(c0),
          projection(*weights.w_ih, k, chunk * B) {
        bias_x = in_layout(projection_bias<Cell>(a), layout);
        bias_h = in_layout(recurrent_bias<Cell>(a), layout);
        gx.resize(static_cast<size_t>(chunk * B * GH));
        gh.resize(static_cast<size_t>(B * rec_layout.columns()));
        if (!keep_all) h_ring.resize(static_cast<size_t>(2 * B * R));
        if (Cell::kStates == 2) c_ring.resize(static_cast<size_t>(2 * B * H));
        if (Cell::kSecondProduct) {
            rh.resize(static_cast<size_t>(B * H));
            hn.resize(static_cast<size_t>(B * H));
        }
        if (P > 0) m.resize(static_cast<size_t>(B * H));
        own_h.reserve(static_cast<size_t>(threads));
        own_rec.reserve(static_cast<size_t>(threads));
        own_rh.reserve(static_cast<size_t>(threads));
        own_hn.reserve(static_cast<size_t>(threads));
        own_m.reserve(static_cast<size_t>(threads));
        own_hr.reserve(static_cast<size_t>(threads));
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

    LoopShape shape() const {
        return {{a.steps, chunk, false, true},  // a region per chunk: its projection before it
                {threads, threads},
                {B, active.data(), nullptr},
                {GH, layout.blocks(), layout.gates * layout.block, kShareRows}};
    }

    const float* h_at(index t) const {
        if (t < 0) return h_start;
        return keep_all ? a.y + t * B * R : h_ring.data() + (t & 1) * B * R;
    }
    float* h_at(index t) { return const_cast<float*>(std::as_const(*this).h_at(t)); }
    const float* c_at(index t) const { return t < 0 ? c_start : c_ring.data() + (t & 1) * B * H; }
    float* c_at(index t) { return const_cast<float*>(std::as_const(*this).c_at(t)); }

    // Row b's block of units j0.. at step t for the cell's epilogue.
    GatedBlock<float> block(index t, index b, float* x, const float* hh, index j0, index width) {
        float* h = h_at(t) + b * R;
        const float* h_prev = h_at(t - 1) + b * R;
        return GatedBlock<float>{x,
                                 hh,
                                 h_prev,
                                 h_prev,
                                 h,
                                 Cell::kStates == 2 ? c_at(t - 1) + b * H : nullptr,
                                 Cell::kStates == 2 ? c_at(t) + b * H : nullptr,
                                 P > 0 ? m.data() + b * H : h,
                                 Cell::kSecondProduct ? rh.data() + b * H : nullptr,
                                 nullptr,
                                 H,
                                 j0,
                                 width,
                                 a.act,
                                 a.rec};
    }

    void before_region(const Chunk& c) {
        project(projection, a.x + c.t0 * B * D, c.steps * B,
                bias_x.empty() ? nullptr : bias_x.data(), 0, gx.data(), GH);
    }

    void after_region(const Chunk& c) {
        if (!keep_all) return;
        for (index t = c.t0; t < c.t0 + c.steps; ++t) {  // padded steps output zeros
            const index rows = active[static_cast<size_t>(t)];
            std::memset(a.y + t * B * R + rows * R, 0,
                        sizeof(float) * static_cast<size_t>((B - rows) * R));
        }
    }

    struct Member {
        GatedPass& p;
        const Team team;
        const int stepping;

        Member(GatedPass& pass, const Team& t, int stepping_members)
            : p(pass), team(t), stepping(stepping_members) {}
        void chunk_begin(const Chunk&) {}
        void chunk_end(const Chunk&) {}

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

        void step(const Chunk& c, const Step& st) {
            const index t = st.t, B = p.B, H = p.H, R = p.R, GH = p.GH;
            const index u0 = st.share.p0, u1 = st.share.p1, m0 = st.share.m0, m1 = st.share.m1;
            const size_t me = static_cast<size_t>(team.me);
            const GateLayout& L = p.layout;
            const GateLayout& Lr = p.rec_layout;
            const index GR = Lr.columns();
            const float* h_prev = p.h_at(t - 1);
            float* h = p.h_at(t);
            float* gx = p.gx.data() + (t - c.t0) * B * GH;
            product(p.own_h[me], p.own_rec[me], h_prev, R, p.tanh_state, m0, m1,
                    first_panel(Lr, u0), end_panel(Lr, u1),
                    p.bias_h.empty() ? nullptr : p.bias_h.data(), p.gh.data(), GR, Lr.base(u0),
                    Lr.base(u1));
            for (index b = m0; b < m1; ++b)
                for (index u = u0; u < u1; ++u) {
                    const index j0 = L.first_unit(u), width = L.width(u);
                    float* row_x = gx + b * GH + L.base(u);
                    const float* row_h = p.gh.data() + b * GR + Lr.base(u);
                    Cell::forward_block(p.kt, p.block(t, b, row_x, row_h, j0, width));
                }
            const index c0 = std::min(H, u0 * L.block), c1 = std::min(H, u1 * L.block);
            if constexpr (Cell::kSecondProduct) {
                st.barrier->wait();  // every unit's r * h_{t-1} is in rh
                // W_hn's panels are its units' blocks (one panel each)
                product(p.own_rh[me], p.own_hn[me], p.rh.data(), H, false, m0, m1, u0, u1, nullptr,
                        p.hn.data(), H, c0, c1);
                for (index b = m0; b < m1; ++b)
                    for (index u = u0; u < u1; ++u) {
                        const index j0 = L.first_unit(u);
                        Cell::second_block(p.kt, p.block(t, b, gx + b * GH + L.base(u),
                                                         p.hn.data() + b * H + j0, j0, L.width(u)));
                    }
            }
            // Sequences whose last step this is keep their states.
            const Block own{m0, m1, c0, c1};
            if constexpr (Cell::kStates == 2)
                keep_final_state(p.a.c_n, p.c_at(t), H, own, st.ending);
            if (p.P > 0) {
                st.barrier->wait();  // every unit's m_t is in m
                const Share sp =
                    share_of(st.rows, p.w.w_hr->panels(), kShareRows, team.me, stepping);
                const index q0 = std::min(p.P, sp.p0 * kPanel), q1 = std::min(p.P, sp.p1 * kPanel);
                product(p.own_m[me], p.own_hr[me], p.m.data(), H, false, sp.m0, sp.m1, sp.p0, sp.p1,
                        nullptr, h, R, q0, q1);
                keep_final_state(p.a.h_n, h, R, Block{sp.m0, sp.m1, q0, q1}, st.ending);
            } else {
                keep_final_state(p.a.h_n, h, R, own, st.ending);
            }
        }
    };
};

}  // namespace

void gated_forward(const GatedForwardArgs<float>& a, const GatedWeights& w) {
    with_gated_cell<float>(a.cell, [&](auto cell) {
        using Cell = decltype(cell);
        const GatedStart<float> start = start_states<Cell>(a);
        if (a.steps == 0 || a.batch == 0 || a.hidden_size == 0) return;
        GatedPass<Cell> pass(a, w, start.h0, start.c0);
        run_time_loop(pass.shape(), pass);
    });
}

}  // namespace rnnfast::quantized
