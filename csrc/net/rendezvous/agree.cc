#include "net/rendezvous/agree.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/error.h"
#include "common/ranges.h"
#include "net/rendezvous/bootstrap.h"

namespace xccl::net {
namespace {

// Groups ranks by value, groups in order of their lowest rank (deterministic: every rank builds
// the same text from the same gathered values).
std::vector<std::pair<std::string, std::vector<int>>> groupByValue(
    const std::vector<std::string>& values) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < static_cast<int>(values.size()); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == values[r]; });
    if (it == groups.end()) {
      groups.push_back({values[r], {r}});
    } else {
      it->second.push_back(r);
    }
  }
  return groups;
}

std::string whichRanks(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + formatRanks(ranks);
}

void putLength(Bytes& out, size_t length) {
  XCCL_CHECK(length <= UINT32_MAX, "setting of ", length, " bytes");
  const auto value = static_cast<uint32_t>(length);
  const auto* p = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), p, p + sizeof(value));
}

}  // namespace

std::string formatRanks(const std::vector<int>& ranks) { return formatRanges(ranks); }

Bytes encodeSettings(const Settings& settings) {
  Bytes out;
  putLength(out, settings.size());
  for (const auto& [name, value] : settings) {
    putLength(out, name.size());
    out.insert(out.end(), name.begin(), name.end());
    putLength(out, value.size());
    out.insert(out.end(), value.begin(), value.end());
  }
  return out;
}

Settings decodeSettings(const Bytes& bytes) {
  size_t at = 0;
  auto take = [&](size_t n) {
    if (bytes.size() - at < n) {
      XCCL_THROW(ErrorKind::kInternal, "malformed settings record: truncated at byte ", at, " of ",
                 bytes.size());
    }
    const uint8_t* p = bytes.data() + at;
    at += n;
    return p;
  };
  auto length = [&] {
    uint32_t value;
    std::memcpy(&value, take(sizeof(value)), sizeof(value));
    return size_t{value};
  };
  auto text = [&] {
    const size_t n = length();
    const auto* p = reinterpret_cast<const char*>(take(n));
    return std::string(p, n);
  };
  Settings settings;
  for (size_t count = length(); count > 0; --count) {
    std::string name = text();
    settings.emplace_back(std::move(name), text());
  }
  if (at != bytes.size()) {
    XCCL_THROW(ErrorKind::kInternal, "malformed settings record: ", bytes.size() - at,
               " trailing bytes");
  }
  return settings;
}

std::string settingsMismatch(const std::vector<Settings>& byRank) {
  // Every name any rank has, in order of first appearance (rank 0's order when all agree).
  std::vector<std::string> names;
  for (const Settings& settings : byRank) {
    for (const auto& setting : settings) {
      if (std::find(names.begin(), names.end(), setting.first) == names.end()) {
        names.push_back(setting.first);
      }
    }
  }
  std::string out;
  for (const std::string& name : names) {
    std::vector<std::string> values;
    for (const Settings& settings : byRank) {
      auto it = std::find_if(settings.begin(), settings.end(),
                             [&](const auto& s) { return s.first == name; });
      values.push_back(it == settings.end() ? "(absent)"
                       : it->second.empty() ? "(unset)"
                                            : "'" + it->second + "'");
    }
    const auto groups = groupByValue(values);
    if (groups.size() == 1) continue;
    out += (out.empty() ? "" : "; ") + name + " differs across ranks: ";
    for (size_t g = 0; g < groups.size(); ++g) {
      out += (g == 0 ? "" : ", ") + whichRanks(groups[g].second) +
             (groups[g].second.size() == 1 ? " has " : " have ") + groups[g].first;
    }
  }
  return out;
}

void agreeOnSettings(Store& store, const std::string& key, int rank, int size,
                     const Settings& settings, std::chrono::milliseconds timeout) {
  XCCL_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "agreeOnSettings: bad rank ", rank, " of ",
                 size);
  const std::vector<Bytes> all =
      Bootstrap(store, "", rank, size, timeout).allGather(key, encodeSettings(settings));
  std::vector<Settings> byRank;
  for (const Bytes& bytes : all) byRank.push_back(decodeSettings(bytes));
  const std::string mismatch = settingsMismatch(byRank);
  XCCL_CHECK_ARG(mismatch.empty(), mismatch,
                 " (every rank of a group must use the same value: set it alike on every rank)");
}

RankZeroVerdict rankZeroVerdict(const std::vector<std::string>& byRank) {
  RankZeroVerdict verdict;
  if (byRank.empty()) return verdict;
  verdict.value = byRank[0];
  for (int r = 1; r < static_cast<int>(byRank.size()); ++r) {
    if (byRank[r] != verdict.value) verdict.dissenting.push_back(r);
  }
  return verdict;
}

RankZeroVerdict agreeOnRankZero(Store& store, const std::string& key, int rank, int size,
                                const std::string& mine, std::chrono::milliseconds timeout) {
  XCCL_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "agreeOnRankZero: bad rank ", rank, " of ",
                 size);
  // All answers, not only rank 0's: every rank then knows who dissented, for the log.
  return rankZeroVerdict(Bootstrap(store, "", rank, size, timeout).allGather(key, mine));
}

std::string tally(const std::vector<std::string>& objections) {
  std::vector<std::string> reasons;
  std::vector<int> objecting;
  for (int r = 0; r < static_cast<int>(objections.size()); ++r) {
    if (objections[r].empty()) continue;
    reasons.push_back(objections[r]);
    objecting.push_back(r);
  }
  std::string out;
  for (const auto& [reason, group] : groupByValue(reasons)) {
    std::vector<int> ranks;
    for (int i : group) ranks.push_back(objecting[i]);
    out += (out.empty() ? "" : "; ") + whichRanks(ranks) + ": " + reason;
  }
  return out;
}

// A verdict text, so it lives with the others: bootstrap.cc would otherwise include this file
// while this file includes bootstrap.h for agreeOnSettings's exchange.
std::string Agreement::all() const { return tally(failures); }

}  // namespace xccl::net
