// Bindings of the run-time configuration: ISA dispatch and threads.
#include "check.hpp"
#include "rnnfast/runtime/cache_info.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/products.hpp"
#include "rnnfast/runtime/step_barrier.hpp"
#include "rnnfast/runtime/threads.hpp"

#include <pybind11/stl.h>

// A C interface to the thread count, exported from the module so that threadpoolctl (which
// controls libraries through ctypes, by their exported symbols) can list and limit rnnfast
// beside OpenBLAS and OpenMP; python/rnnfast/_threadpool.py registers the controller.
extern "C" {
__attribute__((visibility("default"))) int rnnfast_get_num_threads() {
    return rnnfast::get_num_threads();
}
__attribute__((visibility("default"))) void rnnfast_set_num_threads(int n) {
    if (n >= 1) rnnfast::set_num_threads(n);  // no exception may cross into C callers
}
}

namespace rnnfast::bindings {

void register_config(py::module_& m) {
    m.def("compiled_isas", &compiled_isas, "ISAs whose kernels are built into this module.");
    m.def("supported_isas", &supported_isas, "Compiled ISAs this CPU can run, lowest first.");
    m.def("active_isa", &active_isa, "The ISA whose kernels run now.");
    m.def("isa_note", &isa_note, "Why RNNFAST_ISA was not honoured, or ''.");
    m.def("set_active_isa", &set_active_isa, py::arg("name"),
          "Switch the kernels to a supported ISA (for tests and benchmarks).");
    m.def(
        "set_thread_products",
        [](const std::string& name) {
            const std::string before = thread_products() == Products::bf16 ? "bf16" : "float32";
            if (name == "bf16")
                set_thread_products(Products::bf16);
            else if (name == "float32")
                set_thread_products(Products::float32);
            else
                throw py::value_error("precision: expected 'float32' or 'bf16', got '" + name +
                                      "'");
            return before;
        },
        py::arg("precision"),
        "Set the products of this thread's float32 kernel calls ('float32' or 'bf16': bf16 "
        "operands, float32 sums); returns the previous choice. RuntimeError where this CPU has "
        "no bf16 products (see bf16_products_path).");
    m.def(
        "thread_products", [] { return thread_products() == Products::bf16 ? "bf16" : "float32"; },
        "This thread's products: 'float32' or 'bf16'.");
    m.def("bf16_products_path", &bf16_products_path,
          "Where bf16 products run: 'amx', 'avx512_bf16', 'emulated' (the test switch), or '' "
          "(none).");
    m.def("bf16_unavailable_reason", &bf16_unavailable_reason,
          "Why this machine has no bf16 products, or '' where it has them.");
    m.def("set_bf16_emulation", &set_bf16_emulation, py::arg("on"),
          "Test-only: bf16 products by rounding in software on the active ISA (any CPU).");
    m.def("bf16_emulation", &bf16_emulation);
    m.def("set_bf16_path", &set_bf16_path, py::arg("path"),
          "Test-only: '' (automatic), 'emulated', or a native bf16 path this CPU runs.");
    m.def(
        "round_to_bf16",
        [](py::array_t<float, py::array::c_style | py::array::forcecast> x) {
            py::array_t<float> out(x.request().shape);
            const float* in = x.data();
            float* o = out.mutable_data();
            for (py::ssize_t i = 0; i < x.size(); ++i)
                o[i] = round_to_bf16(in[i]);
            return out;
        },
        py::arg("x"), "x rounded to bf16 (to nearest even) as float32: the products' model.");
    m.def("get_num_threads", &get_num_threads);
    m.def(
        "last_pass_threads",
        [] {
            const PassThreads used = last_pass_threads();
            return py::make_tuple(used.stepping, used.team);
        },
        "(stepping, team): the threads the latest recurrent pass on this thread stepped with, "
        "and its region's team (0, 0 before any); the thread count a layer chose for a shape.");
    m.def("set_num_threads", &set_num_threads, py::arg("n"));
    m.def("openmp_enabled", &openmp_enabled);
    m.def("helper_threads_in_use", &helper_threads_in_use,
          "Helper threads claimed by the kernel calls running now (for tests).");
    m.def("contention_backoff_seconds", &contention_backoff_seconds,
          "Seconds left of the contention back-off (one thread), 0 when none.");
    m.def("clear_contention_backoff", &clear_contention_backoff, "End the back-off (for tests).");
    m.def("peak_helper_threads", &peak_helper_threads, py::arg("reset") = false,
          "Most helper threads claimed at once since the last reset (for tests).");
    m.def(
        "cache_sizes",
        [] {
            const CacheSizes& c = cache_sizes();
            py::dict d;
            d["l1d"] = c.l1d;
            d["l2"] = c.l2;
            d["l3"] = c.l3;
            d["source"] = c.source;
            return d;
        },
        "Bytes of each data cache per core, as the GEMM's blocking reads them.");
    m.def(
        "gemm_blocking",
        [](bool float64) {
            py::dict d;
            auto fill = [&](auto& kt) {
                const GemmBlocking b = kt.blocking();
                d["isa"] = kt.isa;
                d["mr"] = kt.mr;
                d["nr"] = kt.nr;
                d["kc"] = b.kc;
                d["mc"] = b.mc;
                d["nc"] = b.nc;
                d["kc_step"] = b.kc_step;
            };
            if (float64)
                fill(kernels<double>());
            else
                fill(kernels<float>());
            return d;
        },
        py::arg("float64") = false,
        "The active ISA's register tile (mr x nr) and cache blocks (kc, mc, nc) for one dtype.");
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
