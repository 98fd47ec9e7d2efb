// The Adam / AdamW parameter update as one pass over the arrays. No Python here.
#pragma once

#include "rnnfast/runtime/types.hpp"

namespace rnnfast {

// Scalars of one Adam step, computed once per step by the caller (in double, as Python does).
struct AdamStep {
    double lr, beta1, beta2, eps, weight_decay;
    bool decoupled;     // AdamW: p *= 1 - lr * weight_decay; Adam: g += weight_decay * p
    double step_size;   // lr / (1 - beta1^t)
    double bias2_sqrt;  // sqrt(1 - beta2^t)
};

// In place over n elements: m += (1 - b1)(g - m); v = v b2 + g^2 (1 - b2);
// p -= step_size * (m / (sqrt(v) / bias2_sqrt + eps)), each operation rounded to T in this order
// (torch.optim.Adam's order; built without FMA contraction, so results are reproducible).
template <class T>
void adam_update(T* p, const T* g, T* m, T* v, index n, const AdamStep& s);

}  // namespace rnnfast
