// The gated cells' forward as one pass of the one time loop (time_loop.hpp), templated on the
// element type, the cell (cells/gated_cell.hpp) and the product: the float GEMMs
// (gated_forward.cpp) or the int8 / bf16 products of rnnfast.quantize (quantized/qgated.cpp).
// Per chunk of steps the input projection (one product, G*H wide), then the recurrence: each
// step is one product of h_{t-1} with the recurrent weights, their columns grouped so that a
// thread's panels hold every gate of its hidden units (cells/gate_layout.hpp), and the cell's
// epilogue on the same block at once; the loop's barrier after the step publishes h_t. A
// cell's second product (Cell::kSecondProduct: reset_before's W_hn (r * h)) and the LSTM's
// projection (W_hr m) read every unit of the step: a sub-step after a barrier.
//
// What a Product gives the pass (GemmGatedProducts, quantized::GatedProducts):
//   layout, rec_layout   the projection's and the first product's gate layouts
//   (cells/gate_layout.hpp) threads, team        the stepping members, and the region's team (>=
//   threads) chunk, row_granule   steps per chunk; rows split between members in multiples of this
//   region_per_chunk     the projection runs before each region (before_region), serially;
//                        else inside the team (Member::chunk_begin)
//   before_region(chunk, gx)            the chunk's input projection into gx, outside the team
//   Member(product, team, stepping)     one per thread, inside the region
//     chunk_begin(chunk, gx)            the team's part of the projection (and first packing)
//     first(step, h_prev)               the first product on the member's rows and unit blocks
//     terms(b, u)                       row b's recurrent terms of unit block u (layout order)
//     r_reads(h_prev)                   the h_{t-1} that reset_before's r scales
//     second(step, rh)                  W_hn (r * h) on the member's rows and units
//     second_terms(b)                   row b of that product (unit j at j)
//     project(step, m, h)               h = W_hr m on a share of the step; returns the block
//   finish()                            after the loop (publishes what it packed for later calls)
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "gated.hpp"
#include "rnn.hpp"
#include "rnnfast/cells/gate_layout.hpp"
#include "rnnfast/cells/gated_cell.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/kernel_table.hpp"
#include "step_masks.hpp"
#include "time_loop.hpp"

namespace rnnfast {

template <class T, class Cell, class Product>
struct GatedForwardPass : TimeLoopPass, GatedSizes {
    const GatedForwardArgs<T>& a;
    const KernelTable<T>& kt;  // the cell's gate functions
    Product& product;
    const GateLayout& layout;      // the projection's and the stored gates' columns
    const GateLayout& rec_layout;  // the first product's: all gates, or those of kStepGates
    const ForwardRows rows;        // a general mask: every row runs every step
    const bool keep_all;           // every h_t kept in y
    std::unique_ptr<T[]> gx;       // written whole by each chunk's projection before it is read
    std::vector<T> rh, m, h_ring, c_ring;
    std::vector<T> stats;  // row_reductions: per row, (reductions, unit blocks, 3)
    const T *h_start, *c_start;

    GatedForwardPass(const GatedForwardArgs<T>& args, Product& products, const T* h0, const T* c0)
        : GatedSizes(args, Cell::kGates),
          a(args),
          kt(kernels<T>()),
          product(products),
          layout(products.layout),
          rec_layout(products.rec_layout),
          rows(args.keep != nullptr, args.keep, args.lengths, args.zero_output_for_mask, args.steps,
               args.batch),
          keep_all(args.y != nullptr),
          h_start(h0),
          c_start(c0) {
        gx.reset(new T[static_cast<size_t>(product.chunk * B * GH)]);
        if constexpr (Cell::kSecondProduct) rh.resize(static_cast<size_t>(B * H));
        if (P > 0) m.resize(static_cast<size_t>(B * H));
        if (!keep_all) h_ring.resize(static_cast<size_t>(2 * B * R));
        if constexpr (Cell::kStates == 2) c_ring.resize(static_cast<size_t>(2 * B * H));
        if constexpr (row_reductions<Cell>() > 0)
            stats.resize(static_cast<size_t>(B * row_reductions<Cell>() * layout.blocks() * 3));
    }

    LoopShape shape() const {
        return {{a.steps, product.chunk, false, product.region_per_chunk},
                {product.team, product.threads},
                {B, rows.active.data(), rows.keep()},
                {GH, layout.blocks(), layout.gates * layout.block, product.row_granule}};
    }

    const T* h_at(index t) const {
        if (t < 0) return h_start;
        return keep_all ? a.y + t * B * R : h_ring.data() + (t & 1) * B * R;
    }
    T* h_at(index t) { return const_cast<T*>(std::as_const(*this).h_at(t)); }
    const T* c_at(index t) const { return t < 0 ? c_start : c_ring.data() + (t & 1) * B * H; }
    T* c_at(index t) { return const_cast<T*>(std::as_const(*this).c_at(t)); }

    // Row b's block of units j0.. at step t for the cell's epilogue: `x` and `hh` its projected
    // input and product terms, `reads` what r scales (reset_before).
    GatedBlock<T> block(index t, index b, T* x, const T* hh, const T* reads, T* store, index j0,
                        index w) {
        T* h = h_at(t) + b * R;
        return GatedBlock<T>{x,
                             hh,
                             h_at(t - 1) + b * R,
                             reads + b * R,
                             h,
                             Cell::kStates == 2 ? c_at(t - 1) + b * H : nullptr,
                             Cell::kStates == 2 ? c_at(t) + b * H : nullptr,
                             P > 0 ? m.data() + b * H : h,
                             Cell::kSecondProduct ? rh.data() + b * H : nullptr,
                             store ? store + b * Cell::kStored * H : nullptr,
                             H,
                             j0,
                             w,
                             a.act,
                             a.rec,
                             a.cell_params,
                             stats.empty()
                                 ? nullptr
                                 : stats.data() + b * row_reductions<Cell>() * layout.blocks() * 3,
                             j0 / layout.block,
                             layout.blocks()};
    }

    void before_region(const Chunk& c) {
        if (product.region_per_chunk) product.before_region(c, gx.get());
    }

    void after_region(const Chunk& c) {
        rows.finish(keep_all ? a.y : nullptr, product.region_per_chunk ? c.t0 : 0, c.t0 + c.steps,
                    B, R, a.steps);
    }

    struct Member {
        GatedForwardPass& p;
        typename Product::Member products;

        Member(GatedForwardPass& pass, const Team& team, int stepping)
            : p(pass), products(pass.product, team, stepping) {}
        void chunk_begin(const Chunk& c) {
            if (!p.product.region_per_chunk) products.chunk_begin(c, p.gx.get());
        }
        void chunk_end(const Chunk&) {}

        void step(const Chunk& c, const Step& st) {
            const index t = st.t, B = p.B, H = p.H, R = p.R, GH = p.GH;
            const index u0 = st.share.p0, u1 = st.share.p1, m0 = st.share.m0, m1 = st.share.m1;
            const GateLayout& L = p.layout;
            const T* h_prev = p.h_at(t - 1);
            T* h = p.h_at(t);
            T* gx = p.gx.get() + (t - c.t0) * B * GH;
            T* store = p.a.workspace ? p.a.workspace + t * B * Cell::kStored * H : nullptr;
            products.first(st, h_prev);
            const T* reads = products.r_reads(h_prev);
            for (index b = m0; b < m1; ++b)
                for (index u = u0; u < u1; ++u) {
                    const index j0 = L.first_unit(u), w = L.width(u);
                    Cell::forward_block(p.kt, p.block(t, b, gx + b * GH + L.base(u),
                                                      products.terms(b, u), reads, store, j0, w));
                }
            // Row-wide reductions (the LayerNorm LSTM's norms): every block of the row has
            // published its statistics before a member reads them.
            if constexpr (row_reductions<Cell>() > 0)
                for (int sub = 1; sub <= row_reductions<Cell>(); ++sub) {
                    st.barrier->wait();
                    for (index b = m0; b < m1; ++b)
                        for (index u = u0; u < u1; ++u) {
                            const index j0 = L.first_unit(u), w = L.width(u);
                            Cell::reduced_block(p.kt,
                                                p.block(t, b, gx + b * GH + L.base(u), nullptr,
                                                        reads, store, j0, w),
                                                sub);
                        }
                }
            if constexpr (Cell::kSecondProduct) {
                st.barrier->wait();  // every unit's r * h_{t-1} is in rh
                products.second(st, p.rh.data());
                for (index b = m0; b < m1; ++b)
                    for (index u = u0; u < u1; ++u) {
                        const index j0 = L.first_unit(u), w = L.width(u);
                        Cell::second_block(
                            p.kt, p.block(t, b, gx + b * GH + L.base(u),
                                          products.second_terms(b) + j0, reads, store, j0, w));
                    }
            }
            const index c0 = std::min(H, u0 * L.block), c1 = std::min(H, u1 * L.block);
            const Block own{m0, m1, c0, c1};  // this member's units, on its rows
            if (st.keep) {  // skipped rows keep their states (c_t = c_{t-1}, as stored)
                if (p.P == 0) carry_skipped_rows(h, h_prev, st.keep, R, own);
                if constexpr (Cell::kStates == 2) {
                    T* c_now = p.c_at(t);
                    carry_skipped_rows(c_now, p.c_at(t - 1), st.keep, H, own);
                    const index S = Cell::kStored * H, at = Cell::kStoredState * H;
                    if (store)
                        for (index b = m0; b < m1; ++b)
                            if (!st.keep[b])
                                std::copy(c_now + b * H + c0, c_now + b * H + c1,
                                          store + b * S + at + c0);
                }
            }
            // Sequences whose last step this is keep their states.
            if constexpr (Cell::kStates == 2)
                keep_final_state(p.a.c_n, p.c_at(t), H, own, st.ending);
            if (p.P > 0) {
                st.barrier->wait();  // every unit's m_t is in m
                const Block q = products.project(st, p.m.data(), h);
                if (st.keep) carry_skipped_rows(h, h_prev, st.keep, R, q);
                keep_final_state(p.a.h_n, h, R, q, st.ending);
            } else {
                keep_final_state(p.a.h_n, h, R, own, st.ending);
            }
        }
    };
};

// The gated forward of cell `Cell` on the products of `Product`, built from the arguments and
// `weights` (what the product reads besides them).
template <class T, class Cell, class Product, class... Weights>
void run_gated_forward(const GatedForwardArgs<T>& a, const Weights&... weights) {
    const GatedStart<T> start = start_states<Cell>(a);
    // Rows past a sequence's end are never read; zeros keep them deterministic. Without
    // lengths or a mask every row of every step is stored whole before the backward reads it
    // (checked: the kernel tests pass with the workspace filled with NaN first), so there is
    // nothing to zero (at T = 1, B = 32, H = 256 an LSTM's was 160 KiB per call).
    if (a.workspace && (a.lengths || a.keep))
        std::memset(
            a.workspace, 0,
            sizeof(T) * static_cast<size_t>(a.steps * a.batch * Cell::kStored * a.hidden_size));
    if (a.steps == 0 || a.batch == 0 || a.hidden_size == 0) return;
    Product product(a, weights...);
    GatedForwardPass<T, Cell, Product> pass(a, product, start.h0, start.c0);
    run_time_loop(pass.shape(), pass);
    product.finish();
}

}  // namespace rnnfast
