#include "messages/refusal_log.hpp"

namespace taskmill {

refusal_log::refusal_log(clock::duration interval, size_t max_sources)
    : interval_(interval), max_sources_(max_sources) {}

std::optional<int64_t> refusal_log::record(const std::string& address, const std::string& reason,
                                           clock::time_point now) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto key = std::make_pair(address, reason);
  auto it = sources_.find(key);
  if (it == sources_.end()) {
    if (sources_.size() >= max_sources_)
      std::erase_if(sources_, [&](const auto& entry) {
        return now - entry.second.logged >= interval_ && entry.second.unlogged == 0;
      });
    if (sources_.size() >= max_sources_) key.first = "other addresses";
    auto [inserted, fresh] = sources_.try_emplace(key);
    it = inserted;
    if (fresh) {
      it->second.logged = now;
      return 0;
    }
  }
  auto& s = it->second;
  if (now - s.logged < interval_) {
    ++s.unlogged;
    return std::nullopt;
  }
  auto unlogged = s.unlogged;
  s.logged = now;
  s.unlogged = 0;
  return unlogged;
}

}  // namespace taskmill
