#include "net/transport/status_board.h"

namespace xccl::net {

void StatusBoard::setProvider(std::function<std::string()> provider) {
  std::lock_guard<std::mutex> guard(mutex_);
  provider_ = std::move(provider);
}

std::string StatusBoard::answer() {
  std::function<std::string()> provider;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    provider = provider_;
  }
  return provider ? provider() : "";
}

void StatusBoard::reply(int peer, uint64_t round, const std::string& text) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (round == round_) replies_[peer] = text.empty() ? "?" : text;
  completed_.notify_all();
}

std::vector<std::string> StatusBoard::query(Deadline deadline, const PeerHealth& health,
                                            const std::function<void(int, uint64_t)>& send,
                                            const std::function<bool(int)>& reaches) {
  std::vector<int> asked;
  uint64_t round;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    round = ++round_;
    for (int peer = 0; peer < static_cast<int>(replies_.size()); ++peer) {
      replies_[peer].clear();
      if (reaches ? !reaches(peer) : peer == rank_) continue;
      if (const Error* error = health.peerErrorLocked(peer)) {
        replies_[peer] = "!" + std::string(error->what());
      } else if (!health.abortedLocked()) {
        asked.push_back(peer);
      }
    }
  }
  for (int peer : asked) send(peer, round);
  std::unique_lock<std::mutex> lock(mutex_);
  completed_.wait_until(lock, deadline, [&] {
    for (int peer : asked) {
      if (replies_[peer].empty()) return false;
    }
    return true;
  });
  std::vector<std::string> replies = replies_;
  auto provider = provider_;
  lock.unlock();
  replies[rank_] = provider ? provider() : "";
  return replies;
}

}  // namespace xccl::net
