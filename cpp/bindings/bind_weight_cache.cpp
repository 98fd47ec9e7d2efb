// The layers' packed-weight caches (runtime/weight_cache.hpp) as Python objects: a layer holds
// one per direction and hands it to the drivers (weight_cache=), and clears it whenever its
// weights may have changed.
#include <pybind11/pybind11.h>

#include "check.hpp"
#include "rnnfast/runtime/weight_cache.hpp"

namespace py = pybind11;

namespace rnnfast::bindings {

void register_weight_cache(py::module_& m) {
    py::class_<WeightCache>(m, "WeightCache",
                            "One layer direction's packed weights, kept between kernel calls. "
                            "The drivers find a pack by the weights' address, the kernel table "
                            "and the sizes; the owner calls clear() whenever the weights' values "
                            "may have changed.")
        .def(py::init<>())
        .def("clear", &WeightCache::clear, "Drop every pack: the next call packs anew.")
        .def_property_readonly("packs", &WeightCache::packs, "Packs held now.")
        .def_property_readonly("bytes", &WeightCache::bytes, "Bytes the packs hold.")
        .def_property_readonly("packs_made", &WeightCache::packs_made,
                               "Packs published since the cache was made (each a repack).");
    m.def(
        "weights_fingerprint",
        [](const py::list& arrays) {
            std::uint64_t h = 0;
            for (const py::handle& a : arrays) {
                const py::buffer_info info = py::reinterpret_borrow<py::buffer>(a).request();
                RNNFAST_CHECK(info.ndim == 0 || info.strides.back() == info.itemsize, "arrays",
                              "C-contiguous buffers", "a strided one");
                const auto bytes = static_cast<std::size_t>(info.size * info.itemsize);
                py::gil_scoped_release release;
                h = fingerprint(info.ptr, bytes, h * 31 + bytes);
            }
            return h;
        },
        py::arg("arrays"),
        "A 64-bit fingerprint of the arrays' bytes (C-contiguous), for a cache's owner that "
        "cannot see every write to them; any change alters it but with probability 2^-64.");
}

}  // namespace rnnfast::bindings
