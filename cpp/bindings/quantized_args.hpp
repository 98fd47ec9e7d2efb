// What the quantized bindings share: the kind names, QuantizedMatrix arguments and float32
// biases, checked with the errors that name the argument (bind_quantized.cpp,
// bind_quantized_gated.cpp).
#pragma once

#include <string>
#include <utility>

#include "check.hpp"
#include "rnnfast/quantized/qops.hpp"

namespace rnnfast::bindings {

namespace q = rnnfast::quantized;

inline q::Kind parse_kind(const std::string& kind) {
    if (kind == "int8") return q::Kind::int8;
    if (kind == "bf16") return q::Kind::bf16;
    throw std::invalid_argument("kind: expected 'int8' or 'bf16', got '" + kind + "'");
}
inline const char* kind_name(q::Kind kind) {
    return kind == q::Kind::int8 ? "int8" : "bf16";
}

// A 2-D array's shape, after checking it is an array of 2 dimensions.
inline std::pair<index, index> shape2(const py::handle& obj, const char* name, const char* dims) {
    require_ndim(obj, name, 2, dims);
    auto arr = py::reinterpret_borrow<py::array>(obj);
    return {arr.shape(0), arr.shape(1)};
}

inline const q::PackedMatrix& matrix_arg(const py::handle& obj, const char* name) {
    if (!py::isinstance<q::PackedMatrix>(obj))
        throw py::type_error(std::string(name) + ": expected a QuantizedMatrix, got " +
                             std::string(py::str(obj.get_type().attr("__name__"))));
    return obj.cast<const q::PackedMatrix&>();
}

inline const float* bias_arg(const py::object& bias, index N) {
    return bias.is_none() ? nullptr : checked<float>(bias, "bias", {N}, "(N,)").data();
}

// A matrix's rows in the order a caller reads them: `gates` gate groups in the gate layout
// (a gated layer's), or 1 for rows as given (Linear, the Elman layer, a projection).
inline void require_gates(const q::PackedMatrix& w, const char* name, int gates) {
    RNNFAST_CHECK(w.gates == gates, name,
                  "a QuantizedMatrix made with gates=" + std::to_string(gates),
                  "gates=" + std::to_string(w.gates));
}

}  // namespace rnnfast::bindings
