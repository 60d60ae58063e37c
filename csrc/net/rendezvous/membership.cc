#include "net/rendezvous/membership.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <set>

#include "common/error.h"
#include "net/rendezvous/bootstrap.h"
#include "net/rendezvous/deadline.h"

namespace xccl::net {
namespace {

constexpr char kHandlePrefix[] = "xccl:1:";

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016" PRIx64, value);
  return text;
}

bool allOf(const std::string& text, const char* allowed) {
  return !text.empty() && text.find_first_not_of(allowed) == std::string::npos;
}

std::string joined(const std::vector<std::string>& handles) {
  std::string text;
  for (const auto& handle : handles) text += handle + "\n";
  return text;
}

}  // namespace

std::string MemberHandle::format() const {
  return std::string(kHandlePrefix) + job + ":" + member + ":" + host;
}

MemberHandle MemberHandle::parse(const std::string& text) {
  const std::string prefix = kHandlePrefix;
  XCCL_CHECK_ARG(text.compare(0, prefix.size(), prefix) == 0, "reconfigure handle '", text,
                 "' is not an xccl handle (they start with '", prefix,
                 "'; get one from torch.distributed._get_reconfigure_handle())");
  // The host identity is the last field and may hold any character but a newline (the store
  // records memberships one handle per line).
  const size_t jobEnd = text.find(':', prefix.size());
  const size_t memberEnd = jobEnd == std::string::npos ? jobEnd : text.find(':', jobEnd + 1);
  XCCL_CHECK_ARG(memberEnd != std::string::npos && text.find('\n') == std::string::npos,
                 "reconfigure handle '", text, "' is malformed (expected '", prefix,
                 "<job>:<member>:<host>')");
  MemberHandle handle;
  handle.job = text.substr(prefix.size(), jobEnd - prefix.size());
  handle.member = text.substr(jobEnd + 1, memberEnd - jobEnd - 1);
  handle.host = text.substr(memberEnd + 1);
  XCCL_CHECK_ARG(allOf(handle.job, "0123456789abcdef") &&
                     allOf(handle.member, "0123456789abcdef-") && !handle.host.empty(),
                 "reconfigure handle '", text, "' is malformed (expected '", prefix,
                 "<job>:<member>:<host>')");
  return handle;
}

std::string newMemberId() { return std::to_string(::getpid()) + "-" + hex(randomToken()); }

std::string jobToken(Store& store, const std::string& key, std::chrono::milliseconds timeout) {
  // add() is the store's only atomic step: exactly one caller ever sees 1 and draws the token.
  if (store.add(key + "/claims", 1) == 1) {
    const std::string token = hex(randomToken());
    store.set(key, toBytes(token));
    return token;
  }
  return toString(store.get(key, timeout));
}

int checkMembership(std::vector<std::string>& handles, bool ordered, const std::string& mine,
                    const std::string& job) {
  XCCL_CHECK_ARG(!handles.empty(), "reconfigure: the list of handles is empty");
  if (!ordered) std::sort(handles.begin(), handles.end());
  std::set<std::string> seen;
  int rank = -1;
  for (size_t i = 0; i < handles.size(); ++i) {
    const MemberHandle handle = MemberHandle::parse(handles[i]);
    XCCL_CHECK_ARG(handle.job == job, "reconfigure: handle '", handles[i],
                   "' comes from another job (its job token is ", handle.job, ", this job's is ",
                   job, "): members must share the job's store");
    XCCL_CHECK_ARG(seen.insert(handles[i]).second, "reconfigure: handle '", handles[i],
                   "' appears twice (positions ",
                   std::find(handles.begin(), handles.end(), handles[i]) - handles.begin(), " and ",
                   i, ")");
    if (handles[i] == mine) rank = static_cast<int>(i);
  }
  XCCL_CHECK_ARG(rank >= 0, "reconfigure: this member's handle '", mine, "' is not among the ",
                 handles.size(),
                 " handles (a member passes its own torch.distributed._get_reconfigure_handle())");
  return rank;
}

void claimUuid(Store& store, const std::string& prefix, int64_t uuid,
               const std::vector<std::string>& handles, std::chrono::milliseconds timeout) {
  const std::string members = joined(handles);
  if (store.add(prefix + "claims", 1) == 1) {
    store.set(prefix + "members", toBytes(members));
    return;
  }
  // The first claimer publishes right after its add(): a short wait, unless it died in between.
  const std::string claimed = toString(store.get(prefix + "members", timeout));
  XCCL_CHECK_ARG(claimed == members, "reconfigure: uuid ", uuid,
                 " was already used in this job for another membership (",
                 std::count(claimed.begin(), claimed.end(), '\n'),
                 " members); pass a fresh uuid to every member");
}

void awaitMembers(Store& store, const std::string& prefix, int64_t uuid, int rank,
                  const std::vector<std::string>& handles, std::chrono::milliseconds timeout) {
  const Deadline end = Clock::now() + timeout;
  store.set(prefix + "arrived/" + std::to_string(rank), toBytes(handles[rank]));
  std::string missing;
  for (size_t r = 0; r < handles.size(); ++r) {
    // Past the deadline each remaining member still gets a 1 ms look, so the error names every
    // member missing, not only the first.
    const auto left =
        std::max(std::chrono::milliseconds(1),
                 std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()));
    try {
      const std::string arrived =
          toString(store.get(prefix + "arrived/" + std::to_string(r), left));
      // claimUuid made every member agree on the list, so a difference is a broken store.
      XCCL_CHECK(arrived == handles[r], "reconfigure uuid ", uuid, ": rank ", r, " arrived as '",
                 arrived, "', expected '", handles[r], "'");
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kTimeout) throw;
      missing += std::string(missing.empty() ? "" : ", ") + "rank " + std::to_string(r) +
                 " (handle " + handles[r] + ")";
    }
  }
  if (!missing.empty()) {
    XCCL_THROW(ErrorKind::kTimeout, "reconfigure uuid ", uuid, ": ", missing,
               " never arrived within ", timeout.count(),
               " ms (a member died, or did not call torch.distributed._reconfigure with this "
               "uuid)");
  }
}

}  // namespace xccl::net
