// The one place where a gated cell's name becomes a policy: the bindings parse a name into a
// GatedCell, and with_gated_cell turns it into the cell's type, with which each driver
// instantiates its pass. Nothing else tests which cell runs (cells/gated_cell.hpp lists what
// the passes ask a cell instead).
#pragma once

#include <stdexcept>
#include <string>

#include "gru.hpp"
#include "layer_norm_lstm.hpp"
#include "lstm.hpp"
#include "lstm_forms.hpp"
#include "rnnfast/runtime/types.hpp"

namespace rnnfast {

// GRU: PyTorch's form (reset gate after the recurrent product; Keras's reset_after=True,
// ONNX's linear_before_reset=1) or Keras's reset_after=False (the reset gate scales h_{t-1}
// before its product). LSTM: PyTorch's, with an optional projection h_t = W_hr (o * act(c_t)).
// layer_norm_lstm: torchaudio's LayerNorm LSTM (cells/layer_norm_lstm.hpp). The LSTM's ONNX
// forms (cells/lstm_forms.hpp): "lstm" with "_peepholes", "_input_forget", "_clip" in that order,
// each combination its own policy, LstmFormCell<T, options>, options = the enum's value - 3.
enum class GatedCell {
    gru,
    gru_reset_before,
    lstm,
    layer_norm_lstm,
    lstm_peepholes,
    lstm_input_forget,
    lstm_peepholes_input_forget,
    lstm_clip,
    lstm_peepholes_clip,
    lstm_input_forget_clip,
    lstm_peepholes_input_forget_clip,
};

// The cells the gated drivers run, by the names the bindings take (kGatedCellNames[cell]).
constexpr const char* kGatedCellNames[] = {"gru",
                                           "gru_reset_before",
                                           "lstm",
                                           "layer_norm_lstm",
                                           "lstm_peepholes",
                                           "lstm_input_forget",
                                           "lstm_peepholes_input_forget",
                                           "lstm_clip",
                                           "lstm_peepholes_clip",
                                           "lstm_input_forget_clip",
                                           "lstm_peepholes_input_forget_clip"};
constexpr int kGatedCellCount = sizeof(kGatedCellNames) / sizeof(kGatedCellNames[0]);

inline GatedCell parse_gated_cell(const std::string& name) {
    for (int i = 0; i < kGatedCellCount; ++i)
        if (name == kGatedCellNames[i]) return static_cast<GatedCell>(i);
    std::string names;
    for (int i = 0; i < kGatedCellCount; ++i)
        names += std::string(i ? ", '" : "'") + kGatedCellNames[i] + "'";
    throw std::invalid_argument("cell: expected one of " + names + ", got '" + name + "'");
}

// f(Cell{}) with the policy of `cell` for elements T.
template <class T, class F>
decltype(auto) with_gated_cell(GatedCell cell, F&& f) {
    switch (cell) {
        case GatedCell::gru_reset_before:
            return f(GruResetBeforeCell<T>{});
        case GatedCell::lstm:
            return f(LstmCell<T>{});
        case GatedCell::layer_norm_lstm:
            return f(LayerNormLstmCell<T>{});
        case GatedCell::lstm_peepholes:
            return f(LstmFormCell<T, 1>{});
        case GatedCell::lstm_input_forget:
            return f(LstmFormCell<T, 2>{});
        case GatedCell::lstm_peepholes_input_forget:
            return f(LstmFormCell<T, 3>{});
        case GatedCell::lstm_clip:
            return f(LstmFormCell<T, 4>{});
        case GatedCell::lstm_peepholes_clip:
            return f(LstmFormCell<T, 5>{});
        case GatedCell::lstm_input_forget_clip:
            return f(LstmFormCell<T, 6>{});
        case GatedCell::lstm_peepholes_input_forget_clip:
            return f(LstmFormCell<T, 7>{});
        case GatedCell::gru:
            break;
    }
    return f(GruCell<T>{});
}

// A cell's counts, for the bindings' shape checks (any element type gives the same).
struct GatedCellCounts {
    int states, gates, step_gates, stored;
    bool projects, second_product;
    int params;  // the cell's own parameters, in units of H (cell_params: params * H)
};
inline GatedCellCounts gated_cell_counts(GatedCell cell) {
    return with_gated_cell<float>(cell, [](auto c) {
        using C = decltype(c);
        return GatedCellCounts{C::kStates,   C::kGates,         C::kStepGates,   C::kStored,
                               C::kProjects, C::kSecondProduct, cell_params<C>()};
    });
}

// Gate groups of a cell (3 or 4): the width of the input projection is gates * H.
inline int gate_count(GatedCell cell) {
    return gated_cell_counts(cell).gates;
}
// What the forward keeps per step and row for the backward (the gates after their activations,
// and the GRU's recurrent n-term (reset_after) or the LSTM's c_t).
inline index workspace_width(GatedCell cell, index hidden) {
    return gated_cell_counts(cell).stored * hidden;
}

}  // namespace rnnfast
