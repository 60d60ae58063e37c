// Which tuning table (algo/tuning.h) a group plans from, agreed at group creation: every rank
// publishes what its own source found (text and why); rank 0's text wins on every rank, parsed
// there alike, so a rank whose file differs cannot plan otherwise and hang its peers. The group's
// shape (hosts included) is the caller's, from the group's layout (net/rendezvous/group_layout.h).
// Nothing here throws for a bad table: a malformed text or a table made for another group shape
// means the rules, with the reason.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "algo/tuning.h"
#include "net/rendezvous/agree.h"
#include "net/rendezvous/store.h"

namespace xccl::algo {

// What a rank's source (Python's xccl.tuning.source) answered: text "" = no table, and why.
struct TuningAnswer {
  std::string text;
  std::string why;
};

struct TuningAgreement {
  std::shared_ptr<const TuningTable> table;  // null: the rules alone
  std::string text;  // the canonical text the group plans from; "" without a table
  std::string why;   // "rank 0's table", "no table: ...", or the shape mismatch
  // Ranks whose own text differed from rank 0's (the same list on every rank).
  std::vector<int> dissenting;
  std::string parseError;  // rank 0's text was malformed: the parser's message naming the line
  std::string mismatch;    // rank 0's table was made for another group shape: why
};

// Pure: the verdict from every rank's published settings (encodeTuningAnswer's), for a group of
// `shape` (algo::shapeOf of its layout: hosts come from the group's census, not from here).
TuningAgreement tuningVerdict(const std::vector<net::Settings>& byRank, const GroupShape& shape);
net::Settings encodeTuningAnswer(const TuningAnswer& answer);

// Collective over the store, like net::agreeOnRankZero (a fresh `key` per group and membership).
// A text over kTuningMaxTextBytes is published as no table (why says so). Throws only what the
// store exchange throws (kTimeout naming the missing ranks).
TuningAgreement agreeOnTuning(net::Store& store, const std::string& key, int rank, int size,
                              const TuningAnswer& mine, const GroupShape& shape,
                              std::chrono::milliseconds timeout);

}  // namespace xccl::algo
