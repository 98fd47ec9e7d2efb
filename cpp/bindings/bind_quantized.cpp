// Bindings of the quantized inference kernels (issue 16): QuantizedMatrix (int8 or bf16 weights
// packed once), the dense product, the recurrent forward and step, the path choice, and the test
// hooks that expose the int8 products exactly.
#include <pybind11/stl.h>

#include <cmath>
#include <string>
#include <vector>

#include "check.hpp"
#include "quantized_args.hpp"
#include "rnnfast/cells/gate_layout.hpp"
#include "rnnfast/quantized/qops.hpp"
#include "rnnfast/runtime/threads.hpp"

namespace rnnfast::bindings {
namespace {

// Rows of a gated cell's matrix (gates = G) reordered into the gate layout the quantized gated
// forward reads (a block of 16 units holds every gate of its units: qlayout.hpp); gates = 1
// keeps them as given (no copy).
template <class V>
const V* in_gate_layout(const V* rows, index N, index K, int gates, std::vector<V>& out) {
    if (gates == 1) return rows;
    out = rows_in_layout(rows, GateLayout{N / gates, gates, q::kPanel}, K);
    return out.data();
}

q::PackedMatrix make_matrix(const std::string& kind_str, const py::object& data,
                            const py::object& scale, int gates) {
    const q::Kind kind = parse_kind(kind_str);
    const auto [N, K] = shape2(data, "data", "(N, K)");
    RNNFAST_CHECK(gates >= 1 && N % gates == 0, "gates",
                  "a count >= 1 that divides the rows (" + std::to_string(N) + ")",
                  std::to_string(gates));
    q::PackedMatrix packed;
    if (kind == q::Kind::int8) {
        const std::int8_t* qp = checked<std::int8_t>(data, "data", {N, K}, "(N, K)").data();
        RNNFAST_CHECK(!scale.is_none(), "scale", "a float32 array (N,) for kind 'int8'", "None");
        const float* sp = checked<float>(scale, "scale", {N}, "(N,)").data();
        for (index j = 0; j < N; ++j)
            RNNFAST_CHECK(std::isfinite(sp[j]) && sp[j] >= 0.0f, "scale", "finite values >= 0",
                          std::to_string(sp[j]) + " at row " + std::to_string(j));
        for (index i = 0; i < N * K; ++i)
            RNNFAST_CHECK(qp[i] != -128, "data", "values in [-127, 127] (symmetric int8)",
                          "-128 at flat index " + std::to_string(i));
        py::gil_scoped_release release;
        std::vector<std::int8_t> q_rows;
        std::vector<float> s_rows;
        packed = q::pack_int8(in_gate_layout(qp, N, K, gates, q_rows),
                              in_gate_layout(sp, N, 1, gates, s_rows), N, K);
    } else {
        const std::uint16_t* bp = checked<std::uint16_t>(data, "data", {N, K}, "(N, K)").data();
        RNNFAST_CHECK(scale.is_none(), "scale", "None for kind 'bf16'", "an object");
        py::gil_scoped_release release;
        std::vector<std::uint16_t> b_rows;
        packed = q::pack_bf16(in_gate_layout(bp, N, K, gates, b_rows), N, K);
    }
    packed.gates = gates;
    return packed;
}

py::array_t<float> dense(const py::object& x, const py::object& w_obj, const py::object& bias) {
    const q::PackedMatrix& w = matrix_arg(w_obj, "w");
    require_gates(w, "w", 1);
    const index M = shape2(x, "x", "(M, K)").first;
    const float* xp = checked<float>(x, "x", {M, w.cols}, "(M, K) with K = w.cols").data();
    const float* bp = bias_arg(bias, w.rows);
    py::array_t<float> y({M, w.rows});
    float* yp = y.mutable_data();
    py::gil_scoped_release release;  // the arrays above outlive the call
    const ThreadShare share;
    q::dense(xp, M, w, bp, yp);
    return y;
}

// The weights of one layer: H x D and H x H of one kind.
void check_pair(const q::PackedMatrix& w_ih, const q::PackedMatrix& w_hh) {
    require_gates(w_ih, "w_ih", 1);
    require_gates(w_hh, "w_hh", 1);
    RNNFAST_CHECK(w_hh.rows == w_hh.cols, "w_hh", "a square (H, H) matrix",
                  "(" + std::to_string(w_hh.rows) + ", " + std::to_string(w_hh.cols) + ")");
    RNNFAST_CHECK(w_ih.rows == w_hh.rows, "w_ih",
                  "H = " + std::to_string(w_hh.rows) + " rows (as w_hh)",
                  std::to_string(w_ih.rows) + " rows");
    RNNFAST_CHECK(w_ih.kind == w_hh.kind, "w_ih",
                  std::string("kind '") + kind_name(w_hh.kind) + "' (as w_hh)",
                  std::string("kind '") + kind_name(w_ih.kind) + "'");
}

py::tuple rnn_forward(const py::object& x, const py::object& h0, const py::object& w_ih_obj,
                      const py::object& w_hh_obj, const py::object& bias, const py::object& lengths,
                      const std::string& nonlinearity, double alpha, bool return_sequences) {
    const q::PackedMatrix& w_ih = matrix_arg(w_ih_obj, "w_ih");
    const q::PackedMatrix& w_hh = matrix_arg(w_hh_obj, "w_hh");
    check_pair(w_ih, w_hh);
    const Activation act = parse_activation(nonlinearity);
    check_alpha(alpha);
    require_ndim(x, "x", 3, "(T, B, D)");
    auto xa = py::reinterpret_borrow<py::array>(x);
    const index T_ = xa.shape(0), B = xa.shape(1), D = w_ih.cols, H = w_hh.rows;
    q::ForwardArgs a;
    a.steps = T_;
    a.batch = B;
    a.input_size = D;
    a.hidden_size = H;
    a.x = checked<float>(x, "x", {T_, B, D}, "(T, B, D) with D = w_ih.cols").data();
    if (!h0.is_none()) a.h0 = checked<float>(h0, "h0", {B, H}, "(B, H)").data();
    a.w_ih = &w_ih;
    a.w_hh = &w_hh;
    a.bias = bias_arg(bias, H);
    a.lengths = sorted_lengths(lengths, T_, B);
    a.act = act;
    a.alpha = static_cast<float>(alpha);
    checked_product({T_, B, H}, "y");
    py::object y = py::none();
    if (return_sequences) {
        py::array_t<float> ya({T_, B, H});
        a.y = ya.mutable_data();
        y = ya;
    }
    py::array_t<float> h_n({B, H});
    a.h_n = h_n.mutable_data();
    {
        py::gil_scoped_release release;  // the arrays above outlive the call
        const ThreadShare share;
        q::rnn_forward(a);
    }
    return py::make_tuple(y, h_n);
}

py::array_t<float> rnn_step(const py::object& x_t, const py::object& h, const py::object& w_ih_obj,
                            const py::object& w_hh_obj, const py::object& bias,
                            const std::string& nonlinearity, double alpha) {
    const q::PackedMatrix& w_ih = matrix_arg(w_ih_obj, "w_ih");
    const q::PackedMatrix& w_hh = matrix_arg(w_hh_obj, "w_hh");
    check_pair(w_ih, w_hh);
    const Activation act = parse_activation(nonlinearity);
    check_alpha(alpha);
    const index B = shape2(x_t, "x_t", "(B, D)").first, D = w_ih.cols, H = w_hh.rows;
    q::ForwardArgs a;
    a.steps = 1;
    a.batch = B;
    a.input_size = D;
    a.hidden_size = H;
    a.x = checked<float>(x_t, "x_t", {B, D}, "(B, D) with D = w_ih.cols").data();
    a.h0 = checked<float>(h, "h", {B, H}, "(B, H)").data();
    a.w_ih = &w_ih;
    a.w_hh = &w_hh;
    a.bias = bias_arg(bias, H);
    a.act = act;
    a.alpha = static_cast<float>(alpha);
    py::array_t<float> h_next({B, H});
    a.h_n = h_next.mutable_data();
    py::gil_scoped_release release;
    const ThreadShare share;
    q::rnn_forward(a);
    return h_next;
}

py::tuple quantize_rows(const py::object& x) {
    const auto [M, K] = shape2(x, "x", "(M, K)");
    const float* xp = checked<float>(x, "x", {M, K}, "(M, K)").data();
    py::array_t<std::int8_t> qa({M, K});
    py::array_t<float> scale({M});
    std::int8_t* qp = qa.mutable_data();
    float* sp = scale.mutable_data();
    {
        py::gil_scoped_release release;
        q::quantize_rows(xp, M, K, qp, sp);
    }
    return py::make_tuple(qa, scale);
}

py::array_t<std::int32_t> matmul_int32(const py::object& qa, const py::object& w_obj) {
    const q::PackedMatrix& w = matrix_arg(w_obj, "w");
    RNNFAST_CHECK(w.kind == q::Kind::int8, "w", "a QuantizedMatrix of kind 'int8'", "kind 'bf16'");
    require_gates(w, "w", 1);
    const index M = shape2(qa, "qa", "(M, K)").first;
    const std::int8_t* ap =
        checked<std::int8_t>(qa, "qa", {M, w.cols}, "(M, K) with K = w.cols").data();
    for (index i = 0; i < M * w.cols; ++i)
        RNNFAST_CHECK(ap[i] != -128, "qa", "values in [-127, 127] (symmetric int8)",
                      "-128 at flat index " + std::to_string(i));
    py::array_t<std::int32_t> acc({M, w.rows});
    std::int32_t* cp = acc.mutable_data();
    py::gil_scoped_release release;
    const ThreadShare share;
    q::matmul_int32(ap, M, w, cp);
    return acc;
}

}  // namespace

void register_quantized(py::module_& m) {
    py::class_<q::PackedMatrix>(m, "QuantizedMatrix",
                                "int8 (with per-row scales) or bf16 weights (N, K), packed once "
                                "for the quantized kernels. Not picklable: keep the raw arrays.")
        .def(py::init(&make_matrix), py::arg("kind"), py::arg("data"), py::arg("scale"),
             py::arg("gates") = 1)
        .def_property_readonly("kind", [](const q::PackedMatrix& w) { return kind_name(w.kind); })
        .def_property_readonly("rows", [](const q::PackedMatrix& w) { return w.rows; })
        .def_property_readonly("cols", [](const q::PackedMatrix& w) { return w.cols; })
        .def_property_readonly("gates", [](const q::PackedMatrix& w) { return w.gates; })
        .def_property_readonly("nbytes", &q::PackedMatrix::nbytes)
        .def_property_readonly("path",
                               [](const q::PackedMatrix& w) { return q::path_name(w.kind); })
        .def("__reduce__",
             [](const q::PackedMatrix&) -> py::object {
                 throw py::type_error(
                     "QuantizedMatrix: expected to be re-created from its raw arrays "
                     "(QuantizedMatrix(kind, data, scale)), got a request to pickle it");
             })
        .def("__repr__", [](const q::PackedMatrix& w) {
            return std::string("QuantizedMatrix(kind='") + kind_name(w.kind) +
                   "', rows=" + std::to_string(w.rows) + ", cols=" + std::to_string(w.cols) +
                   ", path='" + q::path_name(w.kind) + "')";
        });
    m.def("quantized_dense", &dense, py::arg("x"), py::arg("w"), py::arg("bias"),
          "Q(x) w^T dequantized + bias, float32 (M, N).");
    m.def("quantized_rnn_forward", &rnn_forward, py::arg("x"), py::arg("h0"), py::arg("w_ih"),
          py::arg("w_hh"), py::arg("bias"), py::arg("lengths"), py::arg("nonlinearity"),
          py::arg("alpha"), py::arg("return_sequences"),
          "One quantized Elman layer over a sequence: (y or None, h_n).");
    m.def("quantized_rnn_step", &rnn_step, py::arg("x_t"), py::arg("h"), py::arg("w_ih"),
          py::arg("w_hh"), py::arg("bias"), py::arg("nonlinearity"), py::arg("alpha"),
          "One quantized time step: h_next.");
    m.def("quantize_rows", &quantize_rows, py::arg("x"),
          "The dynamic per-row int8 quantization: (q int8, scale float32).");
    m.def("quantized_matmul_int32", &matmul_int32, py::arg("qa"), py::arg("w"),
          "The exact int32 product qa . w^T of an int8 QuantizedMatrix.");
    m.def(
        "quantized_paths",
        [](const py::object& kind) {
            return kind.is_none() ? q::runnable_paths()
                                  : q::runnable_paths(parse_kind(kind.cast<std::string>()));
        },
        py::arg("kind") = py::none(),
        "Quantized paths this CPU runs, lowest first (only those serving `kind` if given).");
    m.def(
        "quantized_path", [](const std::string& kind) { return q::path_name(parse_kind(kind)); },
        py::arg("kind"), "The path 'int8' or 'bf16' products use now.");
    m.def("set_quantized_path", &q::set_path, py::arg("name"),
          "Force a quantized path (tests, benchmarks); '' returns to the automatic choice.");
}

}  // namespace rnnfast::bindings
