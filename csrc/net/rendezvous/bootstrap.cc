#include "net/rendezvous/bootstrap.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "common/error.h"

namespace xccl::net {
namespace {

using std::chrono::milliseconds;

// Time left until `deadline`, at least 1 ms: to some stores (c10d's) a zero timeout means no bound.
milliseconds left(Deadline deadline) {
  return std::max(milliseconds(1),
                  std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

}  // namespace

uint64_t randomToken() {
  std::random_device random;
  return (static_cast<uint64_t>(random()) << 32) ^ random();
}

bool Agreement::ok() const {
  return std::all_of(failures.begin(), failures.end(),
                     [](const std::string& failure) { return failure.empty(); });
}

std::string Agreement::first() const {
  for (size_t r = 0; r < failures.size(); ++r) {
    if (!failures[r].empty()) return detail::concat("rank ", r, ": ", failures[r]);
  }
  return "";
}

Bootstrap::Bootstrap(Store& store, std::string prefix, int rank, int size, milliseconds timeout)
    : store_(store), prefix_(std::move(prefix)), rank_(rank), size_(size), timeout_(timeout) {
  XCCL_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "bootstrap '", prefix_, "': bad rank ",
                 rank, " of ", size);
}

Bootstrap Bootstrap::scoped(const std::string& name) const {
  Bootstrap inner(*this);
  inner.prefix_ = keyOf(name, -1);
  return inner;
}

Bootstrap Bootstrap::until(Deadline deadline) const {
  Bootstrap bounded(*this);
  bounded.deadline_ = deadline;
  return bounded;
}

Deadline Bootstrap::deadline() const {
  return deadline_ != Deadline{} ? deadline_ : Clock::now() + timeout_;
}

std::string Bootstrap::keyOf(const std::string& key, int rank) const {
  std::string full = prefix_.empty() ? key : prefix_ + "/" + key;
  return rank < 0 ? full : full + "/" + std::to_string(rank);
}

void Bootstrap::throwMissing(const std::string& key, const std::vector<int>& missing,
                             const std::string& storeError) const {
  std::string ranks;
  for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  XCCL_THROW(ErrorKind::kTimeout, "store exchange '", keyOf(key, -1), "' (rank ", rank_, " of ",
             size_, "): ranks [", ranks, "] did not publish in time (", storeError, ")");
}

std::vector<Bytes> Bootstrap::allGather(const std::string& key, const Bytes& mine) const {
  const Deadline end = deadline();
  store_.set(keyOf(key, rank_), mine);
  std::vector<Bytes> all(size_);
  std::vector<int> missing;
  std::string storeError;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) {
      all[r] = mine;
      continue;
    }
    // Past the deadline each remaining rank still gets a brief look (left() >= 1 ms), so the
    // error names every rank missing, not only the first.
    try {
      all[r] = store_.get(keyOf(key, r), left(end));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kTimeout) throw;
      missing.push_back(r);
      if (storeError.empty()) storeError = e.what();
    }
  }
  if (!missing.empty()) throwMissing(key, missing, storeError);
  return all;
}

std::vector<std::string> Bootstrap::allGather(const std::string& key,
                                              const std::string& mine) const {
  std::vector<std::string> all;
  for (const Bytes& bytes : allGather(key, toBytes(mine))) all.push_back(toString(bytes));
  return all;
}

uint64_t Bootstrap::sharedToken(const std::string& key) const {
  const uint64_t drawn = rank_ == 0 ? randomToken() : 0;
  const auto* bytes = reinterpret_cast<const uint8_t*>(&drawn);
  const Bytes published = broadcast(key, 0, Bytes(bytes, bytes + sizeof(drawn)));
  XCCL_CHECK(published.size() == sizeof(drawn), "bad token '", keyOf(key, 0), "' in the store");
  uint64_t token = 0;
  std::memcpy(&token, published.data(), sizeof(token));
  return token;
}

Bytes Bootstrap::broadcast(const std::string& key, int root, const Bytes& value) const {
  XCCL_CHECK_ARG(root >= 0 && root < size_, "bootstrap broadcast '", keyOf(key, -1), "': bad root ",
                 root, " of ", size_);
  if (rank_ == root) {
    store_.set(keyOf(key, -1), value);
    return value;
  }
  try {
    return store_.get(keyOf(key, -1), left(deadline()));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kTimeout) throw;
    throwMissing(key, {root}, e.what());
  }
}

Agreement Bootstrap::agree(const std::string& key, const std::string& failure) const {
  return Agreement{allGather(key, failure)};
}

}  // namespace xccl::net
