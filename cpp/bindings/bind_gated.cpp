// Bindings of the gated cells' forward and backward drivers (GRU, LSTM): one layer, one
// direction, whole sequences. Checks with the GIL held, the drivers with it released.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "check.hpp"
#include "gated_names.hpp"
#include "rnnfast/drivers/gated.hpp"
#include "rnnfast/runtime/threads.hpp"
#include "sequence_input.hpp"
#include "weight_cache_arg.hpp"

namespace rnnfast::bindings {
namespace {

// The sizes every gated call shares, read off x and the weights and checked against each other.
struct GatedShape {
    GatedCell cell;
    index steps, batch, D, H, P, R, GH;
};

GatedShape gated_shape(const std::string& cell_name, const py::array& x, const py::object& ids,
                       const py::array& w_ih, const py::array& w_hh, const py::object& w_hr) {
    GatedShape s{};
    s.cell = parse_cell(cell_name);
    const index G = gate_count(s.cell);
    // x (T, B, D), or with token ids (T, B), the embedding table (vocab, D) they index
    const py::handle steps_from = ids.is_none() ? py::handle(x) : py::handle(ids);
    require_ndim(steps_from, ids.is_none() ? "x" : "ids", ids.is_none() ? 3 : 2,
                 ids.is_none() ? "(T, B, D)" : "(T, B)");
    require_ndim(w_ih, "weight_ih", 2, "(G*H, D)");
    require_ndim(w_hh, "weight_hh", 2, "(G*H, R)");
    const py::array first = py::reinterpret_borrow<py::array>(steps_from);
    s.steps = first.shape(0);
    s.batch = first.shape(1);
    s.GH = w_ih.shape(0);
    s.D = w_ih.shape(1);
    RNNFAST_CHECK(s.GH % G == 0, "weight_ih", std::to_string(G) + "*H rows (the gates stacked)",
                  "shape " + shape_str(w_ih));
    s.H = s.GH / G;
    s.P = 0;
    if (!w_hr.is_none()) {
        RNNFAST_CHECK(gated_cell_counts(s.cell).projects, "weight_hr", "None for a GRU",
                      "an array (a projection is the LSTM's)");
        require_ndim(w_hr, "weight_hr", 2, "(P, H)");
        s.P = py::reinterpret_borrow<py::array>(w_hr).shape(0);
        RNNFAST_CHECK(s.P > 0, "weight_hr", "P > 0 rows", "0");
    }
    s.R = s.P > 0 ? s.P : s.H;
    checked_product({s.steps, s.batch, s.GH + s.H + s.D}, "x");
    return s;
}

// What a forward and its backward are both given: the sequence, the initial states, the
// weights, the masks and the gates' functions (the Python objects, checked when read).
struct GatedInputs {
    py::array x;
    py::object ids, h0, c0;
    py::array w_ih, w_hh;
    py::object w_hr, lengths, step_mask;
    bool zero_output_for_mask;
    py::object recurrent_mask, input_mask;
    Pointwise act, rec;
    py::object cell_params;  // the cell's own parameters (layer_norm_lstm's norms), or None
    WeightCache* cache;      // the layer's packed weights, or null
};

// Sets the arguments a forward's and a backward's driver arguments share (Args: either).
template <class T, class Args>
SequenceInput<T> set_shared(Args& a, const GatedShape& s, const GatedInputs& in) {
    const index T_ = s.steps, B = s.batch, H = s.H, R = s.R, G = gate_count(s.cell);
    const bool lstm = gated_cell_counts(s.cell).states == 2;
    a.cell = s.cell;
    a.cache = in.cache;
    a.steps = T_;
    a.batch = B;
    a.input_size = s.D;
    a.hidden_size = H;
    a.proj_size = s.P;
    const SequenceInput<T> seq = sequence_input<T>(in.x, in.ids, s.D);
    a.x = seq.x;
    a.ids = seq.ids;
    a.vocab = seq.vocab;
    RNNFAST_CHECK(!seq.ids || in.input_mask.is_none(), "input_mask",
                  "None with token ids (the table is projected once, whatever the masks)",
                  "an array");
    a.w_ih = checked<T>(in.w_ih, "weight_ih", {s.GH, s.D}, "(G*H, D)").data();
    a.w_hh = checked<T>(in.w_hh, "weight_hh", {s.GH, R}, "(G*H, R)").data();
    a.w_hr = optional_data<T>(in.w_hr, "weight_hr", {s.P, H}, "(P, H)");
    a.h0 = optional_data<T>(in.h0, "h0", {B, R}, "(B, R)");
    RNNFAST_CHECK(lstm || in.c0.is_none(), "c0", "None for a GRU", "an array");
    a.c0 = optional_data<T>(in.c0, "c0", {B, H}, "(B, H)");
    a.lengths = sorted_lengths(in.lengths, T_, B);
    if (!in.step_mask.is_none())
        a.keep = checked<std::uint8_t>(in.step_mask, "step_mask", {T_, B}, "(T, B)").data();
    a.zero_output_for_mask = in.zero_output_for_mask;
    a.recurrent_mask =
        optional_data<T>(in.recurrent_mask, "recurrent_mask", {G, B, R}, "(G, B, R)");
    a.input_mask = optional_data<T>(in.input_mask, "input_mask", {G, B, s.D}, "(G, B, D)");
    a.act = in.act;
    a.rec = in.rec;
    const index own = gated_cell_counts(s.cell).params * H;
    RNNFAST_CHECK(own > 0 || in.cell_params.is_none(), "cell_params",
                  "None for a cell without parameters of its own", "an array");
    RNNFAST_CHECK(own == 0 || !in.cell_params.is_none(), "cell_params",
                  "the cell's parameters (" + std::to_string(own) + ",)", "None");
    a.cell_params = optional_data<T>(in.cell_params, "cell_params", {own}, "(params*H,)");
    return seq;
}

// A new array of the given shape for a driver to write, and its data pointer into `out`.
template <class T>
py::array_t<T> output(std::initializer_list<index> shape, T*& out) {
    py::array_t<T> arr(std::vector<py::ssize_t>(shape.begin(), shape.end()));
    out = arr.mutable_data();
    return arr;
}

template <class T>
py::tuple forward_impl(const GatedShape& s, const GatedInputs& in, const py::object& b_ih,
                       const py::object& b_hh, bool return_sequences, bool keep_workspace) {
    const index T_ = s.steps, B = s.batch, H = s.H, R = s.R;
    GatedForwardArgs<T> a;
    set_shared<T>(a, s, in);
    a.b_ih = optional_data<T>(b_ih, "bias_ih", {s.GH}, "(G*H,)");
    a.b_hh = optional_data<T>(b_hh, "bias_hh", {s.GH}, "(G*H,)");
    RNNFAST_CHECK(!keep_workspace || return_sequences, "keep_workspace",
                  "return_sequences=True with it (the backward reads every h_t)",
                  "return_sequences=False");
    py::object h_n = output<T>({B, R}, a.h_n), c_n = py::none(), y = py::none(), ws = py::none();
    if (gated_cell_counts(s.cell).states == 2) c_n = output<T>({B, H}, a.c_n);
    if (return_sequences) y = output<T>({T_, B, R}, a.y);
    if (keep_workspace) ws = output<T>({T_, B, workspace_width(s.cell, H)}, a.workspace);
    {
        // Safe without the GIL: the driver touches only these buffers, which the arguments and
        // the new arrays keep alive until we return.
        py::gil_scoped_release release;
        const ThreadShare share;  // concurrent calls split the thread budget
        gated_forward(a);
    }
    return py::make_tuple(y, h_n, c_n, ws);
}

template <class T>
py::tuple backward_impl(const GatedShape& s, const GatedInputs& in, const py::array& y,
                        const py::array& workspace, const py::object& dy, const py::object& dh_n,
                        const py::object& dc_n, bool input_gradient) {
    const index T_ = s.steps, B = s.batch, D = s.D, H = s.H, R = s.R, GH = s.GH, P = s.P;
    const bool lstm = gated_cell_counts(s.cell).states == 2;
    GatedBackwardArgs<T> a;
    const SequenceInput<T> seq = set_shared<T>(a, s, in);
    RNNFAST_CHECK(lstm || dc_n.is_none(), "dc_n", "None for a GRU", "an array");
    a.y = checked<T>(y, "y", {T_, B, R}, "(T, B, R)").data();
    a.workspace = checked<T>(workspace, "workspace", {T_, B, workspace_width(s.cell, H)},
                             "(T, B, W) as the forward kept it")
                      .data();
    a.dy = optional_data<T>(dy, "dy", {T_, B, R}, "(T, B, R)");
    a.dh_n = optional_data<T>(dh_n, "dh_n", {B, R}, "(B, R)");
    a.dc_n = optional_data<T>(dc_n, "dc_n", {B, H}, "(B, H)");
    py::object dx = py::none(), dc0 = py::none(), dw_hr = py::none();
    if (input_gradient)  // with token ids, the table's gradient
        dx = seq.ids ? output<T>({seq.vocab, D}, a.dx) : output<T>({T_, B, D}, a.dx);
    if (lstm) dc0 = output<T>({B, H}, a.dc0);
    if (P > 0) dw_hr = output<T>({P, H}, a.dw_hr);
    py::object dh0 = output<T>({B, R}, a.dh0), dw_ih = output<T>({GH, D}, a.dw_ih),
               dw_hh = output<T>({GH, R}, a.dw_hh), db_ih = output<T>({GH}, a.db_ih),
               db_hh = output<T>({GH}, a.db_hh);
    const index own = gated_cell_counts(s.cell).params * H;
    py::object d_own = py::none();
    if (own > 0) d_own = output<T>({own}, a.dcell_params);
    {
        py::gil_scoped_release release;
        const ThreadShare share;
        gated_backward(a);
    }
    if (own > 0)  // the cell's own parameters' gradient last
        return py::make_tuple(dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh, dw_hr, d_own);
    return py::make_tuple(dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh, dw_hr);
}

template <class T>
py::object step_impl(GatedCell cell, const py::array& x, const py::array& h, const py::object& c,
                     const py::array& w_ih, const py::array& w_hh, const py::object& b_ih,
                     const py::object& b_hh, const py::object& w_hr, Pointwise act, Pointwise rec,
                     const py::object& cell_params) {
    const bool lstm = gated_cell_counts(cell).states == 2;
    require_ndim(x, "x_t", 2, "(B, D)");
    require_ndim(w_ih, "weight_ih", 2, "(G*H, D)");
    const index G = gate_count(cell);
    const index B = x.shape(0), GH = w_ih.shape(0), D = w_ih.shape(1);
    RNNFAST_CHECK(GH % G == 0, "weight_ih", std::to_string(G) + "*H rows (the gates stacked)",
                  "shape " + shape_str(w_ih));
    const index H = GH / G;
    index P = 0;
    if (!w_hr.is_none()) {
        RNNFAST_CHECK(lstm, "weight_hr", "None for a GRU", "an array (a projection is the LSTM's)");
        require_ndim(w_hr, "weight_hr", 2, "(P, H)");
        P = py::reinterpret_borrow<py::array>(w_hr).shape(0);
    }
    const index R = P > 0 ? P : H;
    GatedStepArgs<T> a;
    a.cell = cell;
    a.batch = B;
    a.input_size = D;
    a.hidden_size = H;
    a.proj_size = P;
    a.x = checked<T>(x, "x_t", {B, D}, "(B, D)").data();
    a.h = checked<T>(h, "h", {B, R}, "(B, R)").data();
    a.w_ih = checked<T>(w_ih, "weight_ih", {GH, D}, "(G*H, D)").data();
    a.w_hh = checked<T>(w_hh, "weight_hh", {GH, R}, "(G*H, R)").data();
    a.b_ih = optional_data<T>(b_ih, "bias_ih", {GH}, "(G*H,)");
    a.b_hh = optional_data<T>(b_hh, "bias_hh", {GH}, "(G*H,)");
    a.w_hr = optional_data<T>(w_hr, "weight_hr", {P, H}, "(P, H)");
    const index own = gated_cell_counts(cell).params * H;
    RNNFAST_CHECK((own > 0) != cell_params.is_none(), "cell_params",
                  own > 0 ? "the cell's parameters (10*H,)" : "None for this cell",
                  cell_params.is_none() ? "None" : "an array");
    a.cell_params = optional_data<T>(cell_params, "cell_params", {own}, "(params*H,)");
    RNNFAST_CHECK(lstm != c.is_none(), "c", lstm ? "the cell state (B, H)" : "None for a GRU",
                  c.is_none() ? "None" : "an array");
    a.c = optional_data<T>(c, "c", {B, H}, "(B, H)");
    a.act = act;
    a.rec = rec;
    py::array_t<T> h_next({B, R});
    a.h_next = h_next.mutable_data();
    if (!lstm) {
        gated_step(a);  // microseconds: releasing the GIL would cost more than it frees
        return std::move(h_next);
    }
    py::array_t<T> c_next({B, H});
    a.c_next = c_next.mutable_data();
    gated_step(a);
    return py::make_tuple(h_next, c_next);
}

}  // namespace

void register_gated(py::module_& m) {
    m.def(
        "recurrent_cells",
        [] {
            py::list cells;
            cells.append("elman");
            for (const char* name : kGatedCellNames)
                cells.append(name);
            return cells;
        },
        "The cells the recurrent drivers run, each in float32 and float64 on every compiled ISA "
        "(their GEMMs and gate functions come from the ISA's kernel table).");
    m.def(
        "gated_forward",
        [](const std::string& cell, const py::array& x, const py::object& h0, const py::object& c0,
           const py::array& w_ih, const py::array& w_hh, const py::object& b_ih,
           const py::object& b_hh, const py::object& w_hr, const py::object& lengths,
           const std::string& activation, const std::string& recurrent_activation,
           bool return_sequences, bool keep_workspace, const py::object& step_mask,
           bool zero_output_for_mask, const py::object& recurrent_mask,
           const py::object& input_mask, const py::object& ids, const py::object& cell_params,
           const py::object& weight_cache) {
            const GatedShape s = gated_shape(cell, x, ids, w_ih, w_hh, w_hr);
            const GatedInputs in{x,
                                 ids,
                                 h0,
                                 c0,
                                 w_ih,
                                 w_hh,
                                 w_hr,
                                 lengths,
                                 step_mask,
                                 zero_output_for_mask,
                                 recurrent_mask,
                                 input_mask,
                                 parse_activation_fn(activation),
                                 parse_recurrent_activation(recurrent_activation),
                                 cell_params,
                                 weight_cache_arg(weight_cache)};
            return by_dtype(
                w_ih,
                [&] {
                    return forward_impl<float>(s, in, b_ih, b_hh, return_sequences, keep_workspace);
                },
                [&] {
                    return forward_impl<double>(s, in, b_ih, b_hh, return_sequences,
                                                keep_workspace);
                });
        },
        py::arg("cell"), py::arg("x"), py::arg("h0"), py::arg("c0"), py::arg("weight_ih"),
        py::arg("weight_hh"), py::arg("bias_ih"), py::arg("bias_hh"), py::arg("weight_hr"),
        py::arg("lengths"), py::arg("activation"), py::arg("recurrent_activation"),
        py::arg("return_sequences"), py::arg("keep_workspace"), py::kw_only(),
        py::arg("step_mask") = py::none(), py::arg("zero_output_for_mask") = false,
        py::arg("recurrent_mask") = py::none(), py::arg("input_mask") = py::none(),
        py::arg("ids") = py::none(), py::arg("cell_params") = py::none(),
        py::arg("weight_cache") = py::none(),
        "One gated layer over a sequence: (y or None, h_n, c_n or None, workspace or None). "
        "cell 'gru', 'gru_reset_before', 'lstm', 'layer_norm_lstm' (its norms in "
        "cell_params) or an ONNX form of the LSTM, 'lstm' + '_peepholes' / '_input_forget' / "
        "'_clip' (peepholes p_i, p_f, p_o, then the clip, in cell_params); arrays C-contiguous; "
        "lengths sorted.");
    m.def(
        "gated_backward",
        [](const std::string& cell, const py::array& x, const py::object& h0, const py::object& c0,
           const py::array& w_ih, const py::array& w_hh, const py::object& w_hr, const py::array& y,
           const py::array& workspace, const py::object& dy, const py::object& dh_n,
           const py::object& dc_n, const py::object& lengths, const std::string& activation,
           const std::string& recurrent_activation, bool input_gradient,
           const py::object& step_mask, bool zero_output_for_mask, const py::object& recurrent_mask,
           const py::object& input_mask, const py::object& ids, const py::object& cell_params,
           const py::object& weight_cache) {
            const GatedShape s = gated_shape(cell, x, ids, w_ih, w_hh, w_hr);
            const GatedInputs in{x,
                                 ids,
                                 h0,
                                 c0,
                                 w_ih,
                                 w_hh,
                                 w_hr,
                                 lengths,
                                 step_mask,
                                 zero_output_for_mask,
                                 recurrent_mask,
                                 input_mask,
                                 parse_activation_fn(activation),
                                 parse_recurrent_activation(recurrent_activation),
                                 cell_params,
                                 weight_cache_arg(weight_cache)};
            return by_dtype(
                w_ih,
                [&] {
                    return backward_impl<float>(s, in, y, workspace, dy, dh_n, dc_n,
                                                input_gradient);
                },
                [&] {
                    return backward_impl<double>(s, in, y, workspace, dy, dh_n, dc_n,
                                                 input_gradient);
                });
        },
        py::arg("cell"), py::arg("x"), py::arg("h0"), py::arg("c0"), py::arg("weight_ih"),
        py::arg("weight_hh"), py::arg("weight_hr"), py::arg("y"), py::arg("workspace"),
        py::arg("dy"), py::arg("dh_n"), py::arg("dc_n"), py::arg("lengths"), py::arg("activation"),
        py::arg("recurrent_activation"), py::arg("input_gradient"), py::kw_only(),
        py::arg("step_mask") = py::none(), py::arg("zero_output_for_mask") = false,
        py::arg("recurrent_mask") = py::none(), py::arg("input_mask") = py::none(),
        py::arg("ids") = py::none(), py::arg("cell_params") = py::none(),
        py::arg("weight_cache") = py::none(),
        "One gated layer's BPTT: (dx or None, dh0, dc0 or None, dweight_ih, dweight_hh, "
        "dbias_ih, dbias_hh, dweight_hr or None), and dcell_params last for a cell with "
        "cell_params; with ids, dx is the table's gradient.");
    m.def(
        "gated_step",
        [](const std::string& cell, const py::array& x, const py::array& h, const py::object& c,
           const py::array& w_ih, const py::array& w_hh, const py::object& b_ih,
           const py::object& b_hh, const py::object& w_hr, const std::string& activation,
           const std::string& recurrent_activation, const py::object& cell_params) {
            const GatedCell kind = parse_cell(cell);
            const Pointwise act = parse_activation_fn(activation);
            const Pointwise rec = parse_recurrent_activation(recurrent_activation);
            return by_dtype(
                w_ih,
                [&] {
                    return step_impl<float>(kind, x, h, c, w_ih, w_hh, b_ih, b_hh, w_hr, act, rec,
                                            cell_params);
                },
                [&] {
                    return step_impl<double>(kind, x, h, c, w_ih, w_hh, b_ih, b_hh, w_hr, act, rec,
                                             cell_params);
                });
        },
        py::arg("cell"), py::arg("x_t"), py::arg("h"), py::arg("c"), py::arg("weight_ih"),
        py::arg("weight_hh"), py::arg("bias_ih"), py::arg("bias_hh"), py::arg("weight_hr"),
        py::arg("activation"), py::arg("recurrent_activation"), py::kw_only(),
        py::arg("cell_params") = py::none(),
        "One gated step: h_next (B, R), or (h_next, c_next) for the LSTM. Arrays C-contiguous.");
}

}  // namespace rnnfast::bindings
