#include "backward_parts.hpp"

#include <algorithm>

#include "rnnfast/ops/embedding.hpp"
#include "rnnfast/runtime/threads.hpp"

namespace rnnfast {

template <class T>
GradientBuffers<T>::GradientBuffers(const KernelTable<T>& kt, const BackwardArgs<T>& a,
                                    index chunk_rows) {
    const index D = a.input_size, H = a.hidden_size;
    if (a.ids) {
        token_delta.assign(static_cast<size_t>(a.vocab * H), T(0));
    } else {  // dW_ih has K = the chunk's rows, dX K = H
        x_rows = team_pack_rows(std::max(chunk_rows, H));
        packed_x = scratch<T>(team_pack_size(kt, x_rows, D));
    }
    h_rows = team_pack_rows(chunk_rows);
    packed_h = scratch<T>(team_pack_size(kt, h_rows, H));
}

template <class T>
void chunk_gradients(const KernelTable<T>& kt, const Team& team, const BackwardArgs<T>& a,
                     const ChunkGradients<T>& c, GradientBuffers<T>& buffers) {
    const index B = a.batch, D = a.input_size, H = a.hidden_size;
    const T* dl = c.delta;
    if (a.ids) {  // skipped and padded steps' deltas are zero: their ids add nothing
        const Range cols = team_range(team, H, 16);
        embedding_backward_columns(a.ids + c.t0 * B, c.rows, dl, H, buffers.token_delta.data(),
                                   cols.begin, cols.end);
    } else {
        team_gemm(kt, team, H, D, c.rows, MatView<T>{dl, 1, H},
                  MatView<T>{a.x + c.t0 * B * D, D, 1}, a.dw_ih, D, c.accumulate,
                  buffers.packed_x.get(), buffers.x_rows);
    }
    team_gemm(kt, team, H, H, c.rows - c.split, MatView<T>{dl + c.split * H, 1, H},
              MatView<T>{c.rest, H, 1}, a.dw_hh, H, c.accumulate, buffers.packed_h.get(),
              buffers.h_rows);
    if (c.split > 0 && c.first)
        team_gemm(kt, team, H, H, c.split, MatView<T>{dl, 1, H}, MatView<T>{c.first, H, 1}, a.dw_hh,
                  H, true, buffers.packed_h.get(), buffers.h_rows);
    // dX = delta W_ih (a sixth of the step's FLOPs when D = H; null dx: not wanted); W_ih
    // packed block by block, each block used while in cache.
    if (!a.ids && a.dx)
        team_gemm(kt, team, c.rows, D, H, MatView<T>{dl, H, 1}, MatView<T>{a.w_ih, D, 1},
                  a.dx + c.t0 * B * D, D, false, buffers.packed_x.get(), buffers.x_rows);
    // db over the member's H-panels, the columns of its dW_hh share.
    const Range cols = team_range(team, H, kt.nr);
    add_column_sums(dl, c.rows, H, a.db, c.accumulate, cols.begin, cols.end);
}

template <class T>
void token_gradients(const KernelTable<T>& kt, const BackwardArgs<T>& a,
                     const GradientBuffers<T>& buffers) {
    const index V = a.vocab, D = a.input_size, H = a.hidden_size;
    const int threads = threads_for(2.0 * double(V) * double(H) * double(D),
                                    std::max(panel_count(H, kt.nr), V), Sync::fork_join);
    const T* S = buffers.token_delta.data();
    gemm(kt, H, D, V, MatView<T>{S, 1, H}, MatView<T>{a.x, D, 1}, a.dw_ih, D, false, threads);
    if (a.dx)
        gemm(kt, V, D, H, MatView<T>{S, H, 1}, MatView<T>{a.w_ih, D, 1}, a.dx, D, false, threads);
}

#define RNNFAST_INSTANTIATE(T)                                                                \
    template struct GradientBuffers<T>;                                                       \
    template void chunk_gradients(const KernelTable<T>&, const Team&, const BackwardArgs<T>&, \
                                  const ChunkGradients<T>&, GradientBuffers<T>&);             \
    template void token_gradients(const KernelTable<T>&, const BackwardArgs<T>&,              \
                                  const GradientBuffers<T>&);
RNNFAST_INSTANTIATE(float)
RNNFAST_INSTANTIATE(double)
#undef RNNFAST_INSTANTIATE

}  // namespace rnnfast
