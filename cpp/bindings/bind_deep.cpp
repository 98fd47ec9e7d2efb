// Bindings of the deep-transition drivers (drivers/deep_transition.hpp): one layer, one
// direction, whole sequences, k >= 2 transition layers. Checks with the GIL held, the drivers
// with it released.
#include <string>

#include "check.hpp"
#include "rnnfast/drivers/deep_transition.hpp"
#include "rnnfast/runtime/threads.hpp"

namespace rnnfast::bindings {
namespace {

// The sizes read off x and the weights, checked against each other.
struct DeepShape {
    index steps, batch, D, H, layers;
};

DeepShape deep_shape(const py::array& x, const py::array& w_ih, const py::array& w_tr) {
    require_ndim(x, "x", 3, "(T, B, D)");
    require_ndim(w_ih, "weight_ih", 2, "(H, D)");
    require_ndim(w_tr, "weight_tr", 3, "(k - 1, H, H)");
    DeepShape s{x.shape(0), x.shape(1), w_ih.shape(1), w_ih.shape(0), w_tr.shape(0) + 1};
    RNNFAST_CHECK(s.layers >= 2, "weight_tr",
                  "k - 1 >= 1 transition matrices (k = 1 is the "
                  "Elman layer: rnn_forward)",
                  "shape " + shape_str(w_tr));
    checked_product({s.steps, s.batch, s.layers, s.H + s.D}, "x");
    return s;
}

template <class T>
py::tuple forward_impl(const DeepShape& s, const py::array& x, const py::object& h0,
                       const py::array& w_ih, const py::array& w_hh, const py::object& b_ih,
                       const py::object& b_hh, const py::array& w_tr, const py::object& b_tr,
                       const py::object& lengths, Activation act) {
    const index T_ = s.steps, B = s.batch, D = s.D, H = s.H, K = s.layers;
    DeepForwardArgs<T> a;
    a.steps = T_;
    a.batch = B;
    a.input_size = D;
    a.hidden_size = H;
    a.layers = K;
    a.x = checked<T>(x, "x", {T_, B, D}, "(T, B, D) with D = weight_ih.shape[1]").data();
    a.h0 = optional_data<T>(h0, "h0", {B, H}, "(B, H)");
    a.w_ih = checked<T>(w_ih, "weight_ih", {H, D}, "(H, D)").data();
    a.w_hh = checked<T>(w_hh, "weight_hh", {H, H}, "(H, H)").data();
    a.b_ih = optional_data<T>(b_ih, "bias_ih", {H}, "(H,)");
    a.b_hh = optional_data<T>(b_hh, "bias_hh", {H}, "(H,)");
    a.w_tr = checked<T>(w_tr, "weight_tr", {K - 1, H, H}, "(k - 1, H, H)").data();
    a.b_tr = optional_data<T>(b_tr, "bias_tr", {K - 1, H}, "(k - 1, H)");
    a.lengths = sorted_lengths(lengths, T_, B);
    a.act = act;
    py::array_t<T> y({T_, B, H}), h_n({B, H}), ws({K - 1, T_, B, H});
    a.y = y.mutable_data();
    a.h_n = h_n.mutable_data();
    a.workspace = ws.mutable_data();
    {
        py::gil_scoped_release release;  // the arrays above outlive the call
        const ThreadShare share;
        deep_forward(a);
    }
    return py::make_tuple(y, h_n, ws);
}

template <class T>
py::tuple backward_impl(const DeepShape& s, const py::array& x, const py::object& h0,
                        const py::array& w_ih, const py::array& w_hh, const py::array& w_tr,
                        const py::array& y, const py::array& ws, const py::object& dy,
                        const py::object& dh_n, const py::object& lengths, Activation act,
                        bool input_gradient) {
    const index T_ = s.steps, B = s.batch, D = s.D, H = s.H, K = s.layers;
    DeepBackwardArgs<T> a;
    a.steps = T_;
    a.batch = B;
    a.input_size = D;
    a.hidden_size = H;
    a.layers = K;
    a.x = checked<T>(x, "x", {T_, B, D}, "(T, B, D) with D = weight_ih.shape[1]").data();
    a.h0 = optional_data<T>(h0, "h0", {B, H}, "(B, H)");
    a.w_ih = checked<T>(w_ih, "weight_ih", {H, D}, "(H, D)").data();
    a.w_hh = checked<T>(w_hh, "weight_hh", {H, H}, "(H, H)").data();
    a.w_tr = checked<T>(w_tr, "weight_tr", {K - 1, H, H}, "(k - 1, H, H)").data();
    a.lengths = sorted_lengths(lengths, T_, B);
    a.act = act;
    a.y = checked<T>(y, "y", {T_, B, H}, "(T, B, H): the forward's").data();
    a.workspace =
        checked<T>(ws, "workspace", {K - 1, T_, B, H}, "(k - 1, T, B, H): the forward's").data();
    a.dy = optional_data<T>(dy, "dy", {T_, B, H}, "(T, B, H)");
    a.dh_n = optional_data<T>(dh_n, "dh_n", {B, H}, "(B, H)");
    py::object dx = py::none();
    if (input_gradient) {
        py::array_t<T> out({T_, B, D});
        a.dx = out.mutable_data();
        dx = out;
    }
    py::array_t<T> dh0({B, H}), dw_ih({H, D}), dw_hh({H, H}), db({H}), dw_tr({K - 1, H, H}),
        db_tr({K - 1, H});
    a.dh0 = dh0.mutable_data();
    a.dw_ih = dw_ih.mutable_data();
    a.dw_hh = dw_hh.mutable_data();
    a.db = db.mutable_data();
    a.dw_tr = dw_tr.mutable_data();
    a.db_tr = db_tr.mutable_data();
    {
        py::gil_scoped_release release;
        const ThreadShare share;
        deep_backward(a);
    }
    return py::make_tuple(dx, dh0, dw_ih, dw_hh, db, dw_tr, db_tr);
}

}  // namespace

void register_deep(py::module_& m) {
    m.def(
        "deep_forward",
        [](const py::array& x, const py::object& h0, const py::array& w_ih, const py::array& w_hh,
           const py::object& b_ih, const py::object& b_hh, const py::array& w_tr,
           const py::object& b_tr, const py::object& lengths, const std::string& nonlinearity) {
            const Activation act = parse_activation(nonlinearity);
            const DeepShape s = deep_shape(x, w_ih, w_tr);
            return by_dtype(
                w_ih,
                [&] {
                    return forward_impl<float>(s, x, h0, w_ih, w_hh, b_ih, b_hh, w_tr, b_tr,
                                               lengths, act);
                },
                [&] {
                    return forward_impl<double>(s, x, h0, w_ih, w_hh, b_ih, b_hh, w_tr, b_tr,
                                                lengths, act);
                });
        },
        py::arg("x"), py::arg("h0"), py::arg("weight_ih"), py::arg("weight_hh"), py::arg("bias_ih"),
        py::arg("bias_hh"), py::arg("weight_tr"), py::arg("bias_tr"), py::arg("lengths"),
        py::arg("nonlinearity"),
        "One deep-transition layer (k >= 2) over a sequence: (y, h_n, workspace). Arrays "
        "C-contiguous; lengths sorted, longest first.");
    m.def(
        "deep_backward",
        [](const py::array& x, const py::object& h0, const py::array& w_ih, const py::array& w_hh,
           const py::array& w_tr, const py::array& y, const py::array& ws, const py::object& dy,
           const py::object& dh_n, const py::object& lengths, const std::string& nonlinearity,
           bool input_gradient) {
            const Activation act = parse_activation(nonlinearity);
            const DeepShape s = deep_shape(x, w_ih, w_tr);
            return by_dtype(
                w_ih,
                [&] {
                    return backward_impl<float>(s, x, h0, w_ih, w_hh, w_tr, y, ws, dy, dh_n,
                                                lengths, act, input_gradient);
                },
                [&] {
                    return backward_impl<double>(s, x, h0, w_ih, w_hh, w_tr, y, ws, dy, dh_n,
                                                 lengths, act, input_gradient);
                });
        },
        py::arg("x"), py::arg("h0"), py::arg("weight_ih"), py::arg("weight_hh"),
        py::arg("weight_tr"), py::arg("y"), py::arg("workspace"), py::arg("dy"), py::arg("dh_n"),
        py::arg("lengths"), py::arg("nonlinearity"), py::arg("input_gradient"),
        "The deep-transition layer's BPTT: (dx or None, dh0, dweight_ih, dweight_hh, dbias, "
        "dweight_tr, dbias_tr); dbias is the gradient of bias_ih and of bias_hh alike.");
}

}  // namespace rnnfast::bindings
