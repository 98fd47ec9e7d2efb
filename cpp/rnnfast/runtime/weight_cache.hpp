// A layer's packed weights, kept between calls (issue 41). Packing W_ih^T and W_hh^T into the
// kernels' panels reads and writes every weight once per call: at T = 1, B = 32, H = 256 an
// LSTM's two packs are 2 MiB, a third of the forward's arithmetic time, and at a batch of one
// the pack of W_ih costs as much as the step. A WeightCache belongs to one layer (one direction
// of one layer); the drivers look their packs up in it by what determines a pack's bytes (the
// weights' address, the kernel table that packs them, the matrix's size and the gate layout)
// and publish what they pack. What the key cannot see is a weight written in place: the owner
// (the Python layer, the torch bridge) clears the cache whenever its weights may have changed.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "types.hpp"
#include "uninitialized.hpp"

namespace rnnfast {

// Which pack of a pass: a layer packs each of its weights at most once per role.
enum class PackRole : std::uint8_t {
    input,            // W_ih^T in the gate layout (the projection)
    recurrent,        // W_hh^T in the recurrent layout (the step's product)
    reset_product,    // W_hn^T (reset_before's second product)
    projection,       // W_hr^T (the LSTM's projection)
    recurrent_grad,   // W_hh as the backward's dh product reads it
    input_grad,       // W_ih as the backward's dx product reads it
    reset_grad,       // W_hn, the same
    projection_grad,  // W_hr, the same
    stream,           // an Elman batch of one's W_hh^T in matvec's groups
    stream_grad,      // its W_hh, the same, as the backward reads it
};

struct PackKey {
    const void* source = nullptr;  // the weights as stored
    const void* table = nullptr;   // the KernelTable that packs (ISA, dtype and products)
    index rows = 0, cols = 0;      // the packed K x N
    index block = 0;               // the gate layout's unit block, 0 without one
    PackRole role = PackRole::input;
    bool operator==(const PackKey& o) const {
        return source == o.source && table == o.table && rows == o.rows && cols == o.cols &&
               block == o.block && role == o.role;
    }
};

class WeightCache {
  public:
    // The published pack under `key`, or null. A pack never changes once published, and a
    // caller's reference keeps it alive through a clear().
    template <class T>
    std::shared_ptr<const Packed<T>> find(const PackKey& key) const {
        return std::static_pointer_cast<const Packed<T>>(find_bytes(key));
    }
    // Makes `pack` the one under `key`, replacing any other.
    template <class T>
    void publish(const PackKey& key, std::shared_ptr<const Packed<T>> pack) {
        publish_bytes(key, std::move(pack), sizeof(T) * pack_size(pack.get()));
    }
    void clear();
    std::size_t packs() const;
    std::size_t bytes() const;
    // Packs published since the cache was made: a test's proof that a call reused one.
    std::uint64_t packs_made() const;

  private:
    template <class T>
    static std::size_t pack_size(const Packed<T>* p) {
        return p ? p->size() : 0;
    }
    std::shared_ptr<const void> find_bytes(const PackKey& key) const;
    void publish_bytes(const PackKey& key, std::shared_ptr<const void> pack, std::size_t bytes);
    struct Entry {
        PackKey key;
        std::shared_ptr<const void> pack;
        std::size_t bytes;
    };
    mutable std::mutex mutex_;  // calls of one layer from several Python threads
    std::vector<Entry> entries_;
    std::uint64_t made_ = 0;
};

// A 64-bit fingerprint of `bytes` bytes of weights, for owners that cannot see every write (the
// torch bridge: a write through a tensor's .data bumps no version counter): each 64-bit word,
// mixed with its place, through an odd multiplier (a bijection), summed. Any change of the
// values changes it but with probability 2^-64; it reads the weights once, a fraction of what
// the packs it keeps valid cost to remake (reading and scattering them).
std::uint64_t fingerprint(const void* data, std::size_t bytes, std::uint64_t seed = 0);

// One pack of a pass through an optional cache: the cached one when there is, else room for
// the pass to pack into and publish once it has packed all of it.
template <class T>
class CachedPack {
  public:
    CachedPack() = default;
    CachedPack(WeightCache* cache, const PackKey& key, index size) : cache_(cache), key_(key) {
        if (cache_) found_ = cache_->find<T>(key_);
        if (!found_) fresh_ = std::make_shared<Packed<T>>(static_cast<size_t>(size));
    }
    // Already packed (found in the cache): the pass skips packing it.
    bool ready() const { return found_ != nullptr; }
    const T* data() const { return found_ ? found_->data() : fresh_ ? fresh_->data() : nullptr; }
    T* room() { return fresh_->data(); }  // where to pack, when not ready()
    // After the pass has packed all of it: later calls find it.
    void publish() {
        if (cache_ && fresh_) cache_->publish<T>(key_, fresh_);
    }

  private:
    WeightCache* cache_ = nullptr;
    PackKey key_;
    std::shared_ptr<const Packed<T>> found_;
    std::shared_ptr<Packed<T>> fresh_;
};

// A pack made whole at once by `pack()` (a Packed<T>), through the cache.
template <class T, class Pack>
std::shared_ptr<const Packed<T>> cached(WeightCache* cache, const PackKey& key, Pack&& pack) {
    if (cache)
        if (auto found = cache->find<T>(key)) return found;
    auto made = std::make_shared<const Packed<T>>(pack());
    if (cache) cache->publish<T>(key, made);
    return made;
}

}  // namespace rnnfast
