// A layer's streaming step, bound once: the hot path of RNN.step() and of the gated layers'
// step() (one undilated, unidirectional layer that carries no state of its own).
//
// rnn_step and gated_step take every array and option as arguments, so each call converts eight
// to eleven of them, parses the option strings and checks every array, and the layer's Python
// gathers them first. A StepFunction parses the options once and keeps the layer's parameter
// dict and the names in it: a call takes x_t and the state, and looks the weights up in that
// dict, so they are read live (an optimizer's in-place update, or a parameter the torch bridge
// rebinds, is what the next step reads), with the few field reads of a check per array and no
// call into NumPy but the output's allocation.
//
// A call returns None wherever its arguments are not the hot path's (another dtype or layout,
// another form of state, a batch of the wrong width, a weight rebound to the wrong shape): the
// layer's general path then runs, converts what it can and names the problem.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <string>
#include <vector>

#include "check.hpp"
#include "gated_names.hpp"
#include "rnnfast/drivers/gated.hpp"
#include "rnnfast/drivers/rnn.hpp"

namespace rnnfast::bindings {
namespace {

// The parameters a step reads, in this order in the names it is given (None where the layer
// has none: a bias-free layer's biases, every layer's but a projecting LSTM's weight_hr).
enum Weight { w_ih, w_hh, b_ih, b_hh, w_hr, kWeights };

class StepFunction {
  public:
    StepFunction(py::dict params, const std::vector<py::object>& names, const std::string& cell,
                 const std::string& activation, const std::string& recurrent_activation,
                 double alpha, index input_size, index hidden_size, index proj_size,
                 const py::dtype& dtype)
        : params_(std::move(params)),
          elman_(cell == "elman"),
          D_(input_size),
          H_(hidden_size),
          P_(proj_size),
          R_(proj_size > 0 ? proj_size : hidden_size),
          double_(dtype.kind() == 'f' && dtype.itemsize() == 8) {
        RNNFAST_CHECK(names.size() == kWeights, "names",
                      "(weight_ih, weight_hh, bias_ih, bias_hh, weight_hr)",
                      std::to_string(names.size()) + " names");
        std::copy(names.begin(), names.end(), names_.begin());
        // by kind and size, not identity: a layer unpickled holds dtype objects of its own
        RNNFAST_CHECK(dtype.kind() == 'f' && (dtype.itemsize() == 4 || dtype.itemsize() == 8),
                      "dtype", "float32 or float64", std::string(py::str(dtype)));
        if (elman_) {
            elman_act_ = parse_activation(activation);
            check_alpha(alpha);
            alpha_ = alpha;
        } else {
            cell_ = parse_cell(cell);
            act_ = parse_activation_fn(activation);
            rec_ = parse_recurrent_activation(recurrent_activation);
        }
        RNNFAST_CHECK(P_ == 0 || cell_ == GatedCell::lstm, "proj_size", "0 but for an LSTM",
                      std::to_string(P_));
        GH_ = (elman_ ? 1 : gate_count(cell_)) * H_;
    }

    py::object operator()(const py::handle& x, const py::handle& state) {
        return double_ ? run<double>(x, state) : run<float>(x, state);
    }

  private:
    // The layer's array `which` as this step reads it, or null: absent where the layer has none
    // (its name None), or not of the expected shape (then `fits` is false: the general path
    // says why).
    template <class T>
    const T* weight(Weight which, std::initializer_list<index> shape, bool& fits) const {
        const py::object& name = names_[which];
        if (name.is_none()) return nullptr;
        const T* data = fitting<T>(PyDict_GetItem(params_.ptr(), name.ptr()), shape);
        fits = fits && data != nullptr;
        return data;
    }

    // The state's arrays as (B, width) data, or null: None (zeros) gives `zeros`.
    template <class T>
    const T* state_part(PyObject* part, index B, index width, const T* zeros) const {
        if (part == Py_None) return zeros;
        return fitting<T>(part, {1, B, width});
    }

    template <class T>
    py::object run(const py::handle& x_obj, const py::handle& state) {
        PyObject* xp = x_obj.ptr();
        if (!py::isinstance<py::array>(xp)) return py::none();
        const auto xa = py::reinterpret_borrow<py::array>(xp);
        if (xa.ndim() != 2) return py::none();
        const index B = xa.shape(0);
        const T* x = fitting<T>(xp, {B, D_});
        if (x == nullptr) return py::none();

        bool fits = true;
        const T* wih = weight<T>(w_ih, {GH_, D_}, fits);
        const T* whh = weight<T>(w_hh, {GH_, R_}, fits);
        const T* bih = weight<T>(b_ih, {GH_}, fits);
        const T* bhh = weight<T>(b_hh, {GH_}, fits);
        const T* whr = weight<T>(w_hr, {P_, H_}, fits);
        if (!fits || wih == nullptr || whh == nullptr || (P_ > 0) != (whr != nullptr))
            return py::none();

        // The state: None (zeros), the array (1, B, R), or the LSTM's pair of them.
        const bool lstm = !elman_ && cell_ == GatedCell::lstm;
        std::vector<T>& zeros = zeros_of<T>();
        const auto zero_size = static_cast<size_t>(B * std::max(R_, H_));
        if (state.is_none() && zeros.size() < zero_size) zeros.assign(zero_size, T(0));
        PyObject *h_obj = state.ptr(), *c_obj = Py_None;
        if (lstm && !state.is_none()) {
            if (!PyTuple_Check(h_obj) || PyTuple_GET_SIZE(h_obj) != 2) return py::none();
            c_obj = PyTuple_GET_ITEM(state.ptr(), 1);
            h_obj = PyTuple_GET_ITEM(state.ptr(), 0);
            if (h_obj == Py_None || c_obj == Py_None) return py::none();
        }
        const T* h = state_part<T>(h_obj, B, R_, zeros.data());
        const T* c = lstm ? state_part<T>(c_obj, B, H_, zeros.data()) : nullptr;
        if (h == nullptr || (lstm && c == nullptr)) return py::none();

        py::array_t<T> h_next({index(1), B, R_});
        if (elman_) {
            StepArgs<T> a;
            a.batch = B, a.input_size = D_, a.hidden_size = H_;
            a.x = x, a.h = h, a.w_ih = wih, a.w_hh = whh, a.b_ih = bih, a.b_hh = bhh;
            a.act = elman_act_;
            a.alpha = static_cast<T>(alpha_);
            a.h_next = h_next.mutable_data();
            rnn_step(a);  // no GIL release: see bind_rnn's rnn_step
            return py::make_tuple(first(h_next), h_next);
        }
        GatedStepArgs<T> a;
        a.cell = cell_;
        a.batch = B, a.input_size = D_, a.hidden_size = H_, a.proj_size = P_;
        a.x = x, a.h = h, a.c = c, a.w_ih = wih, a.w_hh = whh, a.b_ih = bih, a.b_hh = bhh;
        a.w_hr = whr;
        a.act = act_, a.rec = rec_;
        a.h_next = h_next.mutable_data();
        if (!lstm) {
            gated_step(a);
            return py::make_tuple(first(h_next), h_next);
        }
        py::array_t<T> c_next({index(1), B, H_});
        a.c_next = c_next.mutable_data();
        gated_step(a);
        return py::make_tuple(first(h_next), py::make_tuple(h_next, c_next));
    }

    // next[0], a view: the step's output beside the state (num_layers = 1, B, R) it is part of.
    template <class T>
    static py::array first(const py::array_t<T>& next) {
        return py::array_t<T>({next.shape(1), next.shape(2)}, {next.strides(1), next.strides(2)},
                              next.data(), next);
    }

    template <class T>
    std::vector<T>& zeros_of() {
        if constexpr (sizeof(T) == sizeof(double))
            return zeros_f64_;
        else
            return zeros_f32_;
    }

    py::dict params_;
    std::array<py::object, kWeights> names_;
    bool elman_;
    Activation elman_act_ = Activation::tanh;
    double alpha_ = 1.0;
    GatedCell cell_ = GatedCell::gru;
    Pointwise act_ = Pointwise::tanh, rec_ = Pointwise::sigmoid;
    index D_, H_, P_, R_, GH_ = 0;
    bool double_;
    // the zero state of a call without one (read only; kept to spare an allocation per call)
    std::vector<float> zeros_f32_;
    std::vector<double> zeros_f64_;
};

}  // namespace

void register_step_function(py::module_& m) {
    py::class_<StepFunction>(m, "StepFunction",
                             "A layer's streaming step bound once: fn(x_t, state) -> (out_t, "
                             "state_next), or None where the arguments are not its hot path.")
        .def(py::init<py::dict, const std::vector<py::object>&, const std::string&,
                      const std::string&, const std::string&, double, index, index, index,
                      const py::dtype&>(),
             py::arg("params"), py::arg("names"), py::arg("cell"), py::arg("activation"),
             py::arg("recurrent_activation"), py::arg("alpha"), py::arg("input_size"),
             py::arg("hidden_size"), py::arg("proj_size"), py::arg("dtype"))
        .def("__call__", &StepFunction::operator(), py::arg("x_t"), py::arg("state"))
        // A copy or a pickle of the layer holding it gets None: the copy binds its own step on
        // its own parameter dict at its first step() (the layer's _bound_step).
        .def("__reduce__",
             [](const py::object&) { return py::make_tuple(py::none().get_type(), py::tuple()); });
}

}  // namespace rnnfast::bindings
