// The deep-transition backward (deep_transition.hpp) as a pass of the one time loop, walking
// the steps back. At step t, over the sequences running at t:
//   g = dy_t + dL/dh_t from step t + 1 (+ dh_n where t is a sequence's last step)
//   delta_k = g * act'(h_t);  delta_{i-1} = (delta_i W_i) * act'(z_{i-1})   (i = k..2)
//   dL/dh_{t-1} = delta_1 W_hh
// each product after a barrier (it reads every unit of the delta before it), act' from the
// stored outputs in the product's epilogue. Every layer's deltas are kept for all steps, so the
// weight and input gradients are large GEMMs after the walk (dW_i = sum_t delta_i^T z_{i-1},
// dW_hh = sum_t delta_1^T h_{t-1}, dW_ih = delta_1^T X, dX = delta_1 W_ih, biases the sums).
#include <algorithm>
#include <cstring>
#include <vector>

#include "backward_parts.hpp"
#include "deep_transition.hpp"
#include "rnn.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "time_loop.hpp"

namespace rnnfast {
namespace {

template <class T>
struct DeepBackwardPass : TimeLoopPass {
    const DeepBackwardArgs<T>& a;
    const index B, H, L, step_size;
    const KernelTable<T>& kt;
    const index panels;
    const std::vector<index> active;
    const int threads;
    Packed<T> packed_hh;               // B(k, n) = W_hh[k, n]: delta_1 W_hh
    std::vector<Packed<T>> packed_tr;  // W_i, i = 2..k
    std::vector<T> delta;              // (k, T, B, H), zero where no sequence runs
    std::vector<T> carry;              // dL/dh_t from step t + 1 (B, H)

    explicit DeepBackwardPass(const DeepBackwardArgs<T>& args)
        : a(args),
          B(args.batch),
          H(args.hidden_size),
          L(args.layers),
          step_size(args.batch * args.hidden_size),
          kt(kernels<T>()),
          panels(panel_count(H, kt.nr)),
          active(active_rows(args.lengths, args.steps, args.batch)),
          threads(threads_for(2.0 * double(L) * double(B) * double(H) * double(H),
                              std::max(panels, B), Sync::barrier)),
          delta(static_cast<size_t>(args.layers * args.steps * step_size), T(0)),
          carry(static_cast<size_t>(step_size), T(0)) {
        packed_hh = pack_whole(kt, MatView<T>{a.w_hh, H, 1}, H, H, threads);
        for (index i = 0; i + 1 < L; ++i)
            packed_tr.push_back(
                pack_whole(kt, MatView<T>{a.w_tr + i * H * H, H, 1}, H, H, threads));
    }

    LoopShape shape() const {
        return {{a.steps, a.steps, true, false},
                {threads, threads},
                {B, active.data(), nullptr},
                kernel_columns(kt, H)};
    }

    T* delta_at(index i, index t) { return delta.data() + ((i - 1) * a.steps + t) * step_size; }
    const T* z(index i, index t) const {
        return i == L ? a.y + t * step_size : a.workspace + ((i - 1) * a.steps + t) * step_size;
    }

    struct Member {
        DeepBackwardPass& p;
        GemmTask<T> layer, back;
        const Epilogue grad;

        Member(DeepBackwardPass& pass, const Team&, int)
            : p(pass),
              layer(packed_task<T>(p.B, p.H, p.H, nullptr, nullptr, p.H)),
              back(packed_task<T>(p.B, p.H, p.H, p.packed_hh.data(), p.carry.data(), p.H)),
              grad(gradient_epilogue(p.a.act)) {
            layer.op = grad;
            layer.ldaux = p.H;
        }
        void chunk_begin(const Chunk&) {}
        void chunk_end(const Chunk&) {}

        void step(const Chunk&, const Step& st) {
            const index t = st.t, H = p.H;
            const Share& s = st.share;
            const Block& own = st.own;
            // delta_k on the member's block, element-wise
            const T* h = p.z(p.L, t);
            const T* dy = p.a.dy ? p.a.dy + t * p.step_size : nullptr;
            T* d = p.delta_at(p.L, t);
            const bool tanh = p.a.act == Activation::tanh;
            for (index r = own.m0; r < own.m1; ++r) {
                const bool ends = r >= st.ending && p.a.dh_n;
                for (index j = own.c0; j < own.c1; ++j) {
                    const index e = r * H + j;
                    T g = p.carry[e] + (dy ? dy[e] : T(0)) + (ends ? p.a.dh_n[e] : T(0));
                    d[e] = tanh ? g * (T(1) - h[e] * h[e]) : (h[e] > T(0) ? g : g * T(0));
                }
            }
            for (index i = p.L; i >= 2; --i) {
                st.barrier->wait();  // every unit of delta_i
                layer.A = {p.delta_at(i, t), H, 1};
                layer.packed_b = p.packed_tr[static_cast<size_t>(i - 2)].data();
                layer.C = p.delta_at(i - 1, t);
                layer.aux = p.z(i - 1, t);
                run_block(p.kt, layer, s.m0, s.m1, s.p0, s.p1);
            }
            st.barrier->wait();  // every unit of delta_1; carry's own block already read
            back.A = {p.delta_at(1, t), H, 1};
            run_block(p.kt, back, s.m0, s.m1, s.p0, s.p1);
        }
    };
};

// dst (M x N) = A^T B over `rows` rows: A (rows x M), B (rows x N), both row-major; added to
// dst when accumulate.
template <class T>
void transposed_product(const KernelTable<T>& kt, const T* A, index M, const T* Bm, index N,
                        index rows, T* dst, bool accumulate, int threads) {
    gemm(kt, M, N, rows, MatView<T>{A, 1, M}, MatView<T>{Bm, N, 1}, dst, N, accumulate, threads);
}

}  // namespace

template <class T>
void deep_backward(const DeepBackwardArgs<T>& a) {
    const index T_ = a.steps, B = a.batch, D = a.input_size, H = a.hidden_size, L = a.layers;
    const index rows = T_ * B;
    DeepBackwardPass<T> pass(a);
    if (rows > 0 && H > 0) run_time_loop(pass.shape(), pass);
    // dh0: the carry past step 0 for the sequences that ran; a sequence of length 0 passes
    // dh_n straight through.
    const index ran = pass.active.empty() ? 0 : pass.active[0];
    for (index r = 0; r < B; ++r)
        for (index j = 0; j < H; ++j)
            a.dh0[r * H + j] = r < ran ? pass.carry[static_cast<size_t>(r * H + j)]
                                       : (a.dh_n ? a.dh_n[r * H + j] : T(0));
    const KernelTable<T>& kt = kernels<T>();
    const int threads = threads_for(2.0 * double(rows) * double(H) * double(H + D),
                                    std::max(rows, H), Sync::fork_join);
    const T* d1 = pass.delta_at(1, 0);
    std::vector<T> zeros;
    const T* h0 = a.h0;
    if (!h0) {
        zeros.assign(static_cast<size_t>(B * H), T(0));
        h0 = zeros.data();
    }
    transposed_product(kt, d1, H, a.x, D, rows, a.dw_ih, false, threads);
    // W_hh met h_{t-1}: h0 at step 0, y_{t-1} after
    transposed_product(kt, d1, H, h0, H, B, a.dw_hh, false, threads);
    if (T_ > 1) transposed_product(kt, d1 + B * H, H, a.y, H, rows - B, a.dw_hh, true, threads);
    add_column_sums(d1, rows, H, a.db, false, 0, H);
    for (index i = 2; i <= L; ++i) {
        transposed_product(kt, pass.delta_at(i, 0), H, pass.z(i - 1, 0), H, rows,
                           a.dw_tr + (i - 2) * H * H, false, threads);
        add_column_sums(pass.delta_at(i, 0), rows, H, a.db_tr + (i - 2) * H, false, 0, H);
    }
    if (a.dx)
        gemm(kt, rows, D, H, MatView<T>{d1, H, 1}, MatView<T>{a.w_ih, D, 1}, a.dx, D, false,
             threads);
}

template void deep_backward(const DeepBackwardArgs<float>&);
template void deep_backward(const DeepBackwardArgs<double>&);

}  // namespace rnnfast
