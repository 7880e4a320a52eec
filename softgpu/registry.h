// Maps opaque API handles (the pointers handed to the application) to live objects, so that a
// stale or forged handle is recognised instead of dereferenced.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace softgpu {

template <typename T>
class Registry {
 public:
  void Add(const std::shared_ptr<T>& item) {
    std::lock_guard lock(mu_);
    items_[item.get()] = item;
  }
  // The live object behind `handle`, or null.
  std::shared_ptr<T> Find(const void* handle) const {
    if (handle == nullptr) return nullptr;
    std::lock_guard lock(mu_);
    auto it = items_.find(handle);
    return it == items_.end() ? nullptr : it->second;
  }
  // Calls fn(object) on the live object behind `handle` under the registry's lock, without
  // taking a reference to it (no atomic count changes); false, without calling fn, when there
  // is none. fn must be short and must not use this registry.
  template <typename Fn>
  bool Visit(const void* handle, Fn fn) const {
    if (handle == nullptr) return false;
    std::lock_guard lock(mu_);
    auto it = items_.find(handle);
    if (it == items_.end()) return false;
    fn(*it->second);
    return true;
  }
  // Unregisters and returns the object (null if it was not registered).
  std::shared_ptr<T> Remove(const void* handle) {
    std::lock_guard lock(mu_);
    auto it = items_.find(handle);
    if (it == items_.end()) return nullptr;
    std::shared_ptr<T> item = std::move(it->second);
    items_.erase(it);
    return item;
  }
  // Unregisters and returns every object for which pred(object) is true.
  template <typename Pred>
  std::vector<std::shared_ptr<T>> RemoveIf(Pred pred) {
    std::vector<std::shared_ptr<T>> out;
    std::lock_guard lock(mu_);
    for (auto it = items_.begin(); it != items_.end();) {
      if (pred(*it->second)) {
        out.push_back(std::move(it->second));
        it = items_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
  template <typename Fn>
  void ForEach(Fn fn) const {
    std::vector<std::shared_ptr<T>> copy;
    {
      std::lock_guard lock(mu_);
      for (const auto& [k, v] : items_) copy.push_back(v);
    }
    for (const auto& v : copy) fn(v);
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<const void*, std::shared_ptr<T>> items_;
};

}  // namespace softgpu
