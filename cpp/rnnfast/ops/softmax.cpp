#include "softmax.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"

namespace rnnfast {

template <class T>
double softmax_cross_entropy(const T* logits, index rows, index classes,
                             const std::int64_t* targets, const T* weights, T* grad) {
    if (rows == 0) return 0.0;
    const KernelTable<T>& kt = kernels<T>();
    std::vector<double> row_loss(static_cast<size_t>(rows), 0.0);
    // ~20 operations per logit (max, exp, scale)
    const int threads = threads_for(20.0 * double(rows) * double(classes), rows, Sync::fork_join);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (index r = 0; r < rows; ++r) {
        const T* x = logits + r * classes;
        T* g = grad + r * classes;
        const T w = weights[r];
        if (w == T(0)) {
            std::memset(g, 0, sizeof(T) * static_cast<size_t>(classes));
            continue;
        }
        const T log_sum = kt.softmax_row(x, classes, w, g);
        const index t = static_cast<index>(targets[r]);
        g[t] -= w;
        row_loss[static_cast<size_t>(r)] = double(w) * (double(log_sum) - double(x[t]));
    }
    double total = 0.0;
    for (double l : row_loss)
        total += l;
    return total;
}

template double softmax_cross_entropy(const float*, index, index, const std::int64_t*, const float*,
                                      float*);
template double softmax_cross_entropy(const double*, index, index, const std::int64_t*,
                                      const double*, double*);

}  // namespace rnnfast
