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
            RNNFAST_CHECK(gated_cell_counts(cell_).params == 0, "cell",
                          "a cell without parameters of its own", cell);
            act_ = parse_activation_fn(activation);
            rec_ = parse_recurrent_activation(recurrent_activation);
        }
        RNNFAST_CHECK(P_ == 0 || gated_cell_counts(cell_).projects, "proj_size",
                      "0 but for an LSTM", std::to_string(P_));
        GH_ = (elman_ ? 1 : gate_count(cell_)) * H_;
    }

    // The step's result (a new reference), Py_None (new) where the arguments are not the hot
    // path's, or null with a Python error set.
    PyObject* call(PyObject* x, PyObject* state) {
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

    static PyObject* declined() {
        Py_INCREF(Py_None);
        return Py_None;
    }

    template <class T>
    PyObject* run(PyObject* xp, PyObject* state) {
        if (!py::detail::npy_api::get().PyArray_Check_(xp)) return declined();
        const auto* xa = py::detail::array_proxy(xp);
        if (xa->nd != 2) return declined();
        const index B = xa->dimensions[0];
        const T* x = fitting<T>(xp, {B, D_});
        if (x == nullptr) return declined();

        bool fits = true;
        const T* wih = weight<T>(w_ih, {GH_, D_}, fits);
        const T* whh = weight<T>(w_hh, {GH_, R_}, fits);
        const T* bih = weight<T>(b_ih, {GH_}, fits);
        const T* bhh = weight<T>(b_hh, {GH_}, fits);
        const T* whr = weight<T>(w_hr, {P_, H_}, fits);
        if (!fits || wih == nullptr || whh == nullptr || (P_ > 0) != (whr != nullptr))
            return declined();

        // The state: None (zeros), the array (1, B, R), or the LSTM's pair of them.
        const bool lstm = !elman_ && gated_cell_counts(cell_).states == 2;
        std::vector<T>& zeros = zeros_of<T>();
        const auto zero_size = static_cast<size_t>(B * std::max(R_, H_));
        if (state == Py_None && zeros.size() < zero_size) zeros.assign(zero_size, T(0));
        PyObject *h_obj = state, *c_obj = Py_None;
        if (lstm && state != Py_None) {
            if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != 2) return declined();
            h_obj = PyTuple_GET_ITEM(state, 0);
            c_obj = PyTuple_GET_ITEM(state, 1);
            if (h_obj == Py_None || c_obj == Py_None) return declined();
        }
        const T* h = state_part<T>(h_obj, B, R_, zeros.data());
        const T* c = lstm ? state_part<T>(c_obj, B, H_, zeros.data()) : nullptr;
        if (h == nullptr || (lstm && c == nullptr)) return declined();

        PyObject* h_next = new_array<T>({1, B, R_});
        if (h_next == nullptr) return nullptr;
        T* h_data = data_of<T>(h_next);
        if (elman_) {
            StepArgs<T> a;
            a.batch = B, a.input_size = D_, a.hidden_size = H_;
            a.x = x, a.h = h, a.w_ih = wih, a.w_hh = whh, a.b_ih = bih, a.b_hh = bhh;
            a.act = elman_act_;
            a.alpha = static_cast<T>(alpha_);
            a.h_next = h_data;
            rnn_step(a);  // no GIL release: see bind_rnn's rnn_step
            return output_and<T>(h_next, h_next);
        }
        GatedStepArgs<T> a;
        a.cell = cell_;
        a.batch = B, a.input_size = D_, a.hidden_size = H_, a.proj_size = P_;
        a.x = x, a.h = h, a.c = c, a.w_ih = wih, a.w_hh = whh, a.b_ih = bih, a.b_hh = bhh;
        a.w_hr = whr;
        a.act = act_, a.rec = rec_;
        a.h_next = h_data;
        if (!lstm) {
            gated_step(a);
            return output_and<T>(h_next, h_next);
        }
        PyObject* c_next = new_array<T>({1, B, H_});
        if (c_next == nullptr) {
            Py_DECREF(h_next);
            return nullptr;
        }
        a.c_next = data_of<T>(c_next);
        gated_step(a);
        PyObject* pair = pair_of(h_next, c_next);
        return pair == nullptr ? nullptr : output_and<T>(h_next, pair);
    }

    // NumPy's descriptor of T, looked up once and kept for good (a borrowed reference).
    template <class T>
    static PyObject* descr_of() {
        static PyObject* const descr = py::dtype::of<T>().release().ptr();
        return descr;
    }

    // The tuple (a, b), stealing both references (released where the tuple cannot be made).
    static PyObject* pair_of(PyObject* a, PyObject* b) {
        PyObject* pair = PyTuple_New(2);
        if (pair == nullptr) {
            Py_DECREF(a);
            Py_DECREF(b);
            return nullptr;
        }
        PyTuple_SET_ITEM(pair, 0, a);
        PyTuple_SET_ITEM(pair, 1, b);
        return pair;
    }

    // A new C-contiguous array of T (a new reference, or null with the error set). Through
    // NumPy's C API with its descriptor looked up once: py::array_t's constructor costs several
    // times as much (a shape vector, strides, the descriptor looked up), on every step.
    template <class T>
    static PyObject* new_array(std::initializer_list<index> shape) {
        PyObject* descr = descr_of<T>();
        const auto& api = py::detail::npy_api::get();
        Py_intptr_t dims[3];
        int nd = 0;
        for (index d : shape)
            dims[nd++] = static_cast<Py_intptr_t>(d);
        Py_INCREF(descr);  // NewFromDescr steals it
        return api.PyArray_NewFromDescr_(api.PyArray_Type_, descr, nd, dims, nullptr, nullptr, 0,
                                         nullptr);
    }

    template <class T>
    static T* data_of(PyObject* array) {
        return reinterpret_cast<T*>(py::detail::array_proxy(array)->data);
    }

    // (next[0], state), stealing `state`: the step's output is a (B, R) view of the new state
    // (num_layers = 1, B, R) `next`, whose reference `state` holds (next itself, or the
    // LSTM's pair). Null with the error set where an allocation fails.
    template <class T>
    static PyObject* output_and(PyObject* next, PyObject* state) {
        PyObject* descr = descr_of<T>();
        const auto& api = py::detail::npy_api::get();
        const auto* proxy = py::detail::array_proxy(next);
        Py_INCREF(descr);
        PyObject* out = api.PyArray_NewFromDescr_(
            api.PyArray_Type_, descr, 2, proxy->dimensions + 1, proxy->strides + 1, proxy->data,
            py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_ |
                py::detail::npy_api::NPY_ARRAY_WRITEABLE_,
            nullptr);
        if (out == nullptr) {
            Py_DECREF(state);
            return nullptr;
        }
        Py_INCREF(next);
        if (api.PyArray_SetBaseObject_(out, next) != 0) {  // steals next's new reference
            Py_DECREF(out);
            Py_DECREF(state);
            return nullptr;
        }
        return pair_of(out, state);
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
    GatedCell cell_{};
    Pointwise act_ = Pointwise::tanh, rec_ = Pointwise::sigmoid;
    index D_, H_, P_, R_, GH_ = 0;
    bool double_;
    // the zero state of a call without one (read only; kept to spare an allocation per call)
    std::vector<float> zeros_f32_;
    std::vector<double> zeros_f64_;
};

// fn(x_t, state): the type's call slot itself. pybind11's dispatch of a bound __call__ (the
// slot looking __call__ up, a bound method, the overload machinery and its argument casters)
// cost about as much as the Elman kernel's step at H = 64; this is one tuple read and a pointer.
PyObject* call_step_function(PyObject* self, PyObject* args, PyObject* kwargs) {
    if (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError,
                        "StepFunction: takes (x_t, state) by position, got keyword arguments");
        return nullptr;
    }
    if (PyTuple_GET_SIZE(args) != 2) {
        PyErr_Format(PyExc_TypeError, "StepFunction: expected 2 arguments (x_t, state), got %zd",
                     PyTuple_GET_SIZE(args));
        return nullptr;
    }
    auto* fn = static_cast<StepFunction*>(
        reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder().value_ptr());
    if (fn == nullptr) {  // StepFunction.__new__ without __init__
        PyErr_SetString(PyExc_TypeError, "StepFunction: not initialised (construct it whole)");
        return nullptr;
    }
    try {
        return fn->call(PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1));
    } catch (py::error_already_set& e) {
        e.restore();
    } catch (const std::bad_alloc&) {
        PyErr_NoMemory();
    } catch (const std::exception& e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
    }
    return nullptr;
}

}  // namespace

void register_step_function(py::module_& m) {
    py::class_<StepFunction>(m, "StepFunction",
                             "A layer's streaming step bound once: fn(x_t, state) -> (out_t, "
                             "state_next), or None where the arguments are not its hot path.",
                             py::custom_type_setup([](PyHeapTypeObject* heap) {
                                 heap->ht_type.tp_call = &call_step_function;
                             }))
        .def(py::init<py::dict, const std::vector<py::object>&, const std::string&,
                      const std::string&, const std::string&, double, index, index, index,
                      const py::dtype&>(),
             py::arg("params"), py::arg("names"), py::arg("cell"), py::arg("activation"),
             py::arg("recurrent_activation"), py::arg("alpha"), py::arg("input_size"),
             py::arg("hidden_size"), py::arg("proj_size"), py::arg("dtype"))
        // A copy or a pickle of the layer holding it gets None: the copy binds its own step on
        // its own parameter dict at its first step() (the layer's _bound_step).
        .def("__reduce__",
             [](const py::object&) { return py::make_tuple(py::none().get_type(), py::tuple()); });
}

}  // namespace rnnfast::bindings
