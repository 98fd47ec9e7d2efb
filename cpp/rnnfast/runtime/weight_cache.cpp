#include "weight_cache.hpp"

#include <algorithm>

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

}  // namespace rnnfast
