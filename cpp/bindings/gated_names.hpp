// The names the gated bindings take for a cell and its gate functions, parsed with the error
// that names the argument (bind_gated.cpp, bind_quantized_gated.cpp).
#pragma once

#include <stdexcept>
#include <string>

#include "rnnfast/drivers/gated.hpp"
#include "rnnfast/runtime/kernel_table.hpp"

namespace rnnfast::bindings {

inline GatedCell parse_cell(const std::string& name) {
    return parse_gated_cell(name);
}
inline Pointwise parse_activation_fn(const std::string& name) {
    if (name == "tanh") return Pointwise::tanh;
    if (name == "relu") return Pointwise::relu;
    throw std::invalid_argument("activation: expected 'tanh' or 'relu', got '" + name + "'");
}

inline Pointwise parse_recurrent_activation(const std::string& name) {
    if (name == "sigmoid") return Pointwise::sigmoid;
    if (name == "hard_sigmoid") return Pointwise::hard_sigmoid;
    throw std::invalid_argument(
        "recurrent_activation: expected 'sigmoid' or 'hard_sigmoid', got '" + name + "'");
}

}  // namespace rnnfast::bindings
