// The group's measured tuning table (algo/tuning.h): what each rank's tuning source (the
// group's policy, group_policy.h) found, agreed on rank 0's through the store once the routes are
// known, so that every rank plans alike (docs/tuning.md). A bad table never fails a group: it
// plans by the rules and says why.
#include <algorithm>

#include "backend/core/group_core.h"
#include "common/logging.h"

namespace xccl::backend {

void Membership::setUpTuning(net::Store& store, std::chrono::milliseconds timeout) {
  const algo::TuningAnswer mine = policy_.askTuning();
  // Matched against the shape every Runner of this membership plans with (shapeOf the layout).
  tuning_ = algo::agreeOnTuning(store, "tuning", rank_, size_, mine, shape_, timeout);
  const std::string group = "group '" + options_->group_name + "': ";
  if (mine.text.size() > algo::kTuningMaxTextBytes) {
    XCCL_WARN("tuning", group, "this rank's tuning table is ", mine.text.size(),
              " bytes, more than the ", algo::kTuningMaxTextBytes, " allowed: ignored");
  }
  const auto& dissent = tuning_.dissenting;
  if (std::find(dissent.begin(), dissent.end(), rank_) != dissent.end()) {
    XCCL_WARN("tuning", group, "this rank's tuning table differs from rank 0's (",
              mine.text.empty() ? "none here: " + mine.why : "another text",
              "); following rank 0: ", tuning_.why);
  }
  if (rank_ != 0) return;
  if (!tuning_.parseError.empty()) {
    XCCL_WARN("tuning", group,
              "rank 0's tuning table is malformed, planning by the rules: ", tuning_.parseError);
  } else if (!tuning_.mismatch.empty()) {
    // Subgroups of a tuned world are normal: they plan by the rules.
    XCCL_INFO("tuning", group, "tuning table not used: ", tuning_.mismatch);
  } else if (tuning_.table) {
    XCCL_INFO("tuning", group, "planning from rank 0's tuning table (", tuning_.table->cpu.size(),
              " cpu and ", tuning_.table->gpu.size(), " gpu entries)",
              dissent.empty() ? "" : "; ranks " + net::formatRanks(dissent) + " had another");
  }
}

}  // namespace xccl::backend
