// Vectors whose new elements are left uninitialised: buffers every element of which is written
// before it is read (a pack of the weights, a GEMM's packed block). std::vector<float>(n) zeroes
// its n elements first; for the packs of one call at T = 1, B = 32, H = 256 (LSTM) that was 12%
// of a forward and backward, all of it overwritten (perf, AVX-512, one thread).
#pragma once

#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace rnnfast {

template <class T>
struct Uninitialized : std::allocator<T> {
    template <class U>
    struct rebind {
        using other = Uninitialized<U>;
    };
    Uninitialized() = default;
    template <class U>
    Uninitialized(const Uninitialized<U>&) noexcept {}
    // value-initialisation (zeros) becomes default-initialisation (nothing, for a float)
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};

// A packed matrix (KernelTable::pack_b's layout), as pack_whole and the weight cache hold it.
template <class T>
using Packed = std::vector<T, Uninitialized<T>>;

}  // namespace rnnfast
