// Plain data types shared by the kernels, the drivers and the bindings. No Python here.
#pragma once

#include <cstddef>

namespace rnnfast {

using index = std::ptrdiff_t;

enum class Activation { tanh, relu };

// The element-wise functions of the gated cells' gates (KernelTable::activate): the activation
// (tanh or relu) and the recurrent activation (sigmoid, or Keras 3's hard_sigmoid,
// clip(x / 6 + 0.5, 0, 1)).
enum class Pointwise { sigmoid, hard_sigmoid, tanh, relu };

// What a GEMM does to each finished output element (x = sum + C-or-bias) before storing it.
// The *_grad forms multiply by the activation's derivative, recovered from the stored output
// `aux` (1 - h^2 for tanh, h > 0 for relu), so backward never needs pre-activations.
enum class Epilogue { none, tanh, relu, tanh_grad, relu_grad };

inline Epilogue forward_epilogue(Activation a) {
    return a == Activation::tanh ? Epilogue::tanh : Epilogue::relu;
}
inline Epilogue gradient_epilogue(Activation a) {
    return a == Activation::tanh ? Epilogue::tanh_grad : Epilogue::relu_grad;
}

// One thread's block of a (rows x columns) step: rows [m0, m1) and columns [c0, c1).
struct Block {
    index m0, m1, c0, c1;
};

// A strided matrix view: element (i, j) lives at p[i * rs + j * cs]. Transposes are views.
template <class T>
struct MatView {
    const T* p;
    index rs;
    index cs;
    MatView transposed() const { return {p, cs, rs}; }
};

// One GEMM C[M x N] (=|+=) A[M x K] * B[K x N], where B has already been packed into panels
// of `nr` columns (see KernelTable::pack_b). The epilogue runs once per element, after the
// whole K sum: x = acc + (accumulate ? C : 0) + (bias ? bias[j] : 0), then op(x, aux).
template <class T>
struct GemmTask {
    index M = 0, N = 0, K = 0;
    MatView<T> A{nullptr, 0, 0};
    const T* packed_b = nullptr;  // K x round_up(N, nr), panel-major
    T* C = nullptr;
    index ldc = 0;
    bool accumulate = false;  // add the existing C (beta = 1) instead of overwriting it
    const T* bias = nullptr;  // length N, or null
    Epilogue op = Epilogue::none;
    const T* aux = nullptr;  // stored outputs for the *_grad epilogues, leading dim ldaux
    index ldaux = 0;
};

}  // namespace rnnfast
