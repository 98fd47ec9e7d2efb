#include <algorithm>
#include <cstring>
#include <vector>

#include "rnn.hpp"
#include "rnnfast/cells/elman_leaky.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/gemm/stream_pack.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/step_barrier.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "step_masks.hpp"

namespace rnnfast {
namespace {

// Steps projected at once when only h_T is kept: the workspace is kChunk x B x H whatever T is.
constexpr index kChunk = 16;

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

}  // namespace

std::vector<index> active_rows(const index* lengths, index steps, index batch) {
    std::vector<index> active(static_cast<size_t>(steps + 1), lengths ? 0 : batch);
    active[static_cast<size_t>(steps)] = 0;
    if (lengths)
        for (index b = 0; b < batch; ++b)
            for (index t = 0; t < lengths[b]; ++t)
                ++active[static_cast<size_t>(t)];
    return active;
}

template <class T>
void rnn_forward(const ForwardArgs<T>& a) {
    const index T_ = a.steps, B = a.batch, D = a.input_size, H = a.hidden_size;
    const index step_size = B * H;
    std::vector<T> zeros;
    const T* h_prev0 = a.h0;
    if (h_prev0 == nullptr) {
        zeros.assign(static_cast<size_t>(step_size), T(0));
        h_prev0 = zeros.data();
    }
    // h_n starts as h0: a sequence of length 0 ends before the first step; the others
    // overwrite their rows when they end.
    if (step_size > 0) std::memcpy(a.h_n, h_prev0, sizeof(T) * static_cast<size_t>(step_size));
    if (T_ == 0 || B == 0 || H == 0) return;  // nothing to compute (and no null memcpys)
    // Masked (general mask or recurrent dropout): every row runs every step, lengths folded
    // into the step masks; a skipped row is selected back to its state in the epilogue.
    const bool masked = a.keep != nullptr || a.recurrent_mask != nullptr;
    StepMasks masks;
    if (masked) masks = step_masks(a.keep, a.lengths, a.zero_output_for_mask, T_, B);
    const std::vector<index> active = active_rows(masked ? nullptr : a.lengths, T_, B);
    const KernelTable<T>& kt = kernels<T>();
    const index panels = panel_count(H, kt.nr);
    const int threads =
        threads_for(2.0 * double(B) * double(H) * double(H), std::max(panels, B), Sync::barrier);
    const std::vector<T> bias = combined_bias(a.b_ih, a.b_hh, H);
    const T* bias_ptr = bias.empty() ? nullptr : bias.data();
    // W_ih^T (D x H) and W_hh^T (H x H), packed once for the whole sequence. A small batch of
    // one (streams()) streams W_hh^T instead (matvec), each thread packing the columns it owns
    // in its first step (so no barrier: it alone reads them).
    const std::vector<T> packed_ih = pack_whole(kt, MatView<T>{a.w_ih, 1, D}, D, H, threads);
    const bool stream = streams<T>(B, H);
    const MatView<T> w_hh_t{a.w_hh, 1, H};
    const std::vector<T> packed_hh =
        stream ? std::vector<T>() : pack_whole(kt, w_hh_t, H, H, threads);
    std::vector<T> stream_w(stream ? static_cast<size_t>(stream_packed_size(kt, H, H)) : 0);

    // Every h_t goes straight into y; without y, a ring of kChunk steps plus a carried h.
    const bool keep_all = a.y != nullptr;
    const index chunk = keep_all ? T_ : std::min(T_, kChunk);
    std::vector<T> workspace, carry;
    if (!keep_all) {
        workspace.resize(static_cast<size_t>(chunk * step_size));
        carry.assign(h_prev0, h_prev0 + step_size);
        h_prev0 = carry.data();
    }
    T* buffer = keep_all ? a.y : workspace.data();
    // Recurrent dropout: W_hh reads h_{t-1} * mask. Each thread forms the rows its GEMM reads
    // (all columns) in a buffer of its own just before its GEMM: that repeats the products when
    // threads split the columns, but the GEMM then reads h_{t-1} as the plain unit does. A
    // shared buffer written by each thread for its block right after computing h_{t-1} cost
    // ~10% at 2 threads: the other thread's GEMM read those lines straight after the burst.
    std::vector<T> dropped(a.recurrent_mask ? static_cast<size_t>(threads * step_size) : 0);

    // Input projection of `rows` rows of inputs: one GEMM, biases added in its epilogue.
    auto project = [&](const T* inputs, index rows, T* out) {
        GemmTask<T> proj;
        proj.M = rows;
        proj.N = H;
        proj.K = D;
        proj.A = {inputs, D, 1};
        proj.packed_b = packed_ih.data();
        proj.C = out;
        proj.ldc = H;
        proj.bias = bias_ptr;
        run_task(kt, proj,
                 threads_for(2.0 * double(rows) * double(D) * double(H), std::max(panels, rows),
                             Sync::fork_join));
    };
    // Token input: the table's rows projected once; each step then gathers its rows.
    std::vector<T> projected_table;
    if (a.ids) {
        projected_table.resize(static_cast<size_t>(a.vocab * H));
        project(a.x, a.vocab, projected_table.data());
    }

    for (index t0 = 0; t0 < T_; t0 += chunk) {
        const index steps = std::min(chunk, T_ - t0);
        if (!a.ids) project(a.x + t0 * B * D, steps * B, buffer);  // else gathered per step

        // The recurrence: each thread owns the same hidden units at every step (its slice of
        // packed W_hh stays in its cache); one barrier per step publishes h_t to all threads.
        StepBarrier barrier;
#pragma omp parallel num_threads(threads)
        {
#pragma omp single
            barrier.reset(team_size());
            GemmTask<T> step;
            step.M = B;
            step.N = H;
            step.K = H;
            step.packed_b = packed_hh.data();
            step.ldc = H;
            step.accumulate = true;  // h_t = act(projection already in place + h_{t-1} W_hh^T)
            step.op = forward_epilogue(a.act);
            if (stream && t0 == 0) {
                const Share s = share_of(1, panels, kt.mr, thread_index(), team_size());
                stream_pack(kt, w_hh_t, H, std::min(H, s.p0 * kt.nr), std::min(H, s.p1 * kt.nr),
                            stream_w.data());
            }
            for (index i = 0; i < steps; ++i) {
                const index t = t0 + i, rows = active[static_cast<size_t>(t)];
                const Share s = share_of(rows, panels, kt.mr, thread_index(), team_size());
                const Block own{s.m0, s.m1, std::min(H, s.p0 * kt.nr), std::min(H, s.p1 * kt.nr)};
                const T* h_prev = i == 0 ? h_prev0 : buffer + (i - 1) * step_size;
                T* h = buffer + i * step_size;
                if (a.recurrent_mask) {
                    T* mine = dropped.data() + thread_index() * step_size;
                    apply_recurrent_mask(mine, h_prev, a.recurrent_mask, H,
                                         Block{s.m0, s.m1, 0, H});
                    step.A = {mine, H, 1};
                } else {
                    step.A = {h_prev, H, 1};
                }
                step.C = h;
                if (a.ids) gather_block(projected_table.data(), a.ids + t * B, H, own, h);
                if (!stream)
                    kt.gemm_block(step, s.m0, s.m1, s.p0, s.p1);
                else if (s.m1 > s.m0)  // the sequence is still running
                    kt.matvec(stream_w.data() + own.c0 * H, H, step.A.p, h + own.c0,
                              own.c1 - own.c0, step.op, nullptr);
                if (a.alpha != T(1))  // leaky unit: the same share, so no extra barrier
                    leaky_mix(h, h_prev, H, own, a.alpha);
                if (masked) carry_skipped_rows(h, h_prev, masks.keep.data() + t * B, H, own);
                // Sequences whose last step this is keep their state as h_n.
                const Block ending{std::max(own.m0, active[static_cast<size_t>(t + 1)]), own.m1,
                                   own.c0, own.c1};
                for (index r = ending.m0; r < ending.m1; ++r)
                    std::memcpy(a.h_n + r * H + ending.c0, h + r * H + ending.c0,
                                sizeof(T) * static_cast<size_t>(ending.c1 - ending.c0));
                barrier.wait();
            }
        }
        if (keep_all) {  // padded steps output zeros (their rows hold the projection or nothing)
            for (index t = t0; t < t0 + steps; ++t) {
                const index rows = active[static_cast<size_t>(t)];
                std::memset(a.y + t * step_size + rows * H, 0,
                            sizeof(T) * static_cast<size_t>((B - rows) * H));
            }
            // Masked: y held every state for the recurrence; now the outputs that are not the
            // state become zeros (every step has run: keep_all is one chunk of all T steps).
            if (masked)
                for (index i = 0; i < T_ * B; ++i)
                    if (!masks.out[static_cast<size_t>(i)])
                        std::memset(a.y + i * H, 0, sizeof(T) * static_cast<size_t>(H));
        } else {
            std::memcpy(carry.data(), buffer + (steps - 1) * step_size,
                        sizeof(T) * static_cast<size_t>(step_size));
        }
    }
}

template void rnn_forward(const ForwardArgs<float>&);
template void rnn_forward(const ForwardArgs<double>&);

}  // namespace rnnfast
