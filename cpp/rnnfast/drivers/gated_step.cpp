// One step of a gated cell for streaming (GRU, LSTM): the products by dot_rows on the weights
// as stored, then the cell's epilogue over all H units as one block. One block of H units is
// PyTorch's own gate order ([r | z | n], [i | f | g | o]), so the cells' block functions run on
// the products unchanged, the same code as in the sequence kernels.
#include <algorithm>
#include <vector>

#include "gated.hpp"
#include "rnnfast/cells/gru.hpp"
#include "rnnfast/cells/lstm.hpp"
#include "rnnfast/runtime/dispatch.hpp"

namespace rnnfast {
namespace {

// out = bias + W v (rows x cols), bias null: zeros.
template <class T>
void affine(const KernelTable<T>& kt, const T* w, const T* bias, index rows, index cols, const T* v,
            T* out) {
    if (bias)
        std::copy(bias, bias + rows, out);
    else
        std::fill(out, out + rows, T(0));
    kt.dot_rows(w, rows, cols, v, out);
}

}  // namespace

template <class T>
void gated_step(const GatedStepArgs<T>& a) {
    const index B = a.batch, D = a.input_size, H = a.hidden_size, P = a.proj_size;
    const index R = P > 0 ? P : H;
    const index GH = gate_count(a.cell) * H;
    if (B == 0 || H == 0) return;
    const KernelTable<T>& kt = kernels<T>();
    // per call: the two products and r * h or m (reused across calls)
    thread_local std::vector<T> buffer;
    buffer.resize(static_cast<size_t>(2 * GH + H));
    T *gx = buffer.data(), *gh = gx + GH, *mid = gh + GH;
    for (index b = 0; b < B; ++b) {
        const T *x = a.x + b * D, *h = a.h + b * R;
        affine(kt, a.w_ih, a.b_ih, GH, D, x, gx);
        switch (a.cell) {
            case GatedCell::gru:
                affine(kt, a.w_hh, a.b_hh, GH, H, h, gh);
                GruCell<T>::after_block(kt, gx, gh, h, a.h_next + b * H, nullptr, H, 0, H, a.act,
                                        a.rec);
                break;
            case GatedCell::gru_reset_before:
                affine(kt, a.w_hh, a.b_hh, 2 * H, H, h, gh);
                GruCell<T>::rz_block(kt, gx, gh, h, mid, 0, H, a.rec);
                affine(kt, a.w_hh + 2 * H * H, a.b_hh ? a.b_hh + 2 * H : nullptr, H, H, mid, gh);
                GruCell<T>::n_block(kt, gx, gh, h, a.h_next + b * H, nullptr, H, 0, H, a.act);
                break;
            case GatedCell::lstm:
                affine(kt, a.w_hh, a.b_hh, GH, R, h, gh);
                LstmCell<T>::forward_block(kt, gx, gh, a.c + b * H, a.c_next + b * H,
                                           P > 0 ? mid : a.h_next + b * H, nullptr, H, 0, H, a.act,
                                           a.rec);
                if (P > 0) affine<T>(kt, a.w_hr, nullptr, P, H, mid, a.h_next + b * P);
                break;
        }
    }
}

template void gated_step(const GatedStepArgs<float>&);
template void gated_step(const GatedStepArgs<double>&);

}  // namespace rnnfast
