// Group-wide agreement on settings at group creation: one all-gather through the store
// (net/rendezvous/bootstrap.h) after which every rank holds the same bytes and so reaches the same
// verdict; and the texts that verdicts are made of (also Agreement::all() in bootstrap.h).
//
// agreeOnSettings is collective: every rank of the group calls it with the same key, rank in
// [0, size) and size. Keys must be fresh for each call (a store never forgets a key: a reused key
// reads the previous call's values). Throws kTimeout naming the ranks that never publish.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "net/rendezvous/store.h"

namespace xccl::net {

using Settings = std::vector<std::pair<std::string, std::string>>;  // (name, value) in order

// Every rank publishes `settings`; when any setting's value differs between ranks, every rank
// throws the same kInvalidArgument naming each such setting and which ranks have which value
// (settingsMismatch()). Returns normally on every rank otherwise. A name one rank lacks counts as
// a difference (its value shows as "(absent)"), so ranks of different builds are caught too.
void agreeOnSettings(Store& store, const std::string& key, int rank, int size,
                     const Settings& settings, std::chrono::milliseconds timeout);

// Pure: "" when all ranks' settings agree, else one sentence per differing setting, in the order
// of first appearance, e.g. "XCCL_GPU_ALGO differs across ranks: ranks 0-2,4 have 'auto', rank 3
// has 'kernel'". Ranks are grouped by value, groups ordered by their lowest rank; an empty value
// shows as "(unset)".
std::string settingsMismatch(const std::vector<Settings>& byRank);

// A decision one rank makes for the whole group (rank 0's answer wins): whether xccl's GPU
// kernels count as verified, read from rank 0's cache, so that a rank with another cache (another
// user, a stale stamp) cannot plan differently and hang its peers. Collective like
// agreeOnSettings; every rank returns the same verdict.
struct RankZeroVerdict {
  std::string value;             // rank 0's `mine`
  std::vector<int> dissenting;   // ranks whose own `mine` differed (the same list on every rank)
};
RankZeroVerdict agreeOnRankZero(Store& store, const std::string& key, int rank, int size,
                                const std::string& mine, std::chrono::milliseconds timeout);
// Pure: the verdict from every rank's answer (byRank[0] wins; empty input: no answer, nobody
// dissenting).
RankZeroVerdict rankZeroVerdict(const std::vector<std::string>& byRank);

// Pure: "" when every rank's objection is "" (yes), else each objecting rank's reason, grouped
// like settingsMismatch ("rank 1: no peer access to rank 0; ranks 2-3: out of memory").
std::string tally(const std::vector<std::string>& objections);

// "0-2,4,7": sorted ranks with consecutive runs collapsed (for messages over large groups).
std::string formatRanks(const std::vector<int>& ranks);

// Codec of Settings for the store (length-prefixed, so names and values may hold any bytes).
// decodeSettings throws kInternal on anything encodeSettings would not produce.
Bytes encodeSettings(const Settings& settings);
Settings decodeSettings(const Bytes& bytes);

}  // namespace xccl::net
