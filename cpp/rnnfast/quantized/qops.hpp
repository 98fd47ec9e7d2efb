// The quantized operations the bindings call: path choice, activation quantization, products
// and the recurrent forward. Number formats: the contract in issue 16 (and
// tests/quantized_model.py, their NumPy model).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qlayout.hpp"
#include "rnnfast/drivers/gated.hpp"

namespace rnnfast::quantized {

// ---- paths ------------------------------------------------------------------------------------
// All paths this CPU runs, lowest first: baseline, avx2, avx_vnni, avx512_vnni, avx512_bf16,
// amx. A path serves int8, bf16 or both; for a kind, a path that does not serve it stands for the
// highest lower one that does (avx512_vnni for bf16 is avx2).
std::vector<std::string> runnable_paths();
std::vector<std::string> runnable_paths(Kind kind);  // those that serve `kind`
std::string path_name(Kind kind);                    // the path used now
// "" returns to the automatic choice, which follows the active float ISA (an avx2 float ISA
// never gets an AVX-512 or AMX path). Throws std::invalid_argument for a path not runnable.
void set_path(const std::string& name);
const QuantKernels& active_kernels(Kind kind);

// ---- activations ------------------------------------------------------------------------------
// Rows of x (M x K, row-major) to int8 with the dynamic per-row scale, on the active int8 path
// (RowOps::quantize; a row with a non-finite value gets scale NaN and q = 0).
void quantize_rows(const float* x, index M, index K, std::int8_t* q, float* scale);

// ---- products ---------------------------------------------------------------------------------
// acc (M x N, int32) = qa (M x K int8, row-major) . w^T, w of kind int8.
void matmul_int32(const std::int8_t* qa, index M, const PackedMatrix& w, std::int32_t* acc);
// y (M x N) = Q(x) . w^T dequantized, + bias (N, or null).
void dense(const float* x, index M, const PackedMatrix& w, const float* bias, float* y);

struct ForwardArgs {
    index steps = 0, batch = 0, input_size = 0, hidden_size = 0;
    const float* x = nullptr;            // (T, B, D)
    const float* h0 = nullptr;           // (B, H) or null (zeros)
    const PackedMatrix* w_ih = nullptr;  // H x D
    const PackedMatrix* w_hh = nullptr;  // H x H, same kind
    const float* bias = nullptr;         // (H) or null: b_ih + b_hh
    const index* lengths = nullptr;      // (B) non-increasing, in [0, T], or null
    Activation act = Activation::tanh;
    float alpha = 1.0f;
    float* y = nullptr;    // (T, B, H) or null
    float* h_n = nullptr;  // (B, H)
};
void rnn_forward(const ForwardArgs& args);

// A gated layer's quantized weights: W_ih (G*H x D) and W_hh packed with gates = G (rows in the
// gate layout); for the reset_before GRU, W_hh holds the r and z rows (gates = 2) and w_hn the
// n rows (H x H, gates = 1); the projected LSTM's W_hr (P x H, gates = 1).
struct GatedWeights {
    const PackedMatrix* w_ih = nullptr;
    const PackedMatrix* w_hh = nullptr;
    const PackedMatrix* w_hn = nullptr;
    const PackedMatrix* w_hr = nullptr;
};
// The gated forward (GRU, LSTM) over a sequence with quantized products: the float driver's
// arguments (drivers/gated.hpp; its weight pointers unused, b_ih and b_hh float32) without
// token ids, general masks or dropout, which the callers refuse. The gates, the cell's
// epilogue and the states are float32, by the float cells' own code (cells/gru.hpp, lstm.hpp).
void gated_forward(const GatedForwardArgs<float>& args, const GatedWeights& weights);

}  // namespace rnnfast::quantized
