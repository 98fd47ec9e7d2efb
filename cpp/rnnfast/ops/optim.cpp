#include "optim.hpp"

#include <cmath>

#include "rnnfast/runtime/threads.hpp"

namespace rnnfast {

template <class T>
void adam_update(T* p, const T* g, T* m, T* v, index n, const AdamStep& s) {
    const T one_minus_b1 = static_cast<T>(1.0 - s.beta1), b2 = static_cast<T>(s.beta2),
            one_minus_b2 = static_cast<T>(1.0 - s.beta2), eps = static_cast<T>(s.eps),
            step_size = static_cast<T>(s.step_size), bias2_sqrt = static_cast<T>(s.bias2_sqrt),
            decay = static_cast<T>(s.weight_decay),
            shrink = static_cast<T>(1.0 - s.lr * s.weight_decay);
    const bool decay_param = s.decoupled && s.weight_decay != 0.0;
    const bool decay_grad = !s.decoupled && s.weight_decay != 0.0;
    const int threads = threads_for(12.0 * double(n), n, Sync::fork_join);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (index i = 0; i < n; ++i) {
        if (decay_param) p[i] *= shrink;
        const T grad = decay_grad ? g[i] + decay * p[i] : g[i];
        m[i] += one_minus_b1 * (grad - m[i]);
        v[i] = v[i] * b2 + (grad * grad) * one_minus_b2;
        const T denom = std::sqrt(v[i]) / bias2_sqrt + eps;
        p[i] -= step_size * (m[i] / denom);
    }
}

template void adam_update(float*, const float*, float*, float*, index, const AdamStep&);
template void adam_update(double*, const double*, double*, double*, index, const AdamStep&);

}  // namespace rnnfast
