// Bindings of the single-layer forward and backward drivers.
#include <cstdint>
#include <string>

#include "check.hpp"
#include "rnnfast/drivers/rnn.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "sequence_input.hpp"
#include "weight_cache_arg.hpp"

namespace rnnfast::bindings {
namespace {

// The options of the masked drivers (see rnnfast/rnn.hpp), checked against the batch.
struct MaskOptions {
    py::object step_mask = py::none();  // (T, B) uint8, nonzero where a step is kept
    bool zero_output_for_mask = false;
    py::object recurrent_mask = py::none();  // (B, H) of the layer's dtype
};

template <class Args, class T>
void set_masks(Args& a, const MaskOptions& m, index steps, index batch, index hidden) {
    if (!m.step_mask.is_none())
        a.keep = checked<std::uint8_t>(m.step_mask, "step_mask", {steps, batch}, "(T, B)").data();
    a.zero_output_for_mask = m.zero_output_for_mask;
    if (!m.recurrent_mask.is_none())
        a.recurrent_mask =
            checked<T>(m.recurrent_mask, "recurrent_mask", {batch, hidden}, "(B, H)").data();
}

template <class T>
py::tuple forward_impl(const py::array& x, const py::object& ids, const py::object& h0,
                       const py::array& w_ih, const py::array& w_hh, const py::object& b_ih,
                       const py::object& b_hh, const py::object& lengths, Activation act,
                       double alpha, bool return_sequences, const MaskOptions& masks,
                       WeightCache* cache) {
    require_ndim(w_ih, "weight_ih", 2, "(H, D)");
    const index H = w_ih.shape(0), D = w_ih.shape(1);
    const SequenceInput<T> in = sequence_input<T>(x, ids, D);
    const index steps = in.steps, B = in.batch;
    ForwardArgs<T> a;
    a.cache = cache;
    a.steps = steps;
    a.batch = B;
    a.input_size = D;
    a.hidden_size = H;
    a.w_ih = checked<T>(w_ih, "weight_ih", {H, D}, "(H, D)").data();
    a.x = in.x;
    a.ids = in.ids;
    a.vocab = in.vocab;
    a.w_hh = checked<T>(w_hh, "weight_hh", {H, H}, "(H, H)").data();
    a.b_ih = optional_data<T>(b_ih, "bias_ih", {H}, "(H,)");
    a.b_hh = optional_data<T>(b_hh, "bias_hh", {H}, "(H,)");
    a.h0 = optional_data<T>(h0, "h0", {B, H}, "(B, H)");
    a.lengths = sorted_lengths(lengths, steps, B);
    set_masks<ForwardArgs<T>, T>(a, masks, steps, B, H);
    a.act = act;
    a.alpha = static_cast<T>(alpha);
    checked_product({steps, B, H}, "y");
    py::array_t<T> h_n({B, H});
    a.h_n = h_n.mutable_data();
    py::object y = py::none();
    if (return_sequences) {
        py::array_t<T> y_arr({steps, B, H});
        a.y = y_arr.mutable_data();
        y = y_arr;
    }
    {
        // Safe without the GIL: the driver touches only these buffers, which the arguments and
        // the new arrays keep alive until we return.
        py::gil_scoped_release release;
        const ThreadShare share;  // concurrent calls split the thread budget
        rnn_forward(a);
    }
    return py::make_tuple(y, h_n);
}

template <class T>
py::tuple backward_impl(const py::array& x, const py::object& ids, const py::object& h0,
                        const py::array& w_ih, const py::array& w_hh, const py::array& y,
                        const py::object& dy, const py::object& dh_n, const py::object& lengths,
                        Activation act, double alpha, const MaskOptions& masks, bool input_gradient,
                        WeightCache* cache) {
    require_ndim(w_ih, "weight_ih", 2, "(H, D)");
    const index H = w_ih.shape(0), D = w_ih.shape(1);
    const SequenceInput<T> in = sequence_input<T>(x, ids, D);
    const index steps = in.steps, B = in.batch;
    BackwardArgs<T> a;
    a.cache = cache;
    a.steps = steps;
    a.batch = B;
    a.input_size = D;
    a.hidden_size = H;
    a.w_ih = checked<T>(w_ih, "weight_ih", {H, D}, "(H, D)").data();
    a.x = in.x;
    a.ids = in.ids;
    a.vocab = in.vocab;
    a.w_hh = checked<T>(w_hh, "weight_hh", {H, H}, "(H, H)").data();
    a.y = checked<T>(y, "y", {steps, B, H}, "(T, B, H)").data();
    a.h0 = optional_data<T>(h0, "h0", {B, H}, "(B, H)");
    a.dy = optional_data<T>(dy, "dy", {steps, B, H}, "(T, B, H)");
    a.dh_n = optional_data<T>(dh_n, "dh_n", {B, H}, "(B, H)");
    a.lengths = sorted_lengths(lengths, steps, B);
    set_masks<BackwardArgs<T>, T>(a, masks, steps, B, H);
    a.act = act;
    a.alpha = static_cast<T>(alpha);
    // Without input_gradient, dx is neither allocated nor computed (returned as None).
    py::object dx = py::none();
    if (input_gradient) {
        py::array_t<T> out = in.ids ? py::array_t<T>({in.vocab, D}) : py::array_t<T>({steps, B, D});
        a.dx = out.mutable_data();
        dx = std::move(out);
    }
    py::array_t<T> dh0({B, H}), dw_ih({H, D}), dw_hh({H, H}), db({H});
    a.dh0 = dh0.mutable_data();
    a.dw_ih = dw_ih.mutable_data();
    a.dw_hh = dw_hh.mutable_data();
    a.db = db.mutable_data();
    {
        // Safe without the GIL: see forward_impl.
        py::gil_scoped_release release;
        const ThreadShare share;
        rnn_backward(a);
    }
    return py::make_tuple(dx, dh0, dw_ih, dw_hh, db);
}

template <class T>
py::array step_impl(const py::array& x, const py::array& h, const py::array& w_ih,
                    const py::array& w_hh, const py::object& b_ih, const py::object& b_hh,
                    Activation act, double alpha) {
    require_ndim(w_ih, "weight_ih", 2, "(H, D)");
    require_ndim(x, "x_t", 2, "(B, D)");
    const index H = w_ih.shape(0), D = w_ih.shape(1), B = x.shape(0);
    StepArgs<T> a;
    a.batch = B;
    a.input_size = D;
    a.hidden_size = H;
    a.w_ih = checked<T>(w_ih, "weight_ih", {H, D}, "(H, D)").data();
    a.x = checked<T>(x, "x_t", {B, D}, "(B, D)").data();
    a.h = checked<T>(h, "h", {B, H}, "(B, H)").data();
    a.w_hh = checked<T>(w_hh, "weight_hh", {H, H}, "(H, H)").data();
    a.b_ih = optional_data<T>(b_ih, "bias_ih", {H}, "(H,)");
    a.b_hh = optional_data<T>(b_hh, "bias_hh", {H}, "(H,)");
    a.act = act;
    a.alpha = static_cast<T>(alpha);
    py::array_t<T> h_next({B, H});
    a.h_next = h_next.mutable_data();
    rnn_step(a);  // a few hundred nanoseconds: releasing the GIL would cost more than it frees
    return std::move(h_next);
}

}  // namespace

void register_rnn(py::module_& m) {
    m.def(
        "rnn_forward",
        [](const py::array& x, const py::object& h0, const py::array& w_ih, const py::array& w_hh,
           const py::object& b_ih, const py::object& b_hh, const py::object& lengths,
           const std::string& nonlinearity, double alpha, bool return_sequences,
           const py::object& ids, const py::object& step_mask, bool zero_output_for_mask,
           const py::object& recurrent_mask, const py::object& weight_cache) {
            const Activation act = parse_activation(nonlinearity);
            WeightCache* const cache = weight_cache_arg(weight_cache);
            check_alpha(alpha);
            const MaskOptions masks{step_mask, zero_output_for_mask, recurrent_mask};
            return by_dtype(
                w_ih,
                [&] {
                    return forward_impl<float>(x, ids, h0, w_ih, w_hh, b_ih, b_hh, lengths, act,
                                               alpha, return_sequences, masks, cache);
                },
                [&] {
                    return forward_impl<double>(x, ids, h0, w_ih, w_hh, b_ih, b_hh, lengths, act,
                                                alpha, return_sequences, masks, cache);
                });
        },
        py::arg("x"), py::arg("h0"), py::arg("weight_ih"), py::arg("weight_hh"), py::arg("bias_ih"),
        py::arg("bias_hh"), py::arg("lengths"), py::arg("nonlinearity"), py::arg("alpha"),
        py::arg("return_sequences"), py::arg("ids") = py::none(), py::kw_only(),
        py::arg("step_mask") = py::none(), py::arg("zero_output_for_mask") = false,
        py::arg("recurrent_mask") = py::none(), py::arg("weight_cache") = py::none(),
        "Single-layer forward over a sequence: (y or None, h_n). Arrays must be C-contiguous. "
        "With ids (T, B) int64, x is an embedding table (vocab, D) whose rows they pick. "
        "step_mask (T, B) uint8 skips steps (Keras's masks), recurrent_mask (B, H) multiplies "
        "h_{t-1} before W_hh (recurrent dropout).");
    m.def(
        "rnn_backward",
        [](const py::array& x, const py::object& h0, const py::array& w_ih, const py::array& w_hh,
           const py::array& y, const py::object& dy, const py::object& dh_n,
           const py::object& lengths, const std::string& nonlinearity, double alpha,
           const py::object& ids, const py::object& step_mask, bool zero_output_for_mask,
           const py::object& recurrent_mask, bool input_gradient, const py::object& weight_cache) {
            const Activation act = parse_activation(nonlinearity);
            WeightCache* const cache = weight_cache_arg(weight_cache);
            check_alpha(alpha);
            const MaskOptions masks{step_mask, zero_output_for_mask, recurrent_mask};
            return by_dtype(
                w_ih,
                [&] {
                    return backward_impl<float>(x, ids, h0, w_ih, w_hh, y, dy, dh_n, lengths, act,
                                                alpha, masks, input_gradient, cache);
                },
                [&] {
                    return backward_impl<double>(x, ids, h0, w_ih, w_hh, y, dy, dh_n, lengths, act,
                                                 alpha, masks, input_gradient, cache);
                });
        },
        py::arg("x"), py::arg("h0"), py::arg("weight_ih"), py::arg("weight_hh"), py::arg("y"),
        py::arg("dy"), py::arg("dh_n"), py::arg("lengths"), py::arg("nonlinearity"),
        py::arg("alpha"), py::arg("ids") = py::none(), py::kw_only(),
        py::arg("step_mask") = py::none(), py::arg("zero_output_for_mask") = false,
        py::arg("recurrent_mask") = py::none(), py::arg("input_gradient") = true,
        py::arg("weight_cache") = py::none(),
        "Single-layer BPTT: (dx, dh0, dweight_ih, dweight_hh, dbias); with ids, dx is the "
        "embedding table's gradient (vocab, D); with input_gradient=False, dx is None (not "
        "computed).");
    m.def(
        "rnn_step",
        [](const py::array& x, const py::array& h, const py::array& w_ih, const py::array& w_hh,
           const py::object& b_ih, const py::object& b_hh, const std::string& nonlinearity,
           double alpha) {
            const Activation act = parse_activation(nonlinearity);
            check_alpha(alpha);
            return by_dtype(
                w_ih, [&] { return step_impl<float>(x, h, w_ih, w_hh, b_ih, b_hh, act, alpha); },
                [&] { return step_impl<double>(x, h, w_ih, w_hh, b_ih, b_hh, act, alpha); });
        },
        py::arg("x_t"), py::arg("h"), py::arg("weight_ih"), py::arg("weight_hh"),
        py::arg("bias_ih"), py::arg("bias_hh"), py::arg("nonlinearity"), py::arg("alpha"),
        "One time step: h_next (B, H). Arrays must be C-contiguous.");
}

}  // namespace rnnfast::bindings
