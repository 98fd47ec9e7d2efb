#include "scratch.hpp"

#include <cstdlib>
#include <memory>
#include <new>

namespace rnnfast {
namespace {

struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};

struct Scratch {
    std::unique_ptr<void, FreeDeleter> data;
    std::size_t size = 0;
};

}  // namespace

void* thread_scratch(std::size_t bytes) {
    thread_local Scratch s;
    if (bytes > s.size) {
        const std::size_t size = (bytes + 63) / 64 * 64;  // aligned_alloc wants a multiple
        void* p = std::aligned_alloc(64, size);
        if (!p) throw std::bad_alloc();
        s.data.reset(p);
        s.size = size;
    }
    return s.data.get();
}

}  // namespace rnnfast
