#include "weight_cache.hpp"

#include <algorithm>
#include <cstring>

namespace rnnfast {

std::shared_ptr<const void> WeightCache::find_bytes(const PackKey& key) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry& e : entries_)
        if (e.key == key) return e.pack;
    return nullptr;
}

void WeightCache::publish_bytes(const PackKey& key, std::shared_ptr<const void> pack,
                                std::size_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++made_;
    // A key that differs only in its source or table replaces the old pack: the layer's
    // weights were rebound or another ISA or product packs them; keeping both would grow the
    // cache with every rebinding.
    for (Entry& e : entries_)
        if (e.key.role == key.role && e.key.rows == key.rows && e.key.cols == key.cols &&
            e.key.block == key.block) {
            e = Entry{key, std::move(pack), bytes};
            return;
        }
    entries_.push_back(Entry{key, std::move(pack), bytes});
}

void WeightCache::clear() {
    std::vector<Entry> dropped;  // released outside the lock
    const std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(entries_);
}

std::size_t WeightCache::packs() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
}

std::size_t WeightCache::bytes() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::size_t total = 0;
    for (const Entry& e : entries_)
        total += e.bytes;
    return total;
}

std::uint64_t WeightCache::packs_made() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return made_;
}

std::uint64_t fingerprint(const void* data, std::size_t bytes, std::uint64_t seed) {
    constexpr std::uint64_t kMix = 0x9E3779B97F4A7C15ull;  // odd: multiplying is a bijection
    const auto* p = static_cast<const unsigned char*>(data);
    const std::size_t words = bytes / 8;
    std::uint64_t sums[4] = {seed, 0, 0, 0};  // four chains: the loop is not one add long
    std::size_t i = 0;
    for (; i + 4 <= words; i += 4)
        for (std::size_t l = 0; l < 4; ++l) {
            std::uint64_t w;
            std::memcpy(&w, p + 8 * (i + l), 8);
            sums[l] += (w ^ (i + l)) * kMix;
        }
    for (; i < words; ++i) {
        std::uint64_t w;
        std::memcpy(&w, p + 8 * i, 8);
        sums[0] += (w ^ i) * kMix;
    }
    std::uint64_t tail = 0;
    std::memcpy(&tail, p + 8 * words, bytes % 8);
    sums[1] += (tail ^ words ^ (std::uint64_t(bytes) << 32)) * kMix;
    return sums[0] + sums[1] * 3 + sums[2] * 5 + sums[3] * 7;
}

}  // namespace rnnfast
