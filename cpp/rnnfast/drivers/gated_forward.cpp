// The gated cells' forward as a pass of the one time loop (time_loop.hpp): per chunk of steps
// the input projection (one GEMM, G*H wide, outside the team), then the recurrence. Each step
// is one product of h_{t-1} with the recurrent weights, their columns grouped so that a
// thread's panels hold every gate of its hidden units (cells/gate_layout.hpp), and the cell's
// epilogue on the same block at once; the loop's barrier after the step publishes h_t. Two
// cells need a second product inside the step, after a barrier (every thread's part of the
// first is read): the GRU with reset_before (W_hn (r * h)) and the projected LSTM (W_hr m).
#include <algorithm>
#include <cstring>
#include <vector>

#include "gated.hpp"
#include "rnn.hpp"
#include "rnnfast/cells/gru.hpp"
#include "rnnfast/cells/lstm.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/gemm/team_gemm.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"
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
bool batch_of_one(const GatedForwardArgs<T>& a) {
    return a.batch == 1 && a.recurrent_mask == nullptr;
}

// Hidden units per block of the layouts: one panel of nr columns, the grain of the threads'
// column split. A batch of one takes as many whole panels as make one block per stepping thread:
// its step has no rows to amortise a block's calls over (the cell's gate functions, one product
// per gate), and a block per thread leaves the split as it was. LSTM 200x1x32x64: 5 calls of
// the gate functions on 64 units a step instead of 20 on 16 (AVX2).
template <class Cell, class T>
index unit_block(const GatedForwardArgs<T>& a, const KernelTable<T>& kt) {
    if (!batch_of_one(a)) return kt.nr;
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
struct GatedForwardPass : TimeLoopPass {
    const GatedForwardArgs<T>& a;
    const index B, D, H, P, R, GH;
    const KernelTable<T>& kt;
    const GateLayout layout;      // the projection's and the stored gates' columns
    const GateLayout rec_layout;  // the recurrent product's: all gates, or r and z alone
    const bool masked;            // a general mask: every row runs every step
    const bool dropout;           // recurrent dropout: one product per gate, on masked copies
    // A batch of one: the recurrent product as dot products along W_hh's rows as stored, the
    // streaming step's kernel (kt.dot_rows), each gate's rows of a unit block being consecutive
    // rows of W_hh; nothing of W_hh is packed. The GEMM's one-row tile ran a call and an
    // epilogue per panel of nr columns, with K = R alone to amortise them: LSTM 200x1x32x64
    // forward 0.66 ms against ONNX Runtime's 0.31 (AMD EPYC Zen 3, AVX2, 1 thread).
    const bool by_rows;
    StepMasks masks;
    std::vector<index> active;
    int threads;
    bool keep_all;
    index chunk;
    std::vector<T> bias_x, bias_h;
    // The plain path (no token input, no input dropout) packs W_ih^T and W_hh^T and projects
    // each chunk inside the step region: one fork/join per call.
    bool in_region;
    int project_threads;
    std::vector<T> packed_ih, packed_rec, packed_hn, packed_hr;
    std::vector<T> gx, gh, rh, hn, m, h_ring, c_ring;
    // recurrent dropout: each gate's W_hg^T packed apart, its product (gates, B, H), and each
    // thread's masked copies of h_{t-1} (threads, gates, B, R)
    std::vector<std::vector<T>> packed_gates;
    std::vector<T> gh_gates, dropped;
    std::vector<T>
        dropout_gates;  // each thread's block of recurrent terms, gathered (gates, block)
    // input dropout: each gate's W_ig^T packed apart, the natural-order bias, a chunk's masked
    // inputs (chunk * B, D) and one gate's projection (chunk * B, H)
    std::vector<std::vector<T>> packed_gates_ih;
    std::vector<T> bias_natural, masked_x, gate_x;
    std::vector<T> projected_table;  // token input: the table's projection (vocab, G*H)
    const T *h_start, *c_start;

    GatedForwardPass(const GatedForwardArgs<T>& args, const T* h0, const T* c0)
        : a(args),
          B(args.batch),
          D(args.input_size),
          H(args.hidden_size),
          P(args.proj_size),
          R(args.proj_size > 0 ? args.proj_size : args.hidden_size),
          GH(Cell::kGates * args.hidden_size),
          kt(kernels<T>()),
          layout{H, Cell::kGates, unit_block<Cell>(args, kt)},
          rec_layout{H, Cell::kStepGates, layout.block},
          masked(args.keep != nullptr),
          dropout(args.recurrent_mask != nullptr),
          by_rows(batch_of_one(args)),
          h_start(h0),
          c_start(c0) {
        const index T_ = a.steps;
        // Masked: lengths folded into the step masks; a skipped row is selected back to its
        // states after the cell's epilogue.
        if (masked) masks = step_masks(a.keep, a.lengths, a.zero_output_for_mask, T_, B);
        active = active_rows(masked ? nullptr : a.lengths, T_, B);
        threads = threads_for(2.0 * double(B) * double(R) * double(GH),
                              std::max(layout.blocks(), B), Sync::barrier);
        keep_all = a.y != nullptr;
        // Chunks whether or not every h_t is kept (projection_chunk_steps). A general mask
        // keeps one chunk of all T steps (after_region zeros outputs once every step has run).
        chunk = keep_all && masked ? T_ : projection_chunk_steps(T_, B * GH * index(sizeof(T)));
        in_region = !a.ids && !a.input_mask;
        project_threads =
            in_region ? threads_for(2.0 * double(chunk * B) * double(D) * double(GH),
                                    std::max(panel_count(GH, kt.nr), chunk * B), Sync::fork_join)
                      : threads;
        // The weights in the layout's row order, packed once for the whole sequence (on the
        // plain path by the team, in its first chunk: here only the room).
        if (in_region) {
            packed_ih.resize(static_cast<size_t>(kt.packed_b_size(D, GH)));
            bias_x = projection_bias<Cell>(a, layout);
        } else if (!a.input_mask) {
            packed_ih = pack_in_layout(kt, a.w_ih, layout, D);
            bias_x = projection_bias<Cell>(a, layout);
            if (a.ids) {  // the table projected once; each chunk gathers its rows
                projected_table.resize(static_cast<size_t>(a.vocab * GH));
                project(a.x, a.vocab, projected_table.data());
            }
        } else {
            for (int g = 0; g < layout.gates; ++g)
                packed_gates_ih.push_back(
                    pack_whole(kt, MatView<T>{a.w_ih + g * H * D, 1, D}, D, H, threads));
            bias_natural = projection_bias<Cell>(a);
            masked_x.resize(static_cast<size_t>(chunk * B * D));
            gate_x.resize(static_cast<size_t>(chunk * B * H));
        }
        if (!dropout && !by_rows) {  // (a batch of one reads W_hh as stored)
            // reset_before: the r and z rows only
            if (in_region)
                packed_rec.resize(static_cast<size_t>(kt.packed_b_size(R, rec_layout.columns())));
            else
                packed_rec = pack_in_layout(kt, a.w_hh, rec_layout, R);
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
            packed_hn = pack_whole(kt, MatView<T>{a.w_hh + 2 * H * H, 1, H}, H, H, threads);
            rh.resize(static_cast<size_t>(B * H));
            hn.resize(static_cast<size_t>(B * H));
        }
        if (P > 0) {
            packed_hr = pack_whole(kt, MatView<T>{a.w_hr, 1, H}, H, P, threads);
            m.resize(static_cast<size_t>(B * H));
        }
        gx.resize(static_cast<size_t>(chunk * B * GH));
        if (!dropout) gh.resize(static_cast<size_t>(B * rec_layout.columns()));
        if (!keep_all) h_ring.resize(static_cast<size_t>(2 * B * R));
        if constexpr (Cell::kStates == 2) c_ring.resize(static_cast<size_t>(2 * B * H));
        if (dropout)
            dropout_gates.resize(static_cast<size_t>(threads * layout.gates * layout.block));
    }

    LoopShape shape() const {
        // the plain path in one region; else a region per chunk, its projection before it
        return {{a.steps, chunk, false, !in_region},
                {std::max(threads, project_threads), threads},
                {B, active.data(), masked ? masks.keep.data() : nullptr},
                {GH, layout.blocks(), layout.gates * layout.block, kt.mr}};
    }

    const T* h_at(index t) const {
        if (t < 0) return h_start;
        return keep_all ? a.y + t * B * R : h_ring.data() + (t & 1) * B * R;
    }
    T* h_at(index t) { return const_cast<T*>(static_cast<const GatedForwardPass&>(*this).h_at(t)); }
    const T* c_at(index t) const { return t < 0 ? c_start : c_ring.data() + (t & 1) * B * H; }

    // Row b's block of unit j0.. at step t for the cell's epilogue: `x` and `hh` its projected
    // input and product terms, the states' rows, `reads` what r scales (reset_before).
    GatedBlock<T> block(index t, index b, T* x, const T* hh, const T* h_prev, const T* reads,
                        T* store, index j0, index w) {
        const index S = Cell::kStored * H;
        T* h = h_at(t) + b * R;
        return GatedBlock<T>{x,
                             hh,
                             h_prev + b * R,
                             reads + b * R,
                             h,
                             Cell::kStates == 2 ? c_at(t - 1) + b * H : nullptr,
                             Cell::kStates == 2 ? const_cast<T*>(c_at(t)) + b * H : nullptr,
                             P > 0 ? m.data() + b * H : h,
                             Cell::kSecondProduct ? rh.data() + b * H : nullptr,
                             store ? store + b * S : nullptr,
                             H,
                             j0,
                             w,
                             a.act,
                             a.rec};
    }

    void before_region(const Chunk& c) {
        const index rows = c.steps * B;
        if (in_region) return;  // the team projects in chunk_begin
        if (a.ids) {
            for (index r = 0; r < rows; ++r) {
                const T* from = projected_table.data() + a.ids[c.t0 * B + r] * GH;
                std::copy(from, from + GH, gx.data() + r * GH);
            }
        } else if (a.input_mask) {
            project_per_gate(a.x + c.t0 * B * D, rows);
        } else {
            project(a.x + c.t0 * B * D, rows, gx.data());
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
    void project_per_gate(const T* x, index rows) {
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
                              gx.data() + r * GH + layout.base(u) + g * layout.width(u));
                }
        }
    }

    void after_region(const Chunk& c) {
        if (!keep_all) return;
        // The plain path's one region ran every chunk up to c; else a region is one chunk.
        const index t0 = in_region ? 0 : c.t0;
        for (index t = t0; t < c.t0 + c.steps; ++t) {  // padded steps output zeros
            const index rows = active[static_cast<size_t>(t)];
            std::memset(a.y + t * B * R + rows * R, 0,
                        sizeof(T) * static_cast<size_t>((B - rows) * R));
        }
        // Masked: y held every state for the recurrence; now the outputs that are not the
        // state become zeros (every step has run: keep_all is one chunk of all T steps).
        if (masked)
            for (index i = 0; i < a.steps * B; ++i)
                if (!masks.out[static_cast<size_t>(i)])
                    std::memset(a.y + i * R, 0, sizeof(T) * static_cast<size_t>(R));
    }

    struct Member {
        GatedForwardPass& p;
        const Team team;
        GemmTask<T> rec, n_term, proj;
        std::vector<GemmTask<T>> gate_tasks;  // recurrent dropout: one product per gate
        T* gates;  // a block's recurrent terms in the layout's order (recurrent dropout)
        const int stepping;

        Member(GatedForwardPass& pass, const Team& t, int stepping_members)
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
                n_term = packed_task<T>(p.B, p.H, p.H, p.packed_hn.data(), p.hn.data(), p.H);
                n_term.A = {p.rh.data(), p.H, 1};
            }
            if (p.P > 0) {
                proj = packed_task<T>(p.B, p.P, p.H, p.packed_hr.data(), nullptr, p.P);
                proj.A = {p.m.data(), p.H, 1};
            }
        }
        // The plain path: the team packs the weights (first chunk: each member its unit
        // blocks), meets, projects the chunk (each member its panels) and meets again.
        void chunk_begin(const Chunk& c) {
            if (!p.in_region) return;
            if (c.t0 == 0) {
                const Range mine = team_range(team, p.layout.blocks());
                pack_blocks_in_layout(p.kt, p.a.w_ih, p.layout, p.D, mine.begin, mine.end,
                                      p.packed_ih.data());
                if (!p.dropout && !p.by_rows)
                    pack_blocks_in_layout(p.kt, p.a.w_hh, p.rec_layout, p.R, mine.begin, mine.end,
                                          p.packed_rec.data());
                team.barrier->wait();
            }
            team_task(p.kt, team,
                      p.projection(p.a.x + c.t0 * p.B * p.D, c.steps * p.B, p.gx.data()));
            team.barrier->wait();
        }
        void chunk_end(const Chunk&) {}

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

        void step(const Chunk& c, const Step& st) {
            const index t = st.t, B = p.B, H = p.H, R = p.R, GH = p.GH;
            const index S = Cell::kStored * H;
            const index u0 = st.share.p0, u1 = st.share.p1, m0 = st.share.m0, m1 = st.share.m1;
            const int nr = p.kt.nr;
            const GateLayout& L = p.layout;
            const GateLayout& Lr = p.rec_layout;
            const index GR = Lr.columns();
            const T* h_prev = p.h_at(t - 1);
            T* h = p.h_at(t);
            T* gx = p.gx.data() + (t - c.t0) * B * GH;
            T* store = p.a.workspace ? p.a.workspace + t * B * S : nullptr;
            const T* n_reads = h_prev;  // what reset_before's r * h reads
            if (p.by_rows) {
                if (m0 < m1) rows_product(u0, u1, h_prev);
            } else if (!p.dropout) {
                rec.A = {h_prev, R, 1};
                run_block(p.kt, rec, m0, m1, panel_begin(Lr, u0, nr), panel_end(Lr, u1, nr));
            } else {  // each gate's product on this member's rows of h_{t-1} * mask[g]
                T* mine = p.dropped.data() + team.me * L.gates * B * R;
                for (int g = 0; g < L.gates; ++g)
                    apply_recurrent_mask(mine + g * B * R, h_prev, p.a.recurrent_mask + g * B * R,
                                         R, Block{m0, m1, 0, R});
                for (size_t g = 0; g < gate_tasks.size(); ++g) {
                    gate_tasks[g].A = {mine + g * B * R, R, 1};
                    run_block(p.kt, gate_tasks[g], m0, m1, unit_panel_begin(L, u0, nr),
                              unit_panel_end(L, u1, nr));
                }
                if constexpr (Cell::kSecondProduct) n_reads = mine + 2 * B * R;
            }
            for (index b = m0; b < m1; ++b)
                for (index u = u0; u < u1; ++u) {
                    const index j0 = L.first_unit(u), w = L.width(u);
                    T* row_x = gx + b * GH + L.base(u);
                    const T* row_h = p.gh.data() + b * GR + Lr.base(u);
                    if (p.dropout) {  // the block's recurrent terms, gathered into the layout
                        for (int g = 0; g < Lr.gates; ++g) {
                            const T* from = p.gh_gates.data() + (g * B + b) * H + j0;
                            std::copy(from, from + w, gates + g * w);
                        }
                        row_h = gates;
                    }
                    Cell::forward_block(p.kt,
                                        p.block(t, b, row_x, row_h, h_prev, n_reads, store, j0, w));
                }
            if constexpr (Cell::kSecondProduct) {
                st.barrier->wait();  // every unit's r * h_{t-1} is in rh
                run_block(p.kt, n_term, m0, m1, unit_panel_begin(L, u0, nr),
                          unit_panel_end(L, u1, nr));
                for (index b = m0; b < m1; ++b)
                    for (index u = u0; u < u1; ++u) {
                        const index j0 = L.first_unit(u), w = L.width(u);
                        Cell::second_block(
                            p.kt, p.block(t, b, gx + b * GH + L.base(u), p.hn.data() + b * H + j0,
                                          h_prev, n_reads, store, j0, w));
                    }
            }
            const index c0 = std::min(H, u0 * L.block), c1 = std::min(H, u1 * L.block);
            const Block own{m0, m1, c0, c1};  // this member's units, on its rows
            if (st.keep) {  // skipped rows keep their states (c_t = c_{t-1}, as stored)
                if (p.P == 0) carry_skipped_rows(h, h_prev, st.keep, R, own);
                if constexpr (Cell::kStates == 2) {
                    T* c_now = const_cast<T*>(p.c_at(t));
                    carry_skipped_rows(c_now, p.c_at(t - 1), st.keep, H, own);
                    if (store)
                        for (index b = m0; b < m1; ++b)
                            if (!st.keep[b])
                                std::copy(c_now + b * H + c0, c_now + b * H + c1,
                                          store + b * S + Cell::kStoredState * H + c0);
                }
            }
            // Sequences whose last step this is keep their state.
            if constexpr (Cell::kStates == 2)
                keep_final_state(p.a.c_n, p.c_at(t), H, own, st.ending);
            if (p.P > 0) {
                st.barrier->wait();  // every unit's m_t is in m
                const Share sp =
                    share_of(st.rows, panel_count(p.P, nr), p.kt.mr, team.me, stepping);
                proj.C = h;
                run_block(p.kt, proj, sp.m0, sp.m1, sp.p0, sp.p1);
                const index q0 = std::min(p.P, sp.p0 * nr), q1 = std::min(p.P, sp.p1 * nr);
                if (st.keep) carry_skipped_rows(h, h_prev, st.keep, R, Block{sp.m0, sp.m1, q0, q1});
                keep_final_state(p.a.h_n, h, R, Block{sp.m0, sp.m1, q0, q1}, st.ending);
            } else {
                keep_final_state(p.a.h_n, h, R, own, st.ending);
            }
        }
    };
};

}  // namespace

template <class T>
void gated_forward(const GatedForwardArgs<T>& a) {
    with_gated_cell<T>(a.cell, [&](auto cell) {
        using Cell = decltype(cell);
        const GatedStart<T> start = start_states<Cell>(a);
        if (a.workspace)  // rows past a sequence's end are never read; zeros keep it deterministic
            std::memset(
                a.workspace, 0,
                sizeof(T) * static_cast<size_t>(a.steps * a.batch * Cell::kStored * a.hidden_size));
        if (a.steps == 0 || a.batch == 0 || a.hidden_size == 0) return;
        GatedForwardPass<T, Cell> pass(a, start.h0, start.c0);
        run_time_loop(pass.shape(), pass);
    });
}

template void gated_forward(const GatedForwardArgs<float>&);
template void gated_forward(const GatedForwardArgs<double>&);

}  // namespace rnnfast
