// Argument checks for the bindings. Every message has one form: argument, expected, received.
// std::invalid_argument becomes ValueError in Python; TypeErrors are raised as py::type_error.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "rnnfast/runtime/types.hpp"

namespace rnnfast::bindings {

namespace py = pybind11;

inline std::string shape_str(const py::array& a) {
    std::string s = "(";
    for (py::ssize_t i = 0; i < a.ndim(); ++i) {
        if (i) s += ", ";
        s += std::to_string(a.shape(i));
    }
    return s + (a.ndim() == 1 ? ",)" : ")");
}

#define RNNFAST_CHECK(cond, arg, expected, received)                                               \
    do {                                                                                           \
        if (!(cond))                                                                               \
            throw std::invalid_argument(std::string(arg) + ": expected " + (expected) + ", got " + \
                                        (received));                                               \
    } while (0)

// Is `a` of dtype T in native byte order? NumPy hands out one descriptor object per builtin
// dtype, which most arrays of T carry: comparing with it first skips a call into NumPy per
// argument (step() checks six arrays on every call); any other descriptor gets the full test.
template <class T>
bool has_dtype(const py::array& a) {
    static PyObject* const native = py::dtype::of<T>().release().ptr();  // kept alive for good
    if (py::detail::array_proxy(a.ptr())->descr == native) return true;
    return py::isinstance<py::array_t<T>>(a);
}

// The data of `obj` where it is an array of T, C-contiguous, of exactly `shape`; else null. The
// one test of what `checked` accepts, without its messages: the bound step (bind_step_function)
// sends a null to the layer's general path, which names the problem.
template <class T>
const T* fitting(const py::handle& obj, std::initializer_list<index> shape) {
    if (!obj || !py::isinstance<py::array>(obj)) return nullptr;
    const auto arr = py::reinterpret_borrow<py::array>(obj);
    if (!has_dtype<T>(arr) || arr.ndim() != static_cast<py::ssize_t>(shape.size())) return nullptr;
    py::ssize_t i = 0;
    for (index d : shape)
        if (arr.shape(i++) != d) return nullptr;
    if (!(arr.flags() & py::array::c_style)) return nullptr;
    return static_cast<const T*>(arr.data());
}

// A float array of dtype T, C-contiguous, with exactly the given shape (fitting); otherwise a
// TypeError or ValueError that says which of those it is not.
template <class T>
py::array_t<T> checked(const py::handle& obj, const char* name, std::initializer_list<index> shape,
                       const char* dims) {
    if (fitting<T>(obj, shape)) return py::reinterpret_borrow<py::array_t<T>>(obj);
    if (!py::isinstance<py::array>(obj))
        throw py::type_error(std::string(name) + ": expected a numpy array, got " +
                             std::string(py::str(obj.get_type().attr("__name__"))));
    auto arr = py::reinterpret_borrow<py::array>(obj);
    if (!has_dtype<T>(arr))
        throw py::type_error(std::string(name) + ": expected dtype " +
                             std::string(py::str(py::dtype::of<T>())) + ", got " +
                             std::string(py::str(arr.dtype())));
    bool ok = arr.ndim() == static_cast<py::ssize_t>(shape.size());
    if (ok) {
        py::ssize_t i = 0;
        for (index d : shape)
            ok = ok && arr.shape(i++) == d;
    }
    if (!ok) {  // the message is built only when needed: this runs on every call of step()
        std::string expected = std::string("shape ") + dims + " = (";
        bool first = true;
        for (index d : shape) {
            expected += (first ? "" : ", ") + std::to_string(d);
            first = false;
        }
        expected += shape.size() == 1 ? ",)" : ")";
        RNNFAST_CHECK(false, name, expected, "shape " + shape_str(arr));
    }
    RNNFAST_CHECK(arr.flags() & py::array::c_style, name, "a C-contiguous array",
                  "a non-contiguous one");
    return py::reinterpret_borrow<py::array_t<T>>(arr);
}

// An optional float array (None: null), checked as `checked` does.
template <class T>
const T* optional_data(const py::object& obj, const char* name, std::initializer_list<index> shape,
                       const char* dims) {
    if (obj.is_none()) return nullptr;
    return checked<T>(obj, name, shape, dims).data();
}

// The one point where the dtype picks the template: the weights' dtype is the layer's.
template <class F32, class F64>
auto by_dtype(const py::array& w_ih, F32 f32, F64 f64) -> decltype(f32()) {
    if (has_dtype<float>(w_ih)) return f32();
    if (has_dtype<double>(w_ih)) return f64();
    throw py::type_error("weight_ih: expected dtype float32 or float64, got " +
                         std::string(py::str(w_ih.dtype())));
}

// Product of sizes, refusing results that would overflow an index.
inline index checked_product(std::initializer_list<index> sizes, const char* what) {
    index total = 1;
    for (index s : sizes) {
        if (s != 0 && total > PTRDIFF_MAX / 16 / s)
            throw std::invalid_argument(std::string(what) +
                                        ": expected a size that fits in memory, got " +
                                        "a product of sizes beyond 2^59 elements");
        total *= s;
    }
    return total;
}

// The options shared by the recurrent bindings (float and quantized).
inline Activation parse_activation(const std::string& name) {
    if (name == "tanh") return Activation::tanh;
    if (name == "relu") return Activation::relu;
    throw std::invalid_argument("nonlinearity: expected 'tanh' or 'relu', got '" + name + "'");
}

inline void check_alpha(double alpha) {
    RNNFAST_CHECK(alpha > 0.0 && alpha <= 1.0, "alpha", "a leak rate in (0, 1]",
                  std::to_string(alpha));
}

inline void require_ndim(const py::handle& obj, const char* name, py::ssize_t ndim,
                         const char* dims) {
    if (!py::isinstance<py::array>(obj))
        throw py::type_error(std::string(name) + ": expected a numpy array, got " +
                             std::string(py::str(obj.get_type().attr("__name__"))));
    auto arr = py::reinterpret_borrow<py::array>(obj);
    RNNFAST_CHECK(arr.ndim() == ndim, name, std::to_string(ndim) + " dimensions " + dims,
                  "shape " + shape_str(arr));
}

// Lengths of a padded batch: int64 (B,), non-increasing (longest first), each in [0, T].
inline const index* sorted_lengths(const py::object& obj, index steps, index batch) {
    if (obj.is_none()) return nullptr;
    auto arr = checked<std::int64_t>(obj, "lengths", {batch}, "(B,)");
    const std::int64_t* l = arr.data();
    for (index b = 0; b < batch; ++b) {
        RNNFAST_CHECK(l[b] >= 0 && l[b] <= steps, "lengths",
                      "values in [0, T] = [0, " + std::to_string(steps) + "]",
                      std::to_string(l[b]));
        RNNFAST_CHECK(b == 0 || l[b] <= l[b - 1], "lengths",
                      "non-increasing lengths (sorted, longest first)", "an unsorted array");
    }
    static_assert(sizeof(index) == sizeof(std::int64_t), "lengths are passed as int64");
    return reinterpret_cast<const index*>(l);
}

}  // namespace rnnfast::bindings
