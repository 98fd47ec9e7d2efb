// The gated forward's float products (GemmGatedProducts), the Product of the one gated pass
// (gated_pass.hpp) for float32 and float64: the input projection and the step's products on
// the float GEMM kernels, with W_hh packed in the gate layout (cells/gate_layout.hpp); recurrent
// and input dropout (one product per gate, on masked copies), token input (the table projected
// once) and a batch of one (dot products along W_hh's rows) are variants of these products.
#include <algorithm>
#include <cstring>
#include <vector>

#include "gated.hpp"
#include "gated_pass.hpp"
#include "rnn.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/gemm/team_gemm.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "rnnfast/runtime/weight_cache.hpp"
#include "step_masks.hpp"
#include "time_loop.hpp"

namespace rnnfast {

namespace {

// The same in the layout's order.
template <class Cell, class T>
std::vector<T> projection_bias(const GatedForwardArgs<T>& a, const GateLayout& layout) {
    const std::vector<T> natural = projection_bias<Cell>(a);
    return natural.empty() ? natural : rows_in_layout(natural.data(), layout, 1);
}

// A batch of one without recurrent dropout: the recurrent product runs along W_hh's rows
// (GatedForwardPass::by_rows) and the layout's blocks are wide (unit_block).
template <class T>
bool batch_of_one(const GatedForwardArgs<T>& a, const KernelTable<T>& kt) {
    return a.batch == 1 && a.recurrent_mask == nullptr && !kt.rounds_operands;
}

// Hidden units per block of the layouts: one panel of nr columns, the grain of the threads'
// column split. A batch of one takes as many whole panels as make one block per stepping thread:
// its step has no rows to amortise a block's calls over (the cell's gate functions, one product
// per gate), and a block per thread leaves the split as it was. LSTM 200x1x32x64: 5 calls of
// the gate functions on 64 units a step instead of 20 on 16 (AVX2).
template <class Cell, class T>
index unit_block(const GatedForwardArgs<T>& a, const KernelTable<T>& kt) {
    if (!batch_of_one(a, kt)) return kt.nr;
    const index H = a.hidden_size, R = a.proj_size > 0 ? a.proj_size : H;
    const double flops = 2.0 * double(R) * double(Cell::kGates * H);
    const int threads = threads_for(flops, panel_count(H, kt.nr), Sync::barrier);
    return panel_count((H + threads - 1) / threads, kt.nr) * kt.nr;
}

// Kernel panels [p0, p1) of a product whose columns follow `layout`, for unit blocks [u0, u1).
inline index panel_begin(const GateLayout& layout, index u0, int nr) {
    return layout.base(u0) / nr;
}
inline index panel_end(const GateLayout& layout, index u1, int nr) {
    return panel_count(layout.base(u1), nr);
}
// The same for a product of H columns in the units' own order (one gate: recurrent dropout's
// per-gate products, reset_before's W_hn (r * h)).
inline index unit_panel_begin(const GateLayout& layout, index u0, int nr) {
    return std::min(layout.hidden, layout.first_unit(u0)) / nr;
}
inline index unit_panel_end(const GateLayout& layout, index u1, int nr) {
    return panel_count(std::min(layout.hidden, layout.first_unit(u1)), nr);
}

template <class T, class Cell>
struct GemmGatedProducts : GatedSizes {
    const GatedForwardArgs<T>& a;
    const KernelTable<T>& kt;
    const GateLayout layout;      // the projection's and the stored gates' columns
    const GateLayout rec_layout;  // the recurrent product's: all gates, or r and z alone
    const bool dropout;           // recurrent dropout: one product per gate, on masked copies
    // A batch of one: the recurrent product as dot products along W_hh's rows as stored, the
    // streaming step's kernel (kt.dot_rows), each gate's rows of a unit block being consecutive
    // rows of W_hh; nothing of W_hh is packed. The GEMM's one-row tile ran a call and an
    // epilogue per panel of nr columns, with K = R alone to amortise them: LSTM 200x1x32x64
    // forward 0.66 ms against ONNX Runtime's 0.31 (AMD EPYC Zen 3, AVX2, 1 thread).
    const bool by_rows;
    const int row_granule;
    int threads, team;
    index chunk;
    // The plain path (no token input, no input dropout) packs W_ih^T and W_hh^T and projects
    // each chunk inside the step region: one fork/join per call.
    bool region_per_chunk;
    std::vector<T> bias_x, bias_h;
    // W_ih^T and W_hh^T in the layouts, from the layer's cache or packed by this call (on the
    // plain path by the team, in its first chunk); W_hn^T and W_hr^T packed whole.
    CachedPack<T> packed_ih, packed_rec;
    std::shared_ptr<const Packed<T>> packed_hn, packed_hr;
    std::vector<T> gh, hn;
    // recurrent dropout: each gate's W_hg^T packed apart, its product (gates, B, H), and each
    // thread's masked copies of h_{t-1} (threads, gates, B, R)
    std::vector<Packed<T>> packed_gates;
    std::vector<T> gh_gates, dropped;
    std::vector<T>
        dropout_gates;  // each thread's block of recurrent terms, gathered (gates, block)
    // input dropout: each gate's W_ig^T packed apart, the natural-order bias, a chunk's masked
    // inputs (chunk * B, D) and one gate's projection (chunk * B, H)
    std::vector<Packed<T>> packed_gates_ih;
    std::vector<T> bias_natural, masked_x, gate_x;
    std::vector<T> projected_table;  // token input: the table's projection (vocab, G*H)

    explicit GemmGatedProducts(const GatedForwardArgs<T>& args)
        : GatedSizes(args, Cell::kGates),
          a(args),
          kt(kernels<T>()),
          layout{H, Cell::kGates, unit_block<Cell>(args, kt)},
          rec_layout{H, Cell::kStepGates, layout.block},
          dropout(args.recurrent_mask != nullptr),
          by_rows(batch_of_one(args, kt)),
          row_granule(kt.mr) {
        const index T_ = a.steps;
        threads = threads_for(2.0 * double(B) * double(R) * double(GH),
                              std::max(layout.blocks(), B), Sync::barrier);
        // Chunks whether or not every h_t is kept (projection_chunk_steps). A general mask
        // keeps one chunk of all T steps (after_region zeros outputs once every step has run).
        chunk = a.y && a.keep ? T_ : projection_chunk_steps(T_, B * GH * index(sizeof(T)));
        const bool in_region = !a.ids && !a.input_mask;
        region_per_chunk = !in_region;  // else a region per chunk, its projection before it
        const double projection_flops = 2.0 * double(chunk * B) * double(D) * double(GH);
        team = in_region
                   ? pass_team(
                         threads,
                         threads_for(projection_flops, std::max(panel_count(GH, kt.nr), chunk * B),
                                     Sync::fork_join),
                         projection_flops, 2.0 * double(chunk * B) * double(R) * double(GH))
                   : threads;
        // The weights in the layout's row order, packed once for the whole sequence (on the
        // plain path by the team, in its first chunk: here only the room), or found packed.
        if (!a.input_mask) {
            packed_ih = CachedPack<T>(a.cache, key(a.w_ih, D, GH, layout.block, PackRole::input),
                                      kt.packed_b_size(D, GH));
            bias_x = projection_bias<Cell>(a, layout);
        }
        if (!in_region && !a.input_mask) {
            if (!packed_ih.ready()) {
                pack_blocks_in_layout(kt, a.w_ih, layout, D, 0, layout.blocks(), packed_ih.room());
                packed_ih.publish();
            }
            if (a.ids) {  // the table projected once; each chunk gathers its rows
                projected_table.resize(static_cast<size_t>(a.vocab * GH));
                project(a.x, a.vocab, projected_table.data());
            }
        } else if (a.input_mask) {  // input dropout: each gate's W_ig^T apart
            for (int g = 0; g < layout.gates; ++g)
                packed_gates_ih.push_back(
                    pack_whole(kt, MatView<T>{a.w_ih + g * H * D, 1, D}, D, H, threads));
            bias_natural = projection_bias<Cell>(a);
            masked_x.resize(static_cast<size_t>(chunk * B * D));
            gate_x.resize(static_cast<size_t>(chunk * B * H));
        }
        if (!dropout && !by_rows) {  // (a batch of one reads W_hh as stored)
            // reset_before: the r and z rows only
            const index N = rec_layout.columns();
            packed_rec =
                CachedPack<T>(a.cache, key(a.w_hh, R, N, layout.block, PackRole::recurrent),
                              kt.packed_b_size(R, N));
            if (!in_region && !packed_rec.ready()) {
                pack_blocks_in_layout(kt, a.w_hh, rec_layout, R, 0, rec_layout.blocks(),
                                      packed_rec.room());
                packed_rec.publish();
            }
        } else if (dropout) {
            for (int g = 0; g < rec_layout.gates; ++g)
                packed_gates.push_back(
                    pack_whole(kt, MatView<T>{a.w_hh + g * H * R, 1, R}, R, H, threads));
            gh_gates.resize(static_cast<size_t>(rec_layout.gates * B * H));
            dropped.resize(static_cast<size_t>(threads * layout.gates * B * R));
        }
        if (!dropout) {  // b_hn, inside r * (W_hn h + b_hn)
            const std::vector<T> inner = recurrent_bias<Cell>(a);
            if (!inner.empty()) bias_h = rows_in_layout(inner.data(), layout, 1);
        }
        if constexpr (Cell::kSecondProduct) {
            const T* w_hn = a.w_hh + 2 * H * H;
            packed_hn = cached<T>(a.cache, key(w_hn, H, H, 0, PackRole::reset_product), [&] {
                return pack_whole(kt, MatView<T>{w_hn, 1, H}, H, H, threads);
            });
            hn.resize(static_cast<size_t>(B * H));
        }
        if (P > 0) {
            packed_hr = cached<T>(a.cache, key(a.w_hr, H, P, 0, PackRole::projection), [&] {
                return pack_whole(kt, MatView<T>{a.w_hr, 1, H}, H, P, threads);
            });
        }
        if (!dropout) gh.resize(static_cast<size_t>(B * rec_layout.columns()));
        if (dropout)
            dropout_gates.resize(static_cast<size_t>(threads * layout.gates * layout.block));
    }

    PackKey key(const T* source, index K, index N, index block, PackRole role) const {
        return PackKey{source, &kt, K, N, block, role};
    }

    // After the pass: the packs the team made are whole, and later calls find them.
    void finish() {
        if (!region_per_chunk) {
            packed_ih.publish();
            packed_rec.publish();
        }
    }

    void before_region(const Chunk& c, T* gx) {
        const index rows = c.steps * B;
        if (a.ids) {
            for (index r = 0; r < rows; ++r) {
                const T* from = projected_table.data() + a.ids[c.t0 * B + r] * GH;
                std::copy(from, from + GH, gx + r * GH);
            }
        } else if (a.input_mask) {
            project_per_gate(a.x + c.t0 * B * D, rows, gx);
        } else {
            project(a.x + c.t0 * B * D, rows, gx);
        }
    }

    // The input projection of `rows` rows of inputs, in the layout's columns: one GEMM.
    GemmTask<T> projection(const T* inputs, index rows, T* out) const {
        GemmTask<T> proj = packed_task<T>(rows, GH, D, packed_ih.data(), out, GH);
        proj.A = {inputs, D, 1};
        proj.bias = bias_x.empty() ? nullptr : bias_x.data();
        return proj;
    }
    void project(const T* inputs, index rows, T* out) const {
        run_task(kt, projection(inputs, rows, out),
                 threads_for(2.0 * double(rows) * double(D) * double(GH),
                             std::max(panel_count(GH, kt.nr), rows), Sync::fork_join));
    }

    // Input dropout: gate g's projection of x * input_mask[g], one GEMM per gate, each
    // scattered into the layout's columns of its gate.
    void project_per_gate(const T* x, index rows, T* gx) {
        const int threads_g = threads_for(2.0 * double(rows) * double(D) * double(H),
                                          std::max(panel_count(H, kt.nr), rows), Sync::fork_join);
        for (int g = 0; g < layout.gates; ++g) {
            mask_every_step(masked_x.data(), x, a.input_mask + g * B * D, rows / B, B, D);
            GemmTask<T> proj =
                packed_task<T>(rows, H, D, packed_gates_ih[g].data(), gate_x.data(), H);
            proj.A = {masked_x.data(), D, 1};
            proj.bias = bias_natural.empty() ? nullptr : bias_natural.data() + g * H;
            run_task(kt, proj, threads_g);
            for (index r = 0; r < rows; ++r)
                for (index u = 0; u < layout.blocks(); ++u) {
                    const T* from = gate_x.data() + r * H + layout.first_unit(u);
                    std::copy(from, from + layout.width(u),
                              gx + r * GH + layout.base(u) + g * layout.width(u));
                }
        }
    }

    struct Member {
        GemmGatedProducts& p;
        const Team team;
        GemmTask<T> rec, n_term, proj;
        std::vector<GemmTask<T>> gate_tasks;  // recurrent dropout: one product per gate
        T* gates;  // a block's recurrent terms in the layout's order (recurrent dropout)
        const int stepping;

        Member(GemmGatedProducts& pass, const Team& t, int stepping_members)
            : p(pass),
              team(t),
              gates(pass.dropout
                        ? pass.dropout_gates.data() + t.me * pass.layout.gates * pass.layout.block
                        : nullptr),
              stepping(stepping_members) {
            for (size_t g = 0; g < p.packed_gates.size(); ++g) {
                GemmTask<T> task = packed_task<T>(p.B, p.H, p.R, p.packed_gates[g].data(),
                                                  p.gh_gates.data() + g * p.B * p.H, p.H);
                // b_hn, inside r * (W_hn h + b_hn): the n gate's product adds it
                if (g == 2 && Cell::kInnerBias && p.a.b_hh) task.bias = p.a.b_hh + 2 * p.H;
                gate_tasks.push_back(task);
            }
            rec = packed_task<T>(p.B, p.rec_layout.columns(), p.R,
                                 p.dropout ? nullptr : p.packed_rec.data(), p.gh.data(),
                                 p.rec_layout.columns());
            rec.bias = p.bias_h.empty() ? nullptr : p.bias_h.data();
            if constexpr (Cell::kSecondProduct) {
                n_term = packed_task<T>(p.B, p.H, p.H, p.packed_hn->data(), p.hn.data(), p.H);
            }
            if (p.P > 0) {
                proj = packed_task<T>(p.B, p.P, p.H, p.packed_hr->data(), nullptr, p.P);
            }
        }
        // The plain path: the team packs the weights it did not find packed (first chunk:
        // each member its unit blocks), meets, projects the chunk (each member its panels)
        // and meets again.
        void chunk_begin(const Chunk& c, T* gx) {
            const bool pack_rec = !p.dropout && !p.by_rows && !p.packed_rec.ready();
            if (c.t0 == 0 && (!p.packed_ih.ready() || pack_rec)) {
                const Range mine = team_range(team, p.layout.blocks());
                if (!p.packed_ih.ready())
                    pack_blocks_in_layout(p.kt, p.a.w_ih, p.layout, p.D, mine.begin, mine.end,
                                          p.packed_ih.room());
                if (pack_rec)
                    pack_blocks_in_layout(p.kt, p.a.w_hh, p.rec_layout, p.R, mine.begin, mine.end,
                                          p.packed_rec.room());
                team.barrier->wait();
            }
            team_task(p.kt, team, p.projection(p.a.x + c.t0 * p.B * p.D, c.steps * p.B, gx));
            team.barrier->wait();
        }

        // The one row's recurrent terms of unit blocks [u0, u1), b_h + W_hh h_{t-1}, into gh in
        // the recurrent layout's order (see by_rows).
        void rows_product(index u0, index u1, const T* h_prev) {
            const GateLayout& Lr = p.rec_layout;
            for (index u = u0; u < u1; ++u) {
                const index j0 = Lr.first_unit(u), w = Lr.width(u);
                for (int g = 0; g < Lr.gates; ++g) {
                    const index column = Lr.base(u) + g * w;
                    T* out = p.gh.data() + column;
                    if (p.bias_h.empty())
                        std::fill(out, out + w, T(0));
                    else
                        std::copy(p.bias_h.data() + column, p.bias_h.data() + column + w, out);
                    p.kt.dot_rows(p.a.w_hh + (g * p.H + j0) * p.R, w, p.R, h_prev, out);
                }
            }
        }

        const T* mine = nullptr;  // recurrent dropout: this member's masked copies of h_{t-1}
        index m0 = 0, m1 = 0, u0 = 0, u1 = 0;

        void first(const Step& st, const T* h_prev) {
            const index B = p.B, R = p.R;
            u0 = st.share.p0, u1 = st.share.p1, m0 = st.share.m0, m1 = st.share.m1;
            const int nr = p.kt.nr;
            const GateLayout& L = p.layout;
            const GateLayout& Lr = p.rec_layout;
            if (p.by_rows) {
                if (m0 < m1) rows_product(u0, u1, h_prev);
            } else if (!p.dropout) {
                rec.A = {h_prev, R, 1};
                run_block(p.kt, rec, m0, m1, panel_begin(Lr, u0, nr), panel_end(Lr, u1, nr));
            } else {  // each gate's product on this member's rows of h_{t-1} * mask[g]
                T* own = p.dropped.data() + team.me * L.gates * B * R;
                for (int g = 0; g < L.gates; ++g)
                    apply_recurrent_mask(own + g * B * R, h_prev, p.a.recurrent_mask + g * B * R, R,
                                         Block{m0, m1, 0, R});
                for (size_t g = 0; g < gate_tasks.size(); ++g) {
                    gate_tasks[g].A = {own + g * B * R, R, 1};
                    run_block(p.kt, gate_tasks[g], m0, m1, unit_panel_begin(L, u0, nr),
                              unit_panel_end(L, u1, nr));
                }
                mine = own;
            }
        }
        // Row b's recurrent terms of unit block u, in the layout's order.
        const T* terms(index b, index u) {
            const GateLayout& Lr = p.rec_layout;
            if (!p.dropout) return p.gh.data() + b * Lr.columns() + Lr.base(u);
            // the block's recurrent terms, gathered into the layout
            const index j0 = Lr.first_unit(u), w = Lr.width(u);
            for (int g = 0; g < Lr.gates; ++g) {
                const T* from = p.gh_gates.data() + (g * p.B + b) * p.H + j0;
                std::copy(from, from + w, gates + g * w);
            }
            return gates;
        }
        // reset_before's r * h reads h_{t-1} through the n gate's mask under recurrent dropout.
        const T* r_reads(const T* h_prev) const {
            return p.dropout && Cell::kSecondProduct ? mine + 2 * p.B * p.R : h_prev;
        }
        void second(const Step&, const T* rh) {
            const int nr = p.kt.nr;
            n_term.A = {rh, p.H, 1};
            run_block(p.kt, n_term, m0, m1, unit_panel_begin(p.layout, u0, nr),
                      unit_panel_end(p.layout, u1, nr));
        }
        const T* second_terms(index b) const { return p.hn.data() + b * p.H; }
        Block project(const Step& st, const T* m, T* h) {
            const int nr = p.kt.nr;
            const Share sp = share_of(st.rows, panel_count(p.P, nr), p.kt.mr, team.me, stepping);
            proj.A = {m, p.H, 1};
            proj.C = h;
            run_block(p.kt, proj, sp.m0, sp.m1, sp.p0, sp.p1);
            return Block{sp.m0, sp.m1, std::min(p.P, sp.p0 * nr), std::min(p.P, sp.p1 * nr)};
        }
    };
};

}  // namespace

template <class T>
void gated_forward(const GatedForwardArgs<T>& a) {
    with_gated_cell<T>(a.cell, [&](auto cell) {
        using Cell = decltype(cell);
        run_gated_forward<T, Cell, GemmGatedProducts<T, Cell>>(a);
    });
}

template void gated_forward(const GatedForwardArgs<float>&);
template void gated_forward(const GatedForwardArgs<double>&);

}  // namespace rnnfast
