// The `weight_cache` argument of the sequence drivers' bindings: None, or the layer's
// _core.WeightCache (bind_weight_cache.cpp), which the drivers read packed weights from.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "rnnfast/runtime/weight_cache.hpp"

namespace rnnfast::bindings {

namespace py = pybind11;

inline WeightCache* weight_cache_arg(const py::object& cache) {
    if (cache.is_none()) return nullptr;
    if (!py::isinstance<WeightCache>(cache))
        throw py::type_error("weight_cache: expected None or a rnnfast._core.WeightCache, got " +
                             std::string(py::str(py::type::of(cache).attr("__name__"))));
    return cache.cast<WeightCache*>();
}

}  // namespace rnnfast::bindings
