#include "net/rendezvous/incarnation.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"
#include "net/rendezvous/bootstrap.h"
#include "net/rendezvous/deadline.h"

namespace xccl::net {
namespace {

using std::chrono::milliseconds;

constexpr size_t kMaxScopePart = 64;
constexpr size_t kHexDigits = 16;

// Environment text in a store key: only characters that cannot be read as separators.
std::string scopePart(const char* text) {
  std::string part;
  for (const char* c = text; *c != '\0' && part.size() < kMaxScopePart; ++c) {
    const bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                       (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-';
    part += plain ? *c : '_';
  }
  return part.empty() ? "_" : part;
}

std::string hex16(uint64_t value) {
  char text[kHexDigits + 1];
  std::snprintf(text, sizeof(text), "%016" PRIx64, value);
  return text;
}

// A store value that must be 16 hex digits; false for anything else (a foreign writer).
bool parseHex16(const Bytes& bytes, uint64_t* value) {
  if (bytes.size() != kHexDigits) return false;
  uint64_t parsed = 0;
  for (uint8_t c : bytes) {
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return false;
    parsed = (parsed << 4) | static_cast<uint64_t>(digit);
  }
  *value = parsed;
  return true;
}

// Time left until `end`, at least 1 ms: to c10d's stores a zero timeout means no bound.
milliseconds left(Deadline end) {
  return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(end - Clock::now()));
}

// The store value, or empty when `key` did not appear by `end` (other errors propagate).
bool getBy(Store& store, const std::string& key, Deadline end, Bytes* value) {
  try {
    *value = store.get(key, left(end));
    return true;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kTimeout) throw;
    return false;
  }
}

// Called when this creation fails on this rank: raises this rank's count to the highest any
// rank's slot reached (at least `floor`), so that the next creation, every rank counting once more,
// is in step again whichever rank lost a creation. By the time a rank fails (a wait ran out)
// every live rank has counted, so every rank raises to the same value.
void catchUp(Store& store, const std::string& base, int rank, int size, int64_t mine,
             int64_t floor) {
  int64_t highest = floor;
  for (int r = 0; r < size; ++r) {
    highest = std::max(highest, store.add(base + "count/" + std::to_string(r), 0));
  }
  // Counts are store values anyone could have written: no step that overflows.
  int64_t step = 0;
  if (highest > mine && !__builtin_sub_overflow(highest, mine, &step)) {
    store.add(base + "count/" + std::to_string(rank), step);
  }
}

[[noreturn]] void outOfStep(int rank, int64_t mine, int64_t opened) {
  XCCL_THROW(ErrorKind::kPeerFailure, "group creation on rank ", rank, " is this rank's #", mine,
             " on this store but rank 0's #", opened,
             ": an earlier creation of this group on the same store lost a rank before it "
             "started, so this one cannot trust what the store holds. Every rank fails this "
             "creation; the counts are back in step for the next one (or use a fresh store)");
}

[[noreturn]] void foreign(const std::string& key, size_t bytes, const std::string& what) {
  XCCL_THROW(ErrorKind::kPeerFailure, "store key '", key, "' holds ", bytes, " bytes that are not ",
             what, ": another job or an earlier creation wrote it; give each job its own store");
}

}  // namespace

std::string launcherScope(const char* runId, const char* restartCount) {
  const bool hasRun = runId != nullptr && *runId != '\0';
  const bool hasCount = restartCount != nullptr && *restartCount != '\0';
  if (!hasRun && !hasCount) return "";
  return scopePart(hasRun ? runId : "") + "/" + scopePart(hasCount ? restartCount : "");
}

std::string launcherScopeFromEnvironment() {
  return launcherScope(std::getenv("TORCHELASTIC_RUN_ID"),
                       std::getenv("TORCHELASTIC_RESTART_COUNT"));
}

std::string incarnationTagOf(const Store& store) {
  const auto* tagged = dynamic_cast<const IncarnationTagged*>(&store);
  return tagged != nullptr ? tagged->incarnationTag() : "";
}

std::string Incarnation::tag() const { return hex16(token).substr(kHexDigits - 8); }

Incarnation sharedIncarnation(const std::string& scope) {
  return Incarnation{"xccl/inc/" + (scope.empty() ? "" : scope + "/"), 0};
}

Incarnation newIncarnation(Store& store, const std::string& scope, int rank, int size,
                           milliseconds timeout) {
  XCCL_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "group creation: bad rank ", rank, " of ",
                 size);
  const Deadline end = Clock::now() + timeout;
  // Per size too: a group re-created with more ranks has slots that never counted before.
  const std::string base = sharedIncarnation(scope).prefix + std::to_string(size) + "/";
  const std::string countKey = base + "count/" + std::to_string(rank);
  const int64_t mine = store.add(countKey, 1);
  const std::string tokenKey = base + "token/" + std::to_string(mine);

  if (rank == 0) {
    const uint64_t token = std::max<uint64_t>(randomToken(), 1);
    const std::string at = base + hex16(token) + "/";
    store.set(tokenKey, toBytes(hex16(token)));
    // Claims under a token drawn just now cannot be stale; the confirmation lists every nonce.
    std::string nonces(static_cast<size_t>(size) * kHexDigits, '0');
    std::string missing;
    for (int r = 1; r < size; ++r) {
      Bytes claim;
      uint64_t nonce = 0;
      const std::string key = at + "claim/" + std::to_string(r);
      if (!getBy(store, key, end, &claim)) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        continue;
      }
      if (!parseHex16(claim, &nonce)) foreign(key, claim.size(), "a rank's nonce");
      nonces.replace(static_cast<size_t>(r) * kHexDigits, kHexDigits, hex16(nonce));
    }
    if (!missing.empty()) {
      catchUp(store, base, rank, size, mine, mine);
      XCCL_THROW(ErrorKind::kTimeout, "group creation #", mine, " on this store (rank 0 of ", size,
                 "): ranks [", missing, "] did not join within ", timeout.count(),
                 " ms (not started, or counting a different creation: see their errors)");
    }
    store.set(at + "confirm", toBytes(nonces));
    return Incarnation{at, token};
  }

  const uint64_t nonce = randomToken();
  Bytes published;
  if (!getBy(store, tokenKey, end, &published)) {
    const int64_t opened = store.add(base + "count/0", 0);
    catchUp(store, base, rank, size, mine, mine);
    // Rank 0 counts once per creation: two or more behind is not slowness but a lost creation.
    int64_t behind = 0;
    if (opened < mine && (__builtin_sub_overflow(mine, opened, &behind) || behind > 1)) {
      outOfStep(rank, mine, opened);
    }
    XCCL_THROW(ErrorKind::kTimeout, "group creation #", mine, " on this store (rank ", rank, " of ",
               size, "): rank 0 did not start it within ", timeout.count(), " ms");
  }
  uint64_t token = 0;
  if (!parseHex16(published, &token)) foreign(tokenKey, published.size(), "a creation token");
  // Rank 0 already counted past this rank: the token is an earlier creation's.
  const int64_t opened = store.add(base + "count/0", 0);
  if (opened > mine) {
    catchUp(store, base, rank, size, mine, opened);
    outOfStep(rank, mine, opened);
  }
  const std::string at = base + hex16(token) + "/";
  store.set(at + "claim/" + std::to_string(rank), toBytes(hex16(nonce)));
  // Only a rank 0 that read this rank's fresh nonce can list it: an earlier creation's rank 0
  // (a stale token read before this creation's rank 0 counted) never did.
  Bytes confirm;
  const bool confirmed = getBy(store, at + "confirm", end, &confirm);
  const size_t offset = static_cast<size_t>(rank) * kHexDigits;
  if (confirmed && confirm.size() == static_cast<size_t>(size) * kHexDigits &&
      std::equal(confirm.begin() + offset, confirm.begin() + offset + kHexDigits,
                 hex16(nonce).begin())) {
    return Incarnation{at, token};
  }
  const int64_t now = store.add(base + "count/0", 0);
  // A list without this rank's nonce is the earlier creation's, whose rank 0 counted `mine`: this
  // creation's rank 0 counts at least one more.
  int64_t next = mine;
  if (confirmed && __builtin_add_overflow(mine, 1, &next)) next = mine;
  const int64_t floor = std::max(now, next);
  catchUp(store, base, rank, size, mine, floor);
  if (floor > mine) outOfStep(rank, mine, floor);
  // Rank 0 confirms once every rank claimed: name the ranks whose claim is not there, since they,
  // not rank 0, are why this creation did not happen (a rank killed before it joined, say).
  std::string missing;
  for (int r = 1; r < size; ++r) {
    Bytes claim;
    if (r != rank && !getBy(store, at + "claim/" + std::to_string(r), Clock::now(), &claim)) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  if (!missing.empty()) {
    XCCL_THROW(ErrorKind::kTimeout, "group creation #", mine, " on this store (rank ", rank, " of ",
               size, "): ranks [", missing, "] did not join within ", timeout.count(),
               " ms (not started, or counting a different creation: see their errors)");
  }
  XCCL_THROW(ErrorKind::kTimeout, "group creation #", mine, " on this store (rank ", rank, " of ",
             size, "): rank 0 did not confirm this rank within ", timeout.count(), " ms");
}

}  // namespace xccl::net
