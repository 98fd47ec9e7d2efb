// Bindings of the dense layers: the fully connected products on rnnfast's own GEMM, and the
// embedding table's gradient. Linear layers use rnnfast's GEMM instead of NumPy's matmul so
// that a model built of rnnfast layers uses one thread pool: OpenBLAS's threads, spinning after
// each NumPy product, otherwise take the cores the recurrent kernels' teams wait for (a training
// step ran 2x slower with 2 threads than 1).
#include <algorithm>

#include "check.hpp"
#include "rnnfast/gemm/gemm.hpp"
#include "rnnfast/ops/embedding.hpp"
#include "rnnfast/runtime/dispatch.hpp"
#include "rnnfast/runtime/threads.hpp"

namespace rnnfast::bindings {
namespace {

int gemm_threads(index M, index N, index K, int nr) {
    return threads_for(2.0 * double(M) * double(N) * double(K), std::max(M, (N + nr - 1) / nr),
                       Sync::fork_join);
}

// y (M, N) = x (M, K) W^T + b, W (N, K).
template <class T>
py::array_t<T> forward_impl(const py::array& x, const py::array& w, const py::object& b) {
    if (x.ndim() != 2 || w.ndim() != 2)
        throw std::invalid_argument("x, weight: expected 2-dimensional arrays");
    const index M = x.shape(0), K = x.shape(1), N = w.shape(0);
    const T* xp = checked<T>(x, "x", {M, K}, "(M, K)").data();
    const T* wp = checked<T>(w, "weight", {N, K}, "(N, K)").data();
    const T* bp = b.is_none() ? nullptr : checked<T>(b, "bias", {N}, "(N,)").data();
    py::array_t<T> y({M, N});
    T* yp = y.mutable_data();
    {
        py::gil_scoped_release release;  // the arrays above outlive the call
        const ThreadShare share;         // concurrent calls split the thread budget
        const KernelTable<T>& kt = kernels<T>();
        gemm(kt, M, N, K, MatView<T>{xp, K, 1}, MatView<T>{wp, 1, K}, yp, N, false,
             gemm_threads(M, N, K, kt.nr), bp);
    }
    return y;
}

// dW (N, K) += dy^T x, and returns dx (M, K) = dy W.
template <class T>
py::array_t<T> backward_impl(const py::array& x, const py::array& w, const py::array& dy,
                             const py::array& dw) {
    if (x.ndim() != 2 || w.ndim() != 2)
        throw std::invalid_argument("x, weight: expected 2-dimensional arrays");
    const index M = x.shape(0), K = x.shape(1), N = w.shape(0);
    const T* xp = checked<T>(x, "x", {M, K}, "(M, K)").data();
    const T* wp = checked<T>(w, "weight", {N, K}, "(N, K)").data();
    const T* dyp = checked<T>(dy, "dy", {M, N}, "(M, N)").data();
    auto dw_arr = checked<T>(dw, "dweight", {N, K}, "(N, K)");
    RNNFAST_CHECK(dw_arr.writeable(), "dweight", "a writeable array", "a read-only one");
    T* dwp = dw_arr.mutable_data();
    py::array_t<T> dx({M, K});
    T* dxp = dx.mutable_data();
    {
        py::gil_scoped_release release;  // the arrays above outlive the call
        const ThreadShare share;         // concurrent calls split the thread budget
        const KernelTable<T>& kt = kernels<T>();
        gemm(kt, N, K, M, MatView<T>{dyp, 1, N}, MatView<T>{xp, K, 1}, dwp, K, true,
             gemm_threads(N, K, M, kt.nr));
        gemm(kt, M, K, N, MatView<T>{dyp, N, 1}, MatView<T>{wp, K, 1}, dxp, K, false,
             gemm_threads(M, K, N, kt.nr));
    }
    return dx;
}

// grad[ids[i]] += rows[i]: the embedding table's gradient.
template <class T>
void embedding_backward_impl(const py::array& ids, const py::array& rows, const py::array& grad) {
    RNNFAST_CHECK(ids.ndim() == 1, "ids", "a flat (n,) array", "shape " + shape_str(ids));
    RNNFAST_CHECK(grad.ndim() == 2, "dweight", "shape (num_embeddings, dim)",
                  "shape " + shape_str(grad));
    const index n = ids.shape(0), table = grad.shape(0), dim = grad.shape(1);
    if (!py::isinstance<py::array_t<std::int64_t>>(ids))
        throw py::type_error("ids: expected an int64 array");
    const std::int64_t* ip = checked<std::int64_t>(ids, "ids", {n}, "(n,)").data();
    const T* rp = checked<T>(rows, "rows", {n, dim}, "(n, dim)").data();
    auto g = checked<T>(grad, "dweight", {table, dim}, "(num_embeddings, dim)");
    RNNFAST_CHECK(g.writeable(), "dweight", "a writeable array", "a read-only one");
    for (index i = 0; i < n; ++i)  // each id picks the row it writes: it must exist
        RNNFAST_CHECK(ip[i] >= 0 && ip[i] < table, "ids",
                      "values in [0, " + std::to_string(table) + ")", std::to_string(ip[i]));
    T* gp = g.mutable_data();
    py::gil_scoped_release release;  // the arrays above outlive the call
    const ThreadShare share;         // concurrent calls split the thread budget
    embedding_backward(ip, n, rp, dim, gp);
}

}  // namespace

void register_dense(py::module_& m) {
    m.def(
        "dense_forward",
        [](const py::array& x, const py::array& w, const py::object& b) {
            if (has_dtype<float>(w)) return py::array(forward_impl<float>(x, w, b));
            if (has_dtype<double>(w)) return py::array(forward_impl<double>(x, w, b));
            throw py::type_error("weight: expected dtype float32 or float64");
        },
        py::arg("x"), py::arg("weight"), py::arg("bias"), "x W^T + b for 2-D x (rnnfast's GEMM).");
    m.def(
        "dense_backward",
        [](const py::array& x, const py::array& w, const py::array& dy, const py::array& dw) {
            if (has_dtype<float>(w)) return py::array(backward_impl<float>(x, w, dy, dw));
            if (has_dtype<double>(w)) return py::array(backward_impl<double>(x, w, dy, dw));
            throw py::type_error("weight: expected dtype float32 or float64");
        },
        py::arg("x"), py::arg("weight"), py::arg("dy"), py::arg("dweight"),
        "Adds dy^T x into dweight and returns dx = dy W (rnnfast's GEMM).");
    m.def(
        "embedding_backward",
        [](const py::array& ids, const py::array& rows, const py::array& grad) {
            if (has_dtype<float>(grad)) return embedding_backward_impl<float>(ids, rows, grad);
            if (has_dtype<double>(grad)) return embedding_backward_impl<double>(ids, rows, grad);
            throw py::type_error("dweight: expected dtype float32 or float64");
        },
        py::arg("ids"), py::arg("rows"), py::arg("dweight"),
        "Adds rows[i] into dweight[ids[i]], in the order of i.");
}

}  // namespace rnnfast::bindings
