// The gated cells' backward (BPTT) as a pass of the one time loop, walking from step T - 1
// down. At each step a thread owns the same hidden units (the layout's blocks, as the
// forward's): the recurrent gradient dL/dh_t of its units is one product of the next step's
// pre-activation gradients with the recurrent weights (the product the forward ran, read the
// other way), the cell's backward step then turns it and the stored gates into this step's
// pre-activation gradients, and the loop's barrier publishes them. The weight and input
// gradients are large GEMMs over all steps after the walk.
#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "backward_parts.hpp"
#include "gated.hpp"
#include "rnn.hpp"
#include "rnnfast/cells/gated_cells.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "step_masks.hpp"
#include "time_loop.hpp"

namespace rnnfast {
namespace {

template <class T, class Cell>
struct GatedBackwardPass : TimeLoopPass, GatedSizes {
    const GatedBackwardArgs<T>& a;
    const index S;
    const KernelTable<T>& kt;
    const GateLayout rec_layout;  // the recurrent product's columns (as the forward's)
    const bool masked;            // a general mask: every row runs every step
    const bool dropout;           // recurrent dropout: one product per gate, masks applied
    StepMasks masks;
    std::vector<index> active;
    int threads;
    const T *h0, *c0;
    // the recurrent weights packed as the dh products read them, from the layer's cache or
    // packed by this call
    std::shared_ptr<const Packed<T>> packed_rec, packed_hn, packed_hr;
    // dA: every step's pre-activation gradients, PyTorch's order (T, B, G*H); extra: per step
    // the GRU's n-term gradient da_n * r (reset_after) or r * h_{t-1} (reset_before), (T, B, H);
    // dh_all and m_all: a projected LSTM's dL/dh_t (T, B, P) and m_t (T, B, H).
    std::unique_ptr<T[]> dA;
    std::vector<T> extra, dh_all, m_all;
    // per step: the recurrent gradients in PyTorch's gate order (two, the next step's is read
    // while this step's is written), the product's result, the carry past the gates (GRU:
    // to h_{t-1}; LSTM: dL/dc), reset_before's da_n and W_hn^T da_n, a projection's dL/dm
    // (d_rec and product are written before they are read: no zero-fill)
    Packed<T> d_rec[2], product;
    std::vector<T> carry, d_n, d_rh, d_m;
    // masked: every state h_t (T, B, R), found in y (a skipped step's output may be zeros); and
    // an LSTM's dL/dh_t of skipped rows, which passes to h_{t-1} past the gates (B, R)
    std::vector<T> states, skip_carry;
    // recurrent dropout: each gate's W_hg packed apart, and one gate's product (B, R); the
    // recurrent gradients d_rec are then per gate, (gates, B, H)
    std::vector<Packed<T>> packed_gates;
    std::vector<T> gate_product;
    // row_reductions: per row, (reductions, unit blocks, 2) sums (cells/layer_norm_lstm.hpp)
    std::vector<T> stats;
    static constexpr index EW = extra_width<Cell>();  // extra per row, in units of H

    GatedBackwardPass(const GatedBackwardArgs<T>& args, const T* h_start, const T* c_start)
        : GatedSizes(args, Cell::kGates),
          a(args),
          S(Cell::kStored * args.hidden_size),
          kt(kernels<T>()),
          rec_layout{H, Cell::kStepGates, kt.nr},
          masked(args.keep != nullptr),
          dropout(args.recurrent_mask != nullptr),
          h0(h_start),
          c0(c_start) {
        const index T_ = a.steps;
        if (masked) {
            masks = step_masks(a.keep, a.lengths, a.zero_output_for_mask, T_, B);
            const std::vector<index> source = state_sources(masks, T_, B);
            states.resize(static_cast<size_t>(T_ * B * R));
            for (index t = 0; t < T_; ++t)
                for (index b = 0; b < B; ++b) {
                    const index s = source[static_cast<size_t>(t * B + b)];
                    const T* from = s < 0 ? h0 + b * R : a.y + (s * B + b) * R;
                    std::copy(from, from + R, states.begin() + (t * B + b) * R);
                }
            if constexpr (Cell::kStates == 2) skip_carry.assign(static_cast<size_t>(B * R), T(0));
        }
        active = active_rows(masked ? nullptr : a.lengths, T_, B);
        threads = threads_for(2.0 * double(B) * double(R) * double(GH),
                              std::max(rec_layout.blocks(), B), Sync::barrier);
        // The recurrent weights as the forward multiplied them, now read as (G*H x R).
        if (!dropout) {
            // the recurrent gradients are in PyTorch's gate order: W_hh as stored (reset_before:
            // its r and z rows)
            const index N = rec_layout.columns();
            packed_rec = cached<T>(a.cache, key(a.w_hh, N, R, PackRole::recurrent_grad), [&] {
                return pack_whole(kt, MatView<T>{a.w_hh, R, 1}, N, R, threads);
            });
        } else {
            for (int g = 0; g < rec_layout.gates; ++g)
                packed_gates.push_back(
                    pack_whole(kt, MatView<T>{a.w_hh + g * H * R, R, 1}, H, R, threads));
            gate_product.resize(static_cast<size_t>(B * R));
        }
        if constexpr (Cell::kSecondProduct) {
            const T* w_hn = a.w_hh + 2 * H * H;
            packed_hn = cached<T>(a.cache, key(w_hn, H, H, PackRole::reset_grad), [&] {
                return pack_whole(kt, MatView<T>{w_hn, H, 1}, H, H, threads);
            });
            d_n.resize(static_cast<size_t>(B * H));
            d_rh.resize(static_cast<size_t>(B * H));
        }
        if (P > 0) {
            packed_hr = cached<T>(a.cache, key(a.w_hr, P, H, PackRole::projection_grad), [&] {
                return pack_whole(kt, MatView<T>{a.w_hr, H, 1}, P, H, threads);
            });
            dh_all.assign(static_cast<size_t>(T_ * B * P), T(0));
            m_all.assign(static_cast<size_t>(T_ * B * H), T(0));
            d_m.resize(static_cast<size_t>(B * H));
        }
        // Every row's gates run at every step unless lengths or a mask skip some: only then
        // do rows of dA stay as they start, zero. Zeroing it always was one more pass over
        // T * B * G * H values per call (25x64x1024x1024 LSTM: 26 MB).
        dA = scratch<T>(T_ * B * GH);
        if (masked || a.lengths) std::fill(dA.get(), dA.get() + T_ * B * GH, T(0));
        if constexpr (Cell::kInnerBias || Cell::kSecondProduct || cell_params<Cell>() > 0)
            extra.assign(static_cast<size_t>(T_ * B * EW * H), T(0));
        if constexpr (row_reductions<Cell>() > 0)
            stats.resize(static_cast<size_t>(B * row_reductions<Cell>() * rec_layout.blocks() * 2));
        for (auto& d : d_rec)
            d.resize(static_cast<size_t>(B * rec_layout.columns()));
        product.resize(static_cast<size_t>(B * H));
        carry.assign(static_cast<size_t>(B * H), T(0));
    }

    PackKey key(const T* source, index K, index N, PackRole role) const {
        return PackKey{source, &kt, K, N, rec_layout.block, role};
    }

    LoopShape shape() const {
        return {{a.steps, a.steps, true, false},
                {threads, threads},
                {B, active.data(), masked ? masks.keep.data() : nullptr},
                {GH, rec_layout.blocks(), rec_layout.gates * rec_layout.block, kt.mr}};
    }

    // Every state h_t, (T, B, R): y, or under a mask the states found in y.
    const T* all_states() const { return masked ? states.data() : a.y; }
    const T* h_prev(index t) const { return t == 0 ? h0 : all_states() + (t - 1) * B * R; }
    const T* c_prev(index t, index b) const {
        return t == 0 ? c0 + b * H : a.workspace + ((t - 1) * B + b) * S + Cell::kStoredState * H;
    }

    struct Member {
        GatedBackwardPass& p;
        const Team team;
        const int stepping;
        GemmTask<T> rec, n_term, to_m;
        std::vector<GemmTask<T>> gate_tasks;  // recurrent dropout: one product per gate

        Member(GatedBackwardPass& pass, const Team& t, int stepping_members)
            : p(pass), team(t), stepping(stepping_members) {
            const index GR = p.rec_layout.columns();
            rec = packed_task<T>(p.B, p.R, GR, p.dropout ? nullptr : p.packed_rec->data(), nullptr,
                                 p.R);
            for (const auto& packed : p.packed_gates)
                gate_tasks.push_back(
                    packed_task<T>(p.B, p.R, p.H, packed.data(), p.gate_product.data(), p.R));
            if constexpr (Cell::kSecondProduct) {
                n_term = packed_task<T>(p.B, p.H, p.H, p.packed_hn->data(), p.d_rh.data(), p.H);
                n_term.A = {p.d_n.data(), p.H, 1};
            }
            if (p.P > 0)
                to_m = packed_task<T>(p.B, p.H, p.P, p.packed_hr->data(), p.d_m.data(), p.H);
        }
        void chunk_begin(const Chunk&) {}
        void chunk_end(const Chunk&) {}

        // dL/dh_t of rows [m0, m1), columns [q0, q1) into `out` (leading dimension R): the
        // output's gradient, plus the recurrent one (rows running on) or dh_n (rows ending).
        void state_gradient(const Step& st, index m0, index m1, index p0, index p1, T* out,
                            bool add_carry) {
            const index t = st.t, R = p.R;
            const index GR = p.rec_layout.columns();
            const index q0 = std::min(R, p0 * p.kt.nr), q1 = std::min(R, p1 * p.kt.nr);
            const index on = std::min(m1, st.ending);
            if (!p.dropout) {
                rec.A = {p.d_rec[(t + 1) & 1].data(), GR, 1};
                rec.C = out;
                run_block(p.kt, rec, m0, on, p0, p1);
            } else {  // the sum over the gates of mask[g] * (W_hg^T da_g)
                for (index b = m0; b < on; ++b)
                    std::fill(out + b * R + q0, out + b * R + q1, T(0));
                const T* next = p.d_rec[(t + 1) & 1].data();
                for (size_t g = 0; g < gate_tasks.size(); ++g) {
                    gate_tasks[g].A = {next + g * p.B * p.H, p.H, 1};
                    run_block(p.kt, gate_tasks[g], m0, on, p0, p1);
                    const T* mask = p.a.recurrent_mask + g * p.B * R;
                    const T* prod = p.gate_product.data();
                    for (index b = m0; b < on; ++b)
                        for (index j = q0; j < q1; ++j)
                            out[b * R + j] += mask[b * R + j] * prod[b * R + j];
                }
            }
            const T* dy = p.a.dy ? p.a.dy + t * p.B * R : nullptr;
            const std::uint8_t* out_t = p.masked ? p.masks.out.data() + t * p.B : nullptr;
            T* skip = p.skip_carry.empty() ? nullptr : p.skip_carry.data();
            for (index b = m0; b < m1; ++b) {
                T* g = out + b * R;
                const bool runs_on = b < st.ending;
                const bool output = dy && (!out_t || out_t[b]);  // y_t is h_t (else zeros)
                for (index j = q0; j < q1; ++j) {
                    T v = runs_on ? g[j] + (add_carry ? p.carry[b * p.H + j] : T(0))
                                  : (p.a.dh_n ? p.a.dh_n[b * R + j] : T(0));
                    if (runs_on && skip) v += skip[b * R + j];
                    g[j] = v + (output ? dy[b * R + j] : T(0));
                }
                if (skip) {  // an LSTM's skipped row sends dL/dh_t on to h_{t-1} unchanged
                    const bool skipped = st.keep && !st.keep[b];
                    for (index j = q0; j < q1; ++j)
                        skip[b * R + j] = skipped ? g[j] : T(0);
                }
            }
        }

        void step(const Chunk&, const Step& st) {
            const index t = st.t, B = p.B, H = p.H, GH = p.GH, S = p.S;
            const index u0 = st.share.p0, u1 = st.share.p1, m0 = st.share.m0, m1 = st.share.m1;
            const int nr = p.kt.nr;
            const GateLayout& Lr = p.rec_layout;
            const index GR = Lr.columns();
            const index hp0 = u0, hp1 = std::min(u1, panel_count(H, nr));  // panels of H
            const T* h_prev = p.h_prev(t);
            const T* store = p.a.workspace + t * B * S;
            T* dA = p.dA.get() + t * B * GH;
            T* d_rec = p.d_rec[t & 1].data();
            constexpr bool two = Cell::kStates == 2;  // the carry is dL/dc
            // dL/dh_t (dL/dm_t for the LSTM) of this member's units
            const T* g_units = p.product.data();
            if (p.P == 0) {
                state_gradient(st, m0, m1, hp0, hp1, p.product.data(), !two);
            } else {
                const Share sp =
                    share_of(st.rows, panel_count(p.P, nr), p.kt.mr, team.me, stepping);
                T* dh = p.dh_all.data() + t * B * p.P;
                state_gradient(st, sp.m0, sp.m1, sp.p0, sp.p1, dh, false);
                st.barrier->wait();  // every column of dL/dh_t is in dh
                to_m.A = {dh, p.P, 1};
                run_block(p.kt, to_m, m0, m1, hp0, hp1);
                g_units = p.d_m.data();
            }
            if constexpr (two) {  // rows ending here start from dc_n
                const index c0 = std::min(H, u0 * Lr.block), c1 = std::min(H, u1 * Lr.block);
                for (index b = std::max(m0, st.ending); b < m1; ++b)
                    for (index j = c0; j < c1; ++j)
                        p.carry[b * H + j] = p.a.dc_n ? p.a.dc_n[b * H + j] : T(0);
            }
            T* extra = p.extra.empty() ? nullptr : p.extra.data() + t * B * EW * H;
            const auto row_stats = [&](index b) {
                return p.stats.empty()
                           ? nullptr
                           : p.stats.data() + b * row_reductions<Cell>() * Lr.blocks() * 2;
            };
            const auto grad_of = [&](index b, index u) {
                return GatedGradBlock<T>{g_units + b * H,
                                         p.carry.data() + b * H,
                                         store + b * S,
                                         h_prev + b * H,
                                         two ? p.c_prev(t, b) : nullptr,
                                         dA + b * GH,
                                         extra ? extra + b * EW * H : nullptr,
                                         p.P > 0 ? p.m_all.data() + (t * B + b) * H : nullptr,
                                         H,
                                         Lr.first_unit(u),
                                         Lr.width(u),
                                         p.a.act,
                                         p.a.rec,
                                         p.a.cell_params,
                                         row_stats(b),
                                         u,
                                         Lr.blocks()};
            };
            const auto skipped = [&](index b) { return st.keep && !st.keep[b]; };
            for (index b = m0; b < m1; ++b)
                for (index u = u0; u < u1; ++u) {
                    const index j0 = Lr.first_unit(u), w = Lr.width(u);
                    if (skipped(b)) {  // no gate ran: dA stays zero, the states pass through
                        if (!two)      // dL/dh_{t-1} = dL/dh_t (an LSTM's dc carries as it is)
                            std::copy(g_units + b * H + j0, g_units + b * H + j0 + w,
                                      p.carry.data() + b * H + j0);
                        if (Cell::kSecondProduct)
                            std::fill(p.d_n.begin() + b * H + j0, p.d_n.begin() + b * H + j0 + w,
                                      T(0));
                        continue;
                    }
                    Cell::grad_block(p.kt, grad_of(b, u));
                    if (Cell::kSecondProduct)
                        for (index k = 0; k < w; ++k)
                            p.d_n[b * H + j0 + k] = dA[b * GH + 2 * H + j0 + k];
                }
            // Row-wide reductions (the LayerNorm LSTM's norms): every block of the row has
            // published its sums before a member reads them.
            if constexpr (row_reductions<Cell>() > 0)
                for (int sub = 1; sub <= row_reductions<Cell>(); ++sub) {
                    st.barrier->wait();
                    for (index b = m0; b < m1; ++b)
                        for (index u = u0; u < u1 && !skipped(b); ++u)
                            Cell::reduced_grad(p.kt, grad_of(b, u), sub);
                }
            if constexpr (Cell::kSecondProduct) {
                st.barrier->wait();  // every unit's da_n is in d_n
                run_block(p.kt, n_term, m0, m1, hp0, hp1);
                for (index b = m0; b < m1; ++b)
                    for (index u = u0; u < u1 && !skipped(b); ++u)
                        with_gate_functions(p.a.act, p.a.rec, [&](auto, auto rec) {
                            Cell::template second_grad<rec()>(
                                p.d_rh.data() + b * H, store + b * S, h_prev + b * H,
                                p.dropout ? p.a.recurrent_mask + (2 * B + b) * H : nullptr,
                                dA + b * GH, p.carry.data() + b * H, extra + b * H,
                                Lr.first_unit(u), Lr.width(u));
                        });
            }
            // The recurrent product's gradients, in its column order, for step t - 1.
            for (index b = m0; b < m1; ++b)
                for (index u = u0; u < u1; ++u) {
                    const index j0 = Lr.first_unit(u), w = Lr.width(u);
                    for (int g = 0; g < Lr.gates; ++g) {
                        // PyTorch's gate order (W_hh's rows), or per gate (g, B, H) under
                        // recurrent dropout (each gate's product apart)
                        T* out =
                            p.dropout ? d_rec + (g * B + b) * H + j0 : d_rec + b * GR + g * H + j0;
                        const T* src = (Cell::kInnerBias && g == 2)
                                           ? extra + b * H + j0  // da_n * r
                                           : dA + b * GH + g * H + j0;
                        if (skipped(b))
                            std::fill(out, out + w, T(0));
                        else
                            std::copy(src, src + w, out);
                    }
                }
        }
    };
};

// C (M x R) = sum_t A_t^T h_{t-1}: A (T*B rows, its M columns at stride lda), h_{t-1} = y_{t-1}
// or h0 at t = 0 (none: zeros).
template <class T>
void gradient_against_previous(const KernelTable<T>& kt, index M, const T* A, index lda, const T* y,
                               const T* h0, index steps, index B, index R, T* C, int threads) {
    std::fill(C, C + M * R, T(0));
    if (steps > 1)
        gemm(kt, M, R, (steps - 1) * B, MatView<T>{A + B * lda, 1, lda}, MatView<T>{y, R, 1}, C, R,
             true, threads);
    if (h0) gemm(kt, M, R, B, MatView<T>{A, 1, lda}, MatView<T>{h0, R, 1}, C, R, true, threads);
}

// C (M x R) = sum_t A_t^T (h_{t-1} * mask): a gate's recurrent weights under recurrent dropout,
// whose product read h_{t-1} through its mask (B, R), the same at every step. `read` holds the
// masked states (steps * B * R), a buffer the caller reuses for every gate.
template <class T>
void gradient_against_masked_previous(const KernelTable<T>& kt, index M, const T* A, index lda,
                                      const T* y, const T* h0, const T* mask, index steps, index B,
                                      index R, T* C, int threads, T* read) {
    if (h0)
        apply_recurrent_mask(read, h0, mask, R, Block{0, B, 0, R});
    else
        std::fill(read, read + B * R, T(0));
    mask_every_step(read + B * R, y, mask, steps - 1, B, R);
    gemm(kt, M, R, steps * B, MatView<T>{A, 1, lda}, MatView<T>{read, R, 1}, C, R, false, threads);
}

template <class T>
void column_sums(const T* A, index rows, index cols, index lda, T* out) {
    std::fill(out, out + cols, T(0));
    for (index r = 0; r < rows; ++r)
        for (index c = 0; c < cols; ++c)
            out[c] += A[r * lda + c];
}

// dx = dA W_ih for `rows` rows of dA (G*H = GH columns). Where W_ih (G*H x D) is one block of the
// GEMM's blocking, it is packed whole once, in the layer's cache, instead of on every call (at T =
// 1 it was the backward's largest pack); larger ones run gemm(), block by block.
template <class T>
void input_gradient(const KernelTable<T>& kt, const GatedBackwardArgs<T>& a, const T* dA,
                    index rows, index GH, int threads) {
    const index D = a.input_size;
    const GemmBlocking bk = kt.blocking();
    const MatView<T> w_ih{a.w_ih, D, 1};
    if (!a.cache || GH > bk.kc || D > bk.nc)
        return gemm(kt, rows, D, GH, MatView<T>{dA, GH, 1}, w_ih, a.dx, D, false, threads);
    const auto packed = cached<T>(a.cache, PackKey{a.w_ih, &kt, GH, D, 0, PackRole::input_grad},
                                  [&] { return pack_whole(kt, w_ih, GH, D, threads); });
    GemmTask<T> task = packed_task<T>(rows, D, GH, packed->data(), a.dx, D);
    task.A = {dA, GH, 1};
    run_task(kt, task, threads);
}

template <class T, class Cell>
void backward(const GatedBackwardArgs<T>& a) {
    const index T_ = a.steps, B = a.batch, D = a.input_size, H = a.hidden_size;
    const index P = a.proj_size, R = P > 0 ? P : H;
    const index GH = Cell::kGates * H;
    constexpr bool lstm = Cell::kStates == 2;
    // dw_ih, dw_hh and dx are written whole by the GEMMs after the walk (input dropout adds
    // into dx: zeroed there); zeroed here only when there is no walk.
    const index dx_rows = a.ids ? a.vocab : T_ * B;
    std::fill(a.db_ih, a.db_ih + GH, T(0));
    std::fill(a.db_hh, a.db_hh + GH, T(0));
    if (P > 0) std::fill(a.dw_hr, a.dw_hr + P * H, T(0));
    if constexpr (cell_params<Cell>() > 0) {
        if (!a.cell_params || !a.dcell_params)
            throw std::invalid_argument("cell_params: expected the cell's parameters, got none");
        std::fill(a.dcell_params, a.dcell_params + cell_params<Cell>() * H, T(0));
    }
    // Sequences of length 0 (all, when T = 0) pass dh_n and dc_n straight to h0 and c0.
    for (index i = 0; i < B * R; ++i)
        a.dh0[i] = a.dh_n ? a.dh_n[i] : T(0);
    if (lstm)
        for (index i = 0; i < B * H; ++i)
            a.dc0[i] = a.dc_n ? a.dc_n[i] : T(0);
    if (T_ == 0 || B == 0 || H == 0) {
        std::fill(a.dw_ih, a.dw_ih + GH * D, T(0));
        std::fill(a.dw_hh, a.dw_hh + GH * R, T(0));
        if (a.dx) std::fill(a.dx, a.dx + dx_rows * D, T(0));
        return;
    }
    std::vector<T> zeros;
    const T *h0 = a.h0, *c0 = a.c0;
    if (!h0 || (lstm && !c0)) zeros.assign(static_cast<size_t>(B * std::max(R, H)), T(0));
    if (!c0) c0 = zeros.data();
    GatedBackwardPass<T, Cell> pass(a, h0 ? h0 : zeros.data(), c0);
    run_time_loop(pass.shape(), pass);

    const KernelTable<T>& kt = pass.kt;
    const index rows = T_ * B;
    const int fork = threads_for(2.0 * double(rows) * double(GH) * double(std::max(D, R)),
                                 std::max(panel_count(GH, kt.nr), rows), Sync::fork_join);
    // h0 and c0 of the sequences that ran: the first step's recurrent gradient and carry.
    const index first = pass.active[0];
    if (first > 0 && !pass.dropout) {  // on W_hh as the walk's products read it, packed once
        const index GR = pass.rec_layout.columns();
        GemmTask<T> to_h0 = packed_task<T>(first, R, GR, pass.packed_rec->data(), a.dh0, R);
        to_h0.A = {pass.d_rec[0].data(), GR, 1};
        run_task(kt, to_h0, fork);
    } else if (first > 0) {  // per gate, each through its mask
        std::fill(a.dh0, a.dh0 + first * R, T(0));
        std::vector<T> product(static_cast<size_t>(first * R));
        for (int g = 0; g < pass.rec_layout.gates; ++g) {
            gemm(kt, first, R, H, MatView<T>{pass.d_rec[0].data() + g * B * H, H, 1},
                 MatView<T>{a.w_hh + g * H * R, R, 1}, product.data(), R, false, fork);
            const T* mask = a.recurrent_mask + g * B * R;
            for (index i = 0; i < first * R; ++i)
                a.dh0[i] += mask[i] * product[i];
        }
    }
    if (first > 0) {
        for (index b = 0; b < first; ++b) {
            for (index j = 0; j < H; ++j) {
                if (lstm)
                    a.dc0[b * H + j] = pass.carry[b * H + j];
                else
                    a.dh0[b * R + j] += pass.carry[b * H + j];
            }
            if (!pass.skip_carry.empty())
                for (index j = 0; j < R; ++j)
                    a.dh0[b * R + j] += pass.skip_carry[b * R + j];
        }
    }
    const T* dA = pass.dA.get();
    if (a.ids) {  // token input: the rows' gradients summed per id, then two table-sized GEMMs
        std::vector<T> per_id(static_cast<size_t>(a.vocab * GH), T(0));
        for (index r = 0; r < rows; ++r) {
            T* to = per_id.data() + a.ids[r] * GH;
            for (index c = 0; c < GH; ++c)
                to[c] += dA[r * GH + c];
        }
        gemm(kt, GH, D, a.vocab, MatView<T>{per_id.data(), 1, GH}, MatView<T>{a.x, D, 1}, a.dw_ih,
             D, false, fork);
        if (a.dx)
            gemm(kt, a.vocab, D, GH, MatView<T>{per_id.data(), GH, 1}, MatView<T>{a.w_ih, D, 1},
                 a.dx, D, false, fork);
    } else if (!a.input_mask) {
        gemm(kt, GH, D, rows, MatView<T>{dA, 1, GH}, MatView<T>{a.x, D, 1}, a.dw_ih, D, false,
             fork);
        if (a.dx) input_gradient(kt, a, dA, rows, GH, fork);
    } else {  // input dropout: gate g's projection read x * input_mask[g]
        std::vector<T> masked(static_cast<size_t>(rows * D));
        if (a.dx) std::fill(a.dx, a.dx + dx_rows * D, T(0));
        for (int g = 0; g < Cell::kGates; ++g) {
            const T* mask = a.input_mask + g * B * D;
            mask_every_step(masked.data(), a.x, mask, T_, B, D);
            gemm(kt, H, D, rows, MatView<T>{dA + g * H, 1, GH}, MatView<T>{masked.data(), D, 1},
                 a.dw_ih + g * H * D, D, false, fork);
            if (!a.dx) continue;
            gemm(kt, rows, D, H, MatView<T>{dA + g * H, GH, 1},
                 MatView<T>{a.w_ih + g * H * D, D, 1}, masked.data(), D, false, fork);
            for (index r = 0; r < rows; ++r)
                for (index d = 0; d < D; ++d)
                    a.dx[r * D + d] +=
                        mask[(r % B) * D + d] * masked[static_cast<size_t>(r * D + d)];
        }
    }
    column_sums(dA, rows, GH, GH, a.db_ih);
    std::copy(a.db_ih, a.db_ih + GH, a.db_hh);
    const T* extra = pass.extra.data();
    const T* states = pass.all_states();
    if (pass.dropout) {  // each gate's rows through its mask (reset_before's n: below, as always)
        std::vector<T> read(static_cast<size_t>(T_ * B * R));
        for (int g = 0; g < pass.rec_layout.gates; ++g) {
            const bool n_term = Cell::kInnerBias && g == 2;  // da_n * r
            gradient_against_masked_previous(kt, H, n_term ? extra : dA + g * H, n_term ? H : GH,
                                             states, a.h0, a.recurrent_mask + g * B * R, T_, B, R,
                                             a.dw_hh + g * H * R, fork, read.data());
        }
        if (Cell::kInnerBias) column_sums(extra, rows, H, H, a.db_hh + 2 * H);
        if (Cell::kSecondProduct)
            gemm(kt, H, H, rows, MatView<T>{dA + 2 * H, 1, GH}, MatView<T>{extra, H, 1},
                 a.dw_hh + 2 * H * H, H, false, fork);
    } else {
        // the rows whose product read h_{t-1} as it is
        gradient_against_previous(kt, Cell::kDirectGates * H, dA, GH, states, a.h0, T_, B, R,
                                  a.dw_hh, fork);
        if (Cell::kInnerBias) {  // the n rows read r * (W_hn h): their gradient is da_n * r
            gradient_against_previous(kt, H, extra, H, states, a.h0, T_, B, R, a.dw_hh + 2 * H * R,
                                      fork);
            column_sums(extra, rows, H, H, a.db_hh + 2 * H);
        }
        if (Cell::kSecondProduct)  // the n rows read r * h_{t-1}, kept in extra
            gemm(kt, H, H, rows, MatView<T>{dA + 2 * H, 1, GH}, MatView<T>{extra, H, 1},
                 a.dw_hh + 2 * H * H, H, false, fork);
    }
    if (P > 0)
        gemm(kt, P, H, rows, MatView<T>{pass.dh_all.data(), 1, P},
             MatView<T>{pass.m_all.data(), H, 1}, a.dw_hr, H, false, fork);
    if constexpr (cell_params<Cell>() > 0)
        Cell::param_gradients(pass.extra.data(), a.workspace, rows, H, a.dcell_params);
}

}  // namespace

template <class T>
void gated_backward(const GatedBackwardArgs<T>& a) {
    with_gated_cell<T>(a.cell, [&](auto cell) { backward<T, decltype(cell)>(a); });
}

template void gated_backward(const GatedBackwardArgs<float>&);
template void gated_backward(const GatedBackwardArgs<double>&);

}  // namespace rnnfast
