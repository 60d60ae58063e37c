#include "net/rendezvous/hosts.h"

#include <algorithm>

#include "common/error.h"

namespace xccl::net {

Hosts Hosts::of(const std::vector<std::string>& identityByRank) {
  Hosts hosts;
  for (const std::string& identity : identityByRank) {
    auto it = std::find(hosts.identities.begin(), hosts.identities.end(), identity);
    hosts.hostOf.push_back(static_cast<int>(it - hosts.identities.begin()));
    if (it == hosts.identities.end()) hosts.identities.push_back(identity);
  }
  return hosts;
}

std::vector<int> Hosts::ranksOn(int host) const {
  std::vector<int> ranks;
  for (int r = 0; r < static_cast<int>(hostOf.size()); ++r) {
    if (hostOf[r] == host) ranks.push_back(r);
  }
  return ranks;
}

std::vector<int> Hosts::leaders() const {
  std::vector<int> leaders;
  for (int host = 0; host < count(); ++host) {
    leaders.push_back(
        static_cast<int>(std::find(hostOf.begin(), hostOf.end(), host) - hostOf.begin()));
  }
  return leaders;
}

Census takeCensus(const Bootstrap& bootstrap, const std::string& key, const std::string& identity,
                  bool takesPart) {
  // "<1 or 0><identity>": one record per rank, so the group learns both in one exchange.
  const std::vector<std::string> records =
      bootstrap.allGather(key, (takesPart ? "1" : "0") + identity);
  Census census;
  std::vector<std::string> identities;
  for (int r = 0; r < static_cast<int>(records.size()); ++r) {
    // A record of another build, or a stale or foreign key: never read past its end.
    XCCL_CHECK(!records[r].empty() && (records[r][0] == '0' || records[r][0] == '1'), "rank ", r,
               " published the host record '", records[r], "' (expected 0 or 1, then its host)");
    if (records[r][0] == '0' && census.firstAbsent < 0) census.firstAbsent = r;
    identities.push_back(records[r].substr(1));
  }
  census.hosts = Hosts::of(identities);
  return census;
}

}  // namespace xccl::net
