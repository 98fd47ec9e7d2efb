// Bindings of the run-time configuration: ISA dispatch and threads.
#include "check.hpp"
#include "rnnfast/dispatch.hpp"
#include "rnnfast/threads.hpp"

#include <pybind11/stl.h>

namespace rnnfast::bindings {

void register_config(py::module_& m) {
    m.def("compiled_isas", &compiled_isas, "ISAs whose kernels are built into this module.");
    m.def("supported_isas", &supported_isas, "Compiled ISAs this CPU can run, lowest first.");
    m.def("active_isa", &active_isa, "The ISA whose kernels run now.");
    m.def("isa_note", &isa_note, "Why RNNFAST_ISA was not honoured, or ''.");
    m.def("set_active_isa", &set_active_isa, py::arg("name"),
          "Switch the kernels to a supported ISA (for tests and benchmarks).");
    m.def("get_num_threads", &get_num_threads);
    m.def("set_num_threads", &set_num_threads, py::arg("n"));
    m.def("openmp_enabled", &openmp_enabled);
    m.attr("compiler") =
#if defined(__clang__)
        "clang " __clang_version__;
#elif defined(__GNUC__)
        "gcc " __VERSION__;
#else
        "unknown";
#endif
}

}  // namespace rnnfast::bindings
