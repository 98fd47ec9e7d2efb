// The deep-transition forward (deep_transition.hpp) as a pass of the one time loop: the input
// projection of all steps (one GEMM, before the region) into z_1's slots, then per step the
// recurrent product onto it with act in its epilogue, and the k - 1 transition products, each
// after a barrier. Every thread owns the same column panels of every product at every step
// (weight-stationary), as the Elman forward's.
#include <algorithm>
#include <cstring>
#include <vector>

#include "deep_transition.hpp"
#include "rnn.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "step_masks.hpp"
#include "time_loop.hpp"

namespace rnnfast {
namespace {

template <class T>
struct DeepForwardPass : TimeLoopPass {
    const DeepForwardArgs<T>& a;
    const index B, D, H, L, step_size;
    const KernelTable<T>& kt;
    const index panels;
    const std::vector<index> active;
    const int threads;
    const T* h_start;
    std::vector<T> bias;
    Packed<T> packed_ih, packed_hh;
    std::vector<Packed<T>> packed_tr;  // W_i^T, i = 2..k

    DeepForwardPass(const DeepForwardArgs<T>& args, const T* h0)
        : a(args),
          B(args.batch),
          D(args.input_size),
          H(args.hidden_size),
          L(args.layers),
          step_size(args.batch * args.hidden_size),
          kt(kernels<T>()),
          panels(panel_count(H, kt.nr)),
          active(active_rows(args.lengths, args.steps, args.batch)),
          threads(threads_for(2.0 * double(L) * double(B) * double(H) * double(H),
                              std::max(panels, B), Sync::barrier)),
          h_start(h0) {
        if (a.b_ih || a.b_hh) {
            bias.assign(static_cast<size_t>(H), T(0));
            for (index j = 0; j < H; ++j)
                bias[j] = (a.b_ih ? a.b_ih[j] : T(0)) + (a.b_hh ? a.b_hh[j] : T(0));
        }
        packed_ih = pack_whole(kt, MatView<T>{a.w_ih, 1, D}, D, H, threads);
        packed_hh = pack_whole(kt, MatView<T>{a.w_hh, 1, H}, H, H, threads);
        for (index i = 0; i + 1 < L; ++i)
            packed_tr.push_back(
                pack_whole(kt, MatView<T>{a.w_tr + i * H * H, 1, H}, H, H, threads));
    }

    LoopShape shape() const {
        return {{a.steps, a.steps, false, true},  // one chunk: its projection before the region
                {threads, threads},
                {B, active.data(), nullptr},
                kernel_columns(kt, H)};
    }

    // z_i of step t (i = 1..k): the workspace's slots, z_k = h_t in y.
    T* z(index i, index t) const {
        return i == L ? a.y + t * step_size : a.workspace + ((i - 1) * a.steps + t) * step_size;
    }

    void before_region(const Chunk&) {
        const index rows = a.steps * B;
        GemmTask<T> proj = packed_task<T>(rows, H, D, packed_ih.data(), z(1, 0), H);
        proj.A = {a.x, D, 1};
        proj.bias = bias.empty() ? nullptr : bias.data();
        run_task(kt, proj,
                 threads_for(2.0 * double(rows) * double(D) * double(H), std::max(panels, rows),
                             Sync::fork_join));
    }

    void after_region(const Chunk&) {  // padded steps output zeros, in every layer
        for (index t = 0; t < a.steps; ++t) {
            const index rows = active[static_cast<size_t>(t)];
            for (index i = 1; i <= L; ++i)
                std::memset(z(i, t) + rows * H, 0, sizeof(T) * static_cast<size_t>((B - rows) * H));
        }
    }

    struct Member {
        DeepForwardPass& p;
        GemmTask<T> rec, layer;

        Member(DeepForwardPass& pass, const Team&, int)
            : p(pass),
              rec(packed_task<T>(p.B, p.H, p.H, p.packed_hh.data(), nullptr, p.H)),
              layer(packed_task<T>(p.B, p.H, p.H, nullptr, nullptr, p.H)) {
            rec.accumulate = true;  // z_1 = act(projection in place + h_{t-1} W_hh^T)
            rec.op = layer.op = forward_epilogue(p.a.act);
        }
        void chunk_begin(const Chunk&) {}
        void chunk_end(const Chunk&) {}

        void step(const Chunk&, const Step& st) {
            const index t = st.t, H = p.H;
            const Share& s = st.share;
            rec.A = {t == 0 ? p.h_start : p.z(p.L, t - 1), H, 1};
            rec.C = p.z(1, t);
            run_block(p.kt, rec, s.m0, s.m1, s.p0, s.p1);
            for (index i = 2; i <= p.L; ++i) {
                st.barrier->wait();  // every unit of z_{i-1}
                layer.A = {p.z(i - 1, t), H, 1};
                layer.packed_b = p.packed_tr[static_cast<size_t>(i - 2)].data();
                layer.bias = p.a.b_tr ? p.a.b_tr + (i - 2) * H : nullptr;
                layer.C = p.z(i, t);
                run_block(p.kt, layer, s.m0, s.m1, s.p0, s.p1);
            }
            // Sequences whose last step this is keep their state as h_n.
            keep_final_state(p.a.h_n, p.z(p.L, t), H, st.own, st.ending);
        }
    };
};

}  // namespace

template <class T>
void deep_forward(const DeepForwardArgs<T>& a) {
    const index step_size = a.batch * a.hidden_size;
    std::vector<T> zeros;
    const T* h0 = start_state(a.h0, a.h_n, step_size, zeros);
    if (a.steps == 0 || step_size == 0) return;
    DeepForwardPass<T> pass(a, h0);
    run_time_loop(pass.shape(), pass);
}

template void deep_forward(const DeepForwardArgs<float>&);
template void deep_forward(const DeepForwardArgs<double>&);

}  // namespace rnnfast
