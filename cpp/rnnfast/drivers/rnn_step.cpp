#include "rnn.hpp"
#include "rnnfast/cells/elman.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/runtime/dispatch.hpp"

namespace rnnfast {

template <class T>
void rnn_step(const StepArgs<T>& a) {
    const index B = a.batch, D = a.input_size, H = a.hidden_size;
    if (B == 0 || H == 0) return;
    const KernelTable<T>& kt = kernels<T>();
    if (step_runs_as_forward(kt, B)) {  // the forward's one step (gated_step.cpp says why)
        ForwardArgs<T> f;
        f.steps = 1;
        f.batch = B, f.input_size = D, f.hidden_size = H;
        f.x = a.x, f.h0 = a.h, f.w_ih = a.w_ih, f.w_hh = a.w_hh, f.b_ih = a.b_ih, f.b_hh = a.b_hh;
        f.act = a.act, f.alpha = a.alpha;
        f.h_n = a.h_next;
        return rnn_forward(f);
    }
    for (index b = 0; b < B; ++b) {
        T* out = a.h_next + b * H;
        for (index j = 0; j < H; ++j)
            out[j] = (a.b_ih ? a.b_ih[j] : T(0)) + (a.b_hh ? a.b_hh[j] : T(0));
        kt.dot_rows_pair(a.w_ih, D, a.x + b * D, a.w_hh, H, a.h + b * H, H, out);
    }
    // The activation through the GEMM's epilogue alone (K = 0), so it is the very same vector
    // code as in the sequence kernels.
    GemmTask<T> act = packed_task<T>(B, H, 0, nullptr, a.h_next, H);
    act.accumulate = true;
    act.op = ElmanCell<T>::step_epilogue(a.act);
    const index panels = (H + kt.nr - 1) / kt.nr;
    kt.gemm_block(act, 0, B, 0, panels);
    ElmanCell<T>::finish_step(a.h_next, a.h, H, Block{0, B, 0, H}, a.alpha);
}

template void rnn_step(const StepArgs<float>&);
template void rnn_step(const StepArgs<double>&);

}  // namespace rnnfast
