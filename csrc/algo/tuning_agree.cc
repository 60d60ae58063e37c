#include "algo/tuning_agree.h"

#include "common/error.h"
#include "net/rendezvous/bootstrap.h"

namespace xccl::algo {
namespace {

// A setting's value by name, or nullptr (a peer of another build, or damaged bytes).
const std::string* valueOf(const net::Settings& settings, const char* name) {
  for (const auto& [key, value] : settings) {
    if (key == name) return &value;
  }
  return nullptr;
}

}  // namespace

net::Settings encodeTuningAnswer(const TuningAnswer& answer) {
  if (answer.text.size() > kTuningMaxTextBytes) {
    // Never through the store: every rank would read it.
    return {{"text", ""},
            {"why", detail::concat("ignored: the table is ", answer.text.size(),
                                   " bytes, more than the ", kTuningMaxTextBytes, " allowed")}};
  }
  return {{"text", answer.text}, {"why", answer.why}};
}

TuningAgreement tuningVerdict(const std::vector<net::Settings>& byRank, const GroupShape& shape) {
  TuningAgreement out;
  std::vector<std::string> texts;
  for (size_t r = 0; r < byRank.size(); ++r) {
    const std::string* text = valueOf(byRank[r], "text");
    // An unreadable answer counts as no table (and as dissent when rank 0 has one).
    texts.push_back(text != nullptr ? *text : "");
  }
  const net::RankZeroVerdict verdict = net::rankZeroVerdict(texts);
  out.dissenting = verdict.dissenting;
  if (verdict.value.empty()) {
    const std::string* why = byRank.empty() ? nullptr : valueOf(byRank[0], "why");
    out.why = why != nullptr && !why->empty() ? "no table: " + *why : "no table";
    return out;
  }
  try {
    auto table = std::make_shared<TuningTable>(parseTuningTable(verdict.value));
    out.mismatch = tuningMismatch(*table, shape);
    if (!out.mismatch.empty()) {
      out.why = out.mismatch;
      return out;
    }
    out.text = formatTuningTable(*table);
    out.table = std::move(table);
    out.why = "rank 0's table";
  } catch (const Error& e) {
    out.parseError = e.what();
    out.why = "no table: rank 0's table is malformed: " + out.parseError;
  }
  return out;
}

TuningAgreement agreeOnTuning(net::Store& store, const std::string& key, int rank, int size,
                              const TuningAnswer& mine, const GroupShape& shape,
                              std::chrono::milliseconds timeout) {
  const net::Bootstrap bootstrap(store, "", rank, size, timeout);
  const std::vector<net::Bytes> all =
      bootstrap.allGather(key, net::encodeSettings(encodeTuningAnswer(mine)));
  std::vector<net::Settings> byRank;
  for (const net::Bytes& bytes : all) {
    try {
      byRank.push_back(net::decodeSettings(bytes));
    } catch (const Error&) {
      byRank.emplace_back();  // damaged bytes: no answer from that rank
    }
  }
  return tuningVerdict(byRank, shape);
}

}  // namespace xccl::algo
