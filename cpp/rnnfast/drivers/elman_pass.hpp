// The Elman forward as one pass of the one time loop (time_loop.hpp), templated on the element
// type, the cell (cells/elman.hpp) and the product: the float GEMMs (rnn_forward.cpp) or the
// int8 / bf16 products of rnnfast.quantize (quantized/qdriver.cpp). Per chunk, the input
// projection of its steps, then the recurrence: each step one product of h_{t-1} with W_hh^T onto
// the projection in place, the activation in its epilogue, then the cell's finish on the same
// block (no barrier); the loop's barrier after the step publishes h_t.
//
// What a Product gives the pass (GemmElmanProducts, quantized::ElmanProducts):
//   threads, team, chunk   the stepping members, the region's team (>= threads), steps per chunk
//   region_per_chunk       the projection runs before each region (before_region), serially;
//                          else inside the team (Member::chunk_begin)
//   columns                the step's column split (LoopShape::Columns)
//   before_region(chunk, out)        the chunk's input projection into out, outside the team
//   Member(product, team, stepping)  one per thread, inside the region
//     chunk_begin(chunk, out)        the team's part of the projection (and first packing)
//     step(step, h_prev, h)          h = act(h + h_prev W_hh^T) on the member's block
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "rnn.hpp"
#include "rnnfast/runtime/types.hpp"
#include "step_masks.hpp"
#include "time_loop.hpp"

namespace rnnfast {

template <class T, class Cell, class Product>
struct ElmanForwardPass : TimeLoopPass {
    static_assert(single_product_cell<Cell>(), "a cell of one state, gate group and product");
    const ForwardArgs<T>& a;
    const index B, H, step_size;
    Product& product;
    const ForwardRows rows;  // a general mask or recurrent dropout: every row runs every step
    // Every h_t goes straight into y, a chunk at a time; without y, two chunks used in turn (a
    // chunk's first step reads the other's last).
    const bool keep_all;
    const index chunk;
    std::vector<T> workspace;
    const T* h_prev0;

    ElmanForwardPass(const ForwardArgs<T>& args, Product& products, const T* h_start)
        : a(args),
          B(args.batch),
          H(args.hidden_size),
          step_size(B * H),
          product(products),
          rows(args.keep != nullptr || args.recurrent_mask != nullptr, args.keep, args.lengths,
               args.zero_output_for_mask, args.steps, args.batch),
          keep_all(args.y != nullptr),
          chunk(products.chunk),
          h_prev0(h_start) {
        if (!keep_all) workspace.resize(static_cast<size_t>(2 * chunk * step_size));
    }

    LoopShape shape() const {
        return {{a.steps, chunk, false, product.region_per_chunk},
                {product.team, product.threads},
                {B, rows.active.data(), rows.keep()},
                product.columns};
    }

    // Where chunk c's steps live, and the state its first step reads.
    T* chunk_buffer(const Chunk& c) {
        if (keep_all) return a.y + c.t0 * step_size;
        const index slot = (c.t0 / chunk) & 1;
        return workspace.data() + slot * chunk * step_size;
    }
    const T* state_before(const Chunk& c) const {
        if (c.t0 == 0) return h_prev0;
        if (keep_all) return a.y + (c.t0 - 1) * step_size;
        const index slot = ((c.t0 / chunk) & 1) ^ 1;  // the other chunk's last step
        return workspace.data() + (slot * chunk + chunk - 1) * step_size;
    }

    void before_region(const Chunk& c) {
        if (product.region_per_chunk) product.before_region(c, chunk_buffer(c));
    }

    void after_region(const Chunk& c) {  // (padded rows hold the projection or nothing)
        rows.finish(keep_all ? a.y : nullptr, product.region_per_chunk ? c.t0 : 0, c.t0 + c.steps,
                    B, H, a.steps);
    }

    // The recurrence: each thread owns the same hidden units at every step (its slice of the
    // recurrent weights stays in its cache).
    struct Member {
        ElmanForwardPass& p;
        typename Product::Member products;
        T* buffer = nullptr;            // the chunk's steps
        const T* first_prev = nullptr;  // the state its first step reads

        Member(ElmanForwardPass& pass, const Team& team, int stepping)
            : p(pass), products(pass.product, team, stepping) {}

        void chunk_begin(const Chunk& c) {
            buffer = p.chunk_buffer(c);
            first_prev = p.state_before(c);
            if (!p.product.region_per_chunk) products.chunk_begin(c, buffer);
        }

        void step(const Chunk&, const Step& st) {
            const index H = p.H, i = st.i;
            const Block& own = st.own;
            const T* h_prev = i == 0 ? first_prev : buffer + (i - 1) * p.step_size;
            T* h = buffer + i * p.step_size;
            products.step(st, h_prev, h);
            Cell::finish_step(h, h_prev, H, own, p.a.alpha);  // the same block: no barrier
            if (st.keep) carry_skipped_rows(h, h_prev, st.keep, H, own);
            keep_final_state(p.a.h_n, h, H, own, st.ending);  // h_n of sequences ending here
        }
        void chunk_end(const Chunk&) {}
    };
};

// The Elman forward of cell `Cell` on the products of `Product`, built from the arguments and
// `weights` (what the product reads besides them).
template <class T, class Cell, class Product, class... Weights>
void run_elman_forward(const ForwardArgs<T>& a, const Weights&... weights) {
    const index step_size = a.batch * a.hidden_size;
    std::vector<T> zeros;
    const T* h_prev0 = start_state(a.h0, a.h_n, step_size, zeros);
    if (a.steps == 0 || step_size == 0) return;  // nothing to compute (and no null memcpys)
    Product product(a, weights...);
    ElmanForwardPass<T, Cell, Product> pass(a, product, h_prev0);
    run_time_loop(pass.shape(), pass);
    product.finish();
}

}  // namespace rnnfast
