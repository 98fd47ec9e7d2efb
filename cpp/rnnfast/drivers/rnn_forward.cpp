#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "elman_pass.hpp"
#include "rnn.hpp"
#include "rnnfast/cells/elman.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/gemm/stream_pack.hpp"
#include "rnnfast/gemm/team_gemm.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "rnnfast/runtime/weight_cache.hpp"

namespace rnnfast {
namespace {

template <class T>
std::vector<T> combined_bias(const T* b_ih, const T* b_hh, index H) {
    std::vector<T> bias;
    if (b_ih == nullptr && b_hh == nullptr) return bias;
    bias.assign(static_cast<size_t>(H), T(0));
    for (index j = 0; j < H; ++j)
        bias[j] = (b_ih ? b_ih[j] : T(0)) + (b_hh ? b_hh[j] : T(0));
    return bias;
}

// out[r, c0:c1] = table[ids[r], c0:c1] for the block's rows: a step's projected input, read
// from the projected embedding table by the thread that owns the block, just before its GEMM
// adds the recurrent term (the block is then still in its cache).
template <class T>
void gather_block(const T* table, const std::int64_t* ids, index width, const Block& block,
                  T* out) {
    for (index r = block.m0; r < block.m1; ++r)
        std::memcpy(out + r * width + block.c0, table + ids[r] * width + block.c0,
                    sizeof(T) * static_cast<size_t>(block.c1 - block.c0));
}

// The Elman forward's float products, the Product of the one Elman pass (elman_pass.hpp): the
// input projection of a chunk (one GEMM, biases in its epilogue) and each step's h_{t-1} W_hh^T
// onto it in place, the activation fused in the GEMM's epilogue; variants for token input (the
// table projected once, each step gathers its rows), recurrent dropout and a small batch of one
// (W_hh^T streamed, matvec).
template <class T, class Cell>
struct GemmElmanProducts {
    const ForwardArgs<T>& a;
    const index B, D, H, step_size;
    const KernelTable<T>& kt;
    const index panels;
    int threads, team;
    static constexpr bool region_per_chunk = false;  // one region: the projections inside it
    LoopShape::Columns columns;
    std::vector<T> bias;
    // W_ih^T, W_hh^T (or W_hh^T in matvec's groups: stream_w), from the layer's cache or packed
    // inside the region, every value written before it is read
    CachedPack<T> packed_ih, packed_hh, stream_w;
    bool stream;
    MatView<T> w_hh_t;
    index chunk;
    std::vector<T> dropped, projected_table;

    explicit GemmElmanProducts(const ForwardArgs<T>& args)
        : a(args),
          B(args.batch),
          D(args.input_size),
          H(args.hidden_size),
          step_size(B * H),
          kt(kernels<T>()),
          panels(panel_count(H, kt.nr)),
          columns(kernel_columns(kt, Cell::columns(H))),
          w_hh_t{args.w_hh, 1, H} {
        const index T_ = a.steps;
        const bool masked = a.keep != nullptr || a.recurrent_mask != nullptr;
        threads = threads_for(2.0 * double(B) * double(H) * double(H), std::max(panels, B),
                              Sync::barrier);
        bias = combined_bias(a.b_ih, a.b_hh, H);
        // Chunks of projection_chunk_steps; a general mask with y: one chunk of all T steps
        // (the pass's after_region zeros outputs once every step has run).
        chunk = a.y && masked ? T_ : projection_chunk_steps(T_, step_size * index(sizeof(T)));
        // The projection of a chunk runs inside the step region (one fork/join per call), on
        // a team as large as it is worth: the members beyond the step's threads project and
        // pack, then wait while the others step.
        const double projection_flops = 2.0 * double(chunk * B) * double(D) * double(H);
        team = a.ids ? threads
                     : pass_team(threads,
                                 threads_for(projection_flops, std::max(panels, chunk * B),
                                             Sync::fork_join),
                                 projection_flops, 2.0 * double(chunk * B) * double(H) * double(H));
        // W_ih^T (D x H) and W_hh^T (H x H), packed once per call by the team (the members'
        // first chunk_begin). A small batch of one (streams()) streams W_hh^T instead
        // (matvec), each stepping thread packing the columns it owns in its first step.
        stream = streams(kt, B, H);
        if (!a.ids)
            packed_ih =
                CachedPack<T>(a.cache, key(a.w_ih, D, H, PackRole::input), kt.packed_b_size(D, H));
        if (!stream)
            packed_hh = CachedPack<T>(a.cache, key(a.w_hh, H, H, PackRole::recurrent),
                                      kt.packed_b_size(H, H));
        else
            stream_w = CachedPack<T>(a.cache, key(a.w_hh, H, H, PackRole::stream),
                                     stream_packed_size(kt, H, H));
        // Recurrent dropout: W_hh reads h_{t-1} * mask. Each thread forms the rows its GEMM
        // reads (all columns) in a buffer of its own just before its GEMM: that repeats the
        // products when threads split the columns, but the GEMM then reads h_{t-1} as the plain
        // unit does. A shared buffer written by each thread for its block right after computing
        // h_{t-1} cost ~10% at 2 threads: the other thread's GEMM read those lines straight
        // after the burst.
        dropped.resize(a.recurrent_mask ? static_cast<size_t>(threads * step_size) : 0);
        // Token input: the table's rows projected once; each step then gathers its rows.
        if (a.ids) {
            projected_table.resize(static_cast<size_t>(a.vocab * H));
            const int table_threads = threads_for(2.0 * double(a.vocab) * double(D) * double(H),
                                                  std::max(panels, a.vocab), Sync::fork_join);
            const Packed<T> packed = pack_whole(kt, MatView<T>{a.w_ih, 1, D}, D, H, table_threads);
            GemmTask<T> proj = projection(packed.data(), a.x, a.vocab, projected_table.data());
            run_task(kt, proj, table_threads);
        }
    }

    // Input projection of `rows` rows of inputs: one GEMM, biases added in its epilogue.
    GemmTask<T> projection(const T* packed, const T* inputs, index rows, T* out) const {
        GemmTask<T> proj = packed_task<T>(rows, H, D, packed, out, H);
        proj.A = {inputs, D, 1};
        proj.bias = bias.empty() ? nullptr : bias.data();
        return proj;
    }

    PackKey key(const T* source, index K, index N, PackRole role) const {
        return PackKey{source, &kt, K, N, 0, role};
    }

    void before_region(const Chunk&, T*) {}

    // After the pass: what the team packed is whole, and later calls find it.
    void finish() {
        packed_ih.publish();
        packed_hh.publish();
        stream_w.publish();
    }

    struct Member {
        GemmElmanProducts& p;
        const Team team;
        const int stepping;
        GemmTask<T> task;

        Member(GemmElmanProducts& products, const Team& t, int stepping_members)
            : p(products),
              team(t),
              stepping(stepping_members),
              task(packed_task<T>(p.B, p.H, p.H, p.packed_hh.data(), nullptr, p.H)) {
            task.accumulate = true;  // h_t = act(projection already in place + h_{t-1} W_hh^T)
            task.op = Cell::step_epilogue(p.a.act);
        }

        // The team packs the weights (first chunk) and projects the chunk's inputs, each member
        // its panels, then meets: a step reads every column of the packed W_hh^T.
        void chunk_begin(const Chunk& c, T* buffer) {
            const index H = p.H, D = p.D;
            if (c.t0 == 0) {  // the packs the layer's cache did not have
                const bool pack_ih = !p.a.ids && !p.packed_ih.ready();
                if (pack_ih)
                    team_pack(p.kt, team, MatView<T>{p.a.w_ih, 1, D}, D, H, p.packed_ih.room());
                if (!p.stream && !p.packed_hh.ready())
                    team_pack(p.kt, team, p.w_hh_t, H, H, p.packed_hh.room());
                if (p.stream && !p.stream_w.ready() && team.me < stepping) {
                    const Share s = share_of(1, p.panels, p.kt.mr, team.me, stepping);
                    stream_pack(p.kt, p.w_hh_t, H, std::min(H, s.p0 * p.kt.nr),
                                std::min(H, s.p1 * p.kt.nr), p.stream_w.room());
                }
                // a projection split by rows reads every panel of W_ih^T
                if (p.panels < team.size && pack_ih) team.barrier->wait();
            }
            if (!p.a.ids)  // token input: gathered per step from the projected table
                team_task(p.kt, team,
                          p.projection(p.packed_ih.data(), p.a.x + c.t0 * p.B * D, c.steps * p.B,
                                       buffer));
            team.barrier->wait();
        }

        void step(const Step& st, const T* h_prev, T* h) {
            const index H = p.H, t = st.t;
            const Share& s = st.share;
            const Block& own = st.own;
            if (p.a.recurrent_mask) {
                T* mine = p.dropped.data() + team.me * p.step_size;
                apply_recurrent_mask(mine, h_prev, p.a.recurrent_mask, H, Block{s.m0, s.m1, 0, H});
                task.A = {mine, H, 1};
            } else {
                task.A = {h_prev, H, 1};
            }
            task.C = h;
            if (p.a.ids) gather_block(p.projected_table.data(), p.a.ids + t * p.B, H, own, h);
            if (!p.stream)
                p.kt.gemm_block(task, s.m0, s.m1, s.p0, s.p1);
            else if (s.m1 > s.m0)  // the sequence is still running
                p.kt.matvec(p.stream_w.data() + own.c0 * H, H, task.A.p, h + own.c0,
                            own.c1 - own.c0, task.op, nullptr);
        }
    };
};

}  // namespace

template <class T>
void rnn_forward(const ForwardArgs<T>& a) {
    run_elman_forward<T, ElmanCell<T>, GemmElmanProducts<T, ElmanCell<T>>>(a);
}

template void rnn_forward(const ForwardArgs<float>&);
template void rnn_forward(const ForwardArgs<double>&);

}  // namespace rnnfast
