// The sequence input of the recurrent bindings, checked: x (T, B, D), or token ids with their
// embedding table.
#pragma once

#include <cstdint>
#include <string>

#include "check.hpp"

namespace rnnfast::bindings {

// The sequence input: x (T, B, D), or with token ids (T, B) int64, x is an embedding table
// (vocab, D) whose rows the ids pick (each id checked: it selects the row the kernel reads).
template <class T>
struct SequenceInput {
    index steps = 0, batch = 0, vocab = 0;
    const T* x = nullptr;
    const std::int64_t* ids = nullptr;
};

template <class T>
SequenceInput<T> sequence_input(const py::array& x, const py::object& ids, index D) {
    SequenceInput<T> in;
    if (ids.is_none()) {
        require_ndim(x, "x", 3, "(T, B, D)");
        in.steps = x.shape(0);
        in.batch = x.shape(1);
        in.x = checked<T>(x, "x", {in.steps, in.batch, D}, "(T, B, D)").data();
        return in;
    }
    require_ndim(ids, "ids", 2, "(T, B)");
    auto id_arr = py::reinterpret_borrow<py::array>(ids);
    if (!has_dtype<std::int64_t>(id_arr))
        throw py::type_error("ids: expected dtype int64, got " +
                             std::string(py::str(id_arr.dtype())));
    in.steps = id_arr.shape(0);
    in.batch = id_arr.shape(1);
    in.ids = checked<std::int64_t>(id_arr, "ids", {in.steps, in.batch}, "(T, B)").data();
    require_ndim(x, "x", 2, "(vocab, D) with ids");
    in.vocab = x.shape(0);
    in.x = checked<T>(x, "x", {in.vocab, D}, "(vocab, D) with ids").data();
    const index n = in.steps * in.batch;
    for (index i = 0; i < n; ++i)
        RNNFAST_CHECK(in.ids[i] >= 0 && in.ids[i] < in.vocab, "ids",
                      "values in [0, vocab) = [0, " + std::to_string(in.vocab) + ")",
                      std::to_string(in.ids[i]));
    return in;
}

}  // namespace rnnfast::bindings
