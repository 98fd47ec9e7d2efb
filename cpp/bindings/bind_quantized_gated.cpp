// Binding of the quantized gated forward (GRU, LSTM; quantized/qgated.cpp): one layer, one
// direction, a whole sequence (a step is a sequence of one). Checks with the GIL held, the
// driver with it released.
#include <string>

#include "check.hpp"
#include "gated_names.hpp"
#include "quantized_args.hpp"
#include "rnnfast/runtime/threads.hpp"

namespace rnnfast::bindings {
namespace {

std::string dims(const q::PackedMatrix& w) {
    return "(" + std::to_string(w.rows) + ", " + std::to_string(w.cols) + ")";
}

// The weights of one layer, checked against each other: W_ih (G*H, D) and W_hh (G*H, R) in the
// gate layout (reset_before: W_hh's r and z rows, (2H, H), and W_hn (H, H) apart), the LSTM's
// W_hr (P, H), all of one kind. Sets the sizes in `a`.
q::GatedWeights gated_weights(GatedForwardArgs<float>& a, const py::object& w_ih_obj,
                              const py::object& w_hh_obj, const py::object& w_hn_obj,
                              const py::object& w_hr_obj) {
    const int G = gate_count(a.cell);
    const bool reset_before = gated_cell_counts(a.cell).second_product;
    q::GatedWeights w;
    w.w_ih = &matrix_arg(w_ih_obj, "weight_ih");
    w.w_hh = &matrix_arg(w_hh_obj, "weight_hh");
    require_gates(*w.w_ih, "weight_ih", G);
    require_gates(*w.w_hh, "weight_hh", reset_before ? 2 : G);
    const index H = w.w_ih->rows / G;
    a.input_size = w.w_ih->cols;
    a.hidden_size = H;
    RNNFAST_CHECK(reset_before != w_hn_obj.is_none(), "weight_hn",
                  reset_before ? "W_hh's n rows (H, H) for 'gru_reset_before'" : "None",
                  w_hn_obj.is_none() ? "None" : "a matrix");
    if (reset_before) {
        w.w_hn = &matrix_arg(w_hn_obj, "weight_hn");
        require_gates(*w.w_hn, "weight_hn", 1);
        RNNFAST_CHECK(w.w_hn->rows == H && w.w_hn->cols == H, "weight_hn",
                      "(H, H) with H = " + std::to_string(H), dims(*w.w_hn));
    }
    if (!w_hr_obj.is_none()) {
        RNNFAST_CHECK(gated_cell_counts(a.cell).projects, "weight_hr", "None for a GRU",
                      "a matrix (a projection is the LSTM's)");
        w.w_hr = &matrix_arg(w_hr_obj, "weight_hr");
        require_gates(*w.w_hr, "weight_hr", 1);
        RNNFAST_CHECK(w.w_hr->cols == H && w.w_hr->rows > 0, "weight_hr",
                      "(P, H) with P > 0 and H = " + std::to_string(H), dims(*w.w_hr));
        a.proj_size = w.w_hr->rows;
    }
    const index R = a.proj_size > 0 ? a.proj_size : H;
    const index rec_rows = (reset_before ? 2 : G) * H;
    RNNFAST_CHECK(w.w_hh->rows == rec_rows && w.w_hh->cols == R, "weight_hh",
                  "(" + std::to_string(rec_rows) + ", " + std::to_string(R) +
                      ") for H = " + std::to_string(H) + (a.proj_size > 0 ? " and proj_size" : ""),
                  dims(*w.w_hh));
    for (const q::PackedMatrix* m : {w.w_hh, w.w_hn, w.w_hr})
        RNNFAST_CHECK(m == nullptr || m->kind == w.w_ih->kind, "weights",
                      std::string("one kind, '") + kind_name(w.w_ih->kind) + "' (as weight_ih)",
                      std::string("'") + kind_name(m->kind) + "'");
    return w;
}

py::tuple forward(const std::string& cell, const py::object& x, const py::object& h0,
                  const py::object& c0, const py::object& w_ih, const py::object& w_hh,
                  const py::object& w_hn, const py::object& w_hr, const py::object& b_ih,
                  const py::object& b_hh, const py::object& lengths, const std::string& activation,
                  const std::string& recurrent_activation, bool return_sequences) {
    GatedForwardArgs<float> a;
    a.cell = parse_cell(cell);
    RNNFAST_CHECK(gated_cell_counts(a.cell).params == 0, "cell",
                  "'gru', 'gru_reset_before' or 'lstm' (no quantized LayerNorm LSTM)", cell);
    a.act = parse_activation_fn(activation);
    a.rec = parse_recurrent_activation(recurrent_activation);
    const q::GatedWeights w = gated_weights(a, w_ih, w_hh, w_hn, w_hr);
    const bool lstm = gated_cell_counts(a.cell).states == 2;
    const index D = a.input_size, H = a.hidden_size, GH = gate_count(a.cell) * H;
    const index R = a.proj_size > 0 ? a.proj_size : H;
    require_ndim(x, "x", 3, "(T, B, D)");
    const auto xa = py::reinterpret_borrow<py::array>(x);
    const index T_ = xa.shape(0), B = xa.shape(1);
    a.steps = T_;
    a.batch = B;
    a.x = checked<float>(x, "x", {T_, B, D}, "(T, B, D) with D = weight_ih.cols").data();
    a.h0 = optional_data<float>(h0, "h0", {B, R}, "(B, R)");
    RNNFAST_CHECK(lstm || c0.is_none(), "c0", "None for a GRU", "an array");
    a.c0 = optional_data<float>(c0, "c0", {B, H}, "(B, H)");
    a.b_ih = optional_data<float>(b_ih, "bias_ih", {GH}, "(G*H,)");
    a.b_hh = optional_data<float>(b_hh, "bias_hh", {GH}, "(G*H,)");
    a.lengths = sorted_lengths(lengths, T_, B);
    checked_product({T_, B, GH + R}, "x");
    py::object y = py::none(), c_n = py::none();
    if (return_sequences) {
        py::array_t<float> ya({T_, B, R});
        a.y = ya.mutable_data();
        y = ya;
    }
    py::array_t<float> h_n({B, R});
    a.h_n = h_n.mutable_data();
    if (lstm) {
        py::array_t<float> ca({B, H});
        a.c_n = ca.mutable_data();
        c_n = ca;
    }
    {
        py::gil_scoped_release release;  // the arrays above outlive the call
        const ThreadShare share;
        q::gated_forward(a, w);
    }
    return py::make_tuple(y, h_n, c_n);
}

}  // namespace

void register_quantized_gated(py::module_& m) {
    m.def("quantized_gated_forward", &forward, py::arg("cell"), py::arg("x"), py::arg("h0"),
          py::arg("c0"), py::arg("weight_ih"), py::arg("weight_hh"), py::arg("weight_hn"),
          py::arg("weight_hr"), py::arg("bias_ih"), py::arg("bias_hh"), py::arg("lengths"),
          py::arg("activation"), py::arg("recurrent_activation"), py::arg("return_sequences"),
          "One quantized gated layer over a sequence: (y or None, h_n, c_n or None). Weights: "
          "QuantizedMatrix made with gates=G (reset_before: W_hh's r, z rows with gates=2 and "
          "weight_hn its n rows); biases float32 in PyTorch's gate order.");
}

}  // namespace rnnfast::bindings
