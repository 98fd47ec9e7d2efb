// Bindings of the fused softmax cross-entropy (python/rnnfast/losses.py prepares its weights).
#include <cstdint>

#include "check.hpp"
#include "rnnfast/ops/softmax.hpp"
#include "rnnfast/runtime/threads.hpp"

namespace rnnfast::bindings {
namespace {

template <class T>
py::tuple softmax_xent_impl(const py::array& logits, const py::array& targets,
                            const py::array& weights) {
    if (logits.ndim() != 2)
        throw std::invalid_argument("logits: expected shape (rows, classes), got shape " +
                                    shape_str(logits));
    const index rows = logits.shape(0), classes = logits.shape(1);
    const T* lp = checked<T>(logits, "logits", {rows, classes}, "(rows, classes)").data();
    const T* wp = checked<T>(weights, "weights", {rows}, "(rows,)").data();
    if (!py::isinstance<py::array_t<std::int64_t>>(targets))
        throw py::type_error("targets: expected an int64 array");
    const std::int64_t* tp = checked<std::int64_t>(targets, "targets", {rows}, "(rows,)").data();
    for (index r = 0; r < rows; ++r)  // a weighted row's target is read: it must be a class
        RNNFAST_CHECK(wp[r] == T(0) || (tp[r] >= 0 && tp[r] < classes), "targets",
                      "class ids in [0, " + std::to_string(classes) + ")",
                      std::to_string(tp[r]) + " at row " + std::to_string(r));
    py::array_t<T> grad({rows, classes});
    T* gp = grad.mutable_data();
    double loss = 0.0;
    {
        py::gil_scoped_release release;  // the arrays above outlive the call
        const ThreadShare share;         // concurrent calls split the thread budget
        loss = softmax_cross_entropy(lp, rows, classes, tp, wp, gp);
    }
    return py::make_tuple(loss, grad);
}

}  // namespace

void register_losses(py::module_& m) {
    m.def(
        "softmax_cross_entropy",
        [](const py::array& logits, const py::array& targets, const py::array& weights) {
            if (has_dtype<float>(logits)) return softmax_xent_impl<float>(logits, targets, weights);
            if (has_dtype<double>(logits))
                return softmax_xent_impl<double>(logits, targets, weights);
            throw py::type_error("logits: expected dtype float32 or float64");
        },
        py::arg("logits"), py::arg("targets"), py::arg("weights"),
        "(sum of weights[r] * -log softmax(logits[r])[targets[r]], gradient) in one pass.");
}

}  // namespace rnnfast::bindings
