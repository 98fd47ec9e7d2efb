// The compiled module rnnfast._core: it only registers the binding areas.
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace rnnfast::bindings {
void register_rnn(py::module_& m);
void register_gated(py::module_& m);
void register_config(py::module_& m);
void register_dense(py::module_& m);
void register_losses(py::module_& m);
void register_optim(py::module_& m);
void register_quantized(py::module_& m);
void register_quantized_gated(py::module_& m);
void register_deep(py::module_& m);
void register_step_function(py::module_& m);
void register_weight_cache(py::module_& m);
}  // namespace rnnfast::bindings

PYBIND11_MODULE(_core, m) {
    m.doc() = "rnnfast compiled kernels (private; use the rnnfast package)";
    rnnfast::bindings::register_weight_cache(m);  // first: the drivers' bindings take one
    rnnfast::bindings::register_rnn(m);
    rnnfast::bindings::register_gated(m);
    rnnfast::bindings::register_config(m);
    rnnfast::bindings::register_dense(m);
    rnnfast::bindings::register_losses(m);
    rnnfast::bindings::register_optim(m);
    rnnfast::bindings::register_quantized(m);
    rnnfast::bindings::register_quantized_gated(m);
    rnnfast::bindings::register_deep(m);
    rnnfast::bindings::register_step_function(m);
}
