// Bindings of the fused optimizer updates (python/rnnfast/optim.py computes the step's scalars).
#include "check.hpp"
#include "rnnfast/ops/optim.hpp"
#include "rnnfast/runtime/threads.hpp"

namespace rnnfast::bindings {
namespace {

template <class T>
T* writeable_data(const py::array& a, const char* name, index n) {
    auto arr = checked<T>(a, name, {n}, "(n,), like the parameter");
    RNNFAST_CHECK(arr.writeable(), name, "a writeable array", "a read-only one");
    return arr.mutable_data();
}

template <class T>
void adam_impl(const py::array& param, const py::array& grad, const py::array& exp_avg,
               const py::array& exp_avg_sq, const AdamStep& s) {
    RNNFAST_CHECK(param.ndim() == 1, "param", "a flat (n,) array", "shape " + shape_str(param));
    const index n = param.shape(0);
    T* p = writeable_data<T>(param, "param", n);
    const T* g = checked<T>(grad, "grad", {n}, "(n,), like the parameter").data();
    T* m = writeable_data<T>(exp_avg, "exp_avg", n);
    T* v = writeable_data<T>(exp_avg_sq, "exp_avg_sq", n);
    py::gil_scoped_release release;  // the arrays outlive the call
    const ThreadShare share;         // concurrent calls split the thread budget
    adam_update(p, g, m, v, n, s);
}

}  // namespace

void register_optim(py::module_& m) {
    m.def(
        "adam_update",
        [](const py::array& param, const py::array& grad, const py::array& exp_avg,
           const py::array& exp_avg_sq, double lr, double beta1, double beta2, double eps,
           double weight_decay, bool decoupled, double step_size, double bias2_sqrt) {
            const AdamStep s{lr, beta1, beta2, eps, weight_decay, decoupled, step_size, bias2_sqrt};
            if (has_dtype<float>(param))
                return adam_impl<float>(param, grad, exp_avg, exp_avg_sq, s);
            if (has_dtype<double>(param))
                return adam_impl<double>(param, grad, exp_avg, exp_avg_sq, s);
            throw py::type_error("param: expected dtype float32 or float64");
        },
        py::arg("param"), py::arg("grad"), py::arg("exp_avg"), py::arg("exp_avg_sq"), py::arg("lr"),
        py::arg("beta1"), py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"),
        py::arg("decoupled"), py::arg("step_size"), py::arg("bias2_sqrt"),
        "One Adam/AdamW step over flat arrays, in place.");
}

}  // namespace rnnfast::bindings
