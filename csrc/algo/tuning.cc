#include "algo/tuning.h"

#include <algorithm>
#include <tuple>

#include "common/error.h"

namespace xccl::algo {
namespace {

// One line of the text, split at single spaces, with its 1-based number for every error.
class Line {
 public:
  Line(size_t number, const std::string& text) : number_(number) {
    size_t start = 0;
    for (;;) {
      const size_t space = text.find(' ', start);
      const size_t end = space == std::string::npos ? text.size() : space;
      fields_.push_back(text.substr(start, end - start));
      if (space == std::string::npos) break;
      start = space + 1;
    }
    for (const std::string& f : fields_) {
      if (f.empty()) fail("empty field (fields are separated by single spaces)");
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    XCCL_THROW(ErrorKind::kInvalidArgument, "tuning table line ", number_, ": ", what);
  }
  void expectFields(size_t n, const char* shape) const {
    if (fields_.size() != n) {
      fail(detail::concat("expected ", n, " fields (", shape, "), got ", fields_.size()));
    }
  }
  const std::string& operator[](size_t i) const { return fields_[i]; }

  // A plain decimal (no sign, no leading zeros but "0") that fits 64 bits; `inf` where allowed.
  uint64_t number(size_t i, const char* what, bool infAllowed = false) const {
    const std::string& f = fields_[i];
    if (infAllowed && f == "inf") return kTuningInf;
    if (f.size() > 1 && f[0] == '0') fail(detail::concat(what, " '", f, "' has a leading zero"));
    uint64_t value = 0;
    for (char ch : f) {
      if (ch < '0' || ch > '9') {
        fail(detail::concat(what, " '", printable(f), "' is not a decimal integer"));
      }
      if (__builtin_mul_overflow(value, uint64_t{10}, &value) ||
          __builtin_add_overflow(value, static_cast<uint64_t>(ch - '0'), &value)) {
        fail(detail::concat(what, " '", printable(f), "' does not fit 64 bits"));
      }
    }
    return value;
  }
  size_t number() const { return number_; }

  // At most 40 characters, bytes outside printable ASCII as '?': a hostile field stays short.
  static std::string printable(const std::string& f) {
    std::string out = f.substr(0, 40);
    for (char& ch : out) {
      if (ch < 0x20 || ch > 0x7e) ch = '?';
    }
    return f.size() > 40 ? out + "..." : out;
  }

 private:
  size_t number_;
  std::vector<std::string> fields_;
};

// The value of the name in field `i` among the vocabulary rows `rows` that `allowed` accepts
// (common/vocabulary.h); fails naming `what` otherwise.
template <typename Row, size_t N, typename Allowed>
auto named(const Line& line, size_t i, const Row (&rows)[N], Allowed allowed, const char* what) {
  for (const Row& row : rows) {
    if (allowed(row) && line[i] == row.name) return row.id;
  }
  line.fail(detail::concat("unknown ", what, " '", Line::printable(line[i]), "'"));
}

constexpr auto kAny = [](const auto&) { return true; };

CpuTuningEntry parseCpu(const Line& line) {
  line.expectFields(9, "cpu collective min max route algorithm chunk tuned_ns rule_ns");
  CpuTuningEntry e;
  e.collective = named(line, 1, vocab::kCollectiveRows, kAny, "cpu collective");
  e.minBytes = line.number(2, "min_bytes");
  e.maxBytes = line.number(3, "max_bytes", /*infAllowed=*/true);
  e.route = named(line, 4, vocab::kCpuRouteRows, kAny, "cpu route");
  // A table names what it measured: never auto.
  e.algorithm = named(
      line, 5, vocab::kAlgorithmRows,
      [](const vocab::AlgorithmRow& a) { return a.kind != vocab::AlgorithmKind::kPlanner; },
      "cpu algorithm");
  e.ringChunkBytes = line.number(6, "ring_chunk_bytes");
  e.tunedNs = line.number(7, "tuned_ns");
  e.ruleNs = line.number(8, "rule_ns");
  const Collective c = e.collective;
  const bool possible = vocab::cpuLegal(c, e.route, e.algorithm);
  if (!possible) {
    line.fail(detail::concat(collectiveName(c), " cannot run ", algorithmName(e.algorithm),
                             " over ", cpuRouteName(e.route)));
  }
  if (e.ringChunkBytes != 0 &&
      (e.ringChunkBytes < kTuningMinChunkBytes || e.ringChunkBytes > kTuningMaxChunkBytes)) {
    line.fail(detail::concat("ring_chunk_bytes ", e.ringChunkBytes, " is outside 4096..",
                             kTuningMaxChunkBytes, " (or 0)"));
  }
  return e;
}

GpuTuningEntry parseGpu(const Line& line) {
  line.expectFields(8, "gpu collective min max route kernel tuned_ns rule_ns");
  GpuTuningEntry e;
  // Only the collectives a kernel runs: elsewhere there is no choice to measure.
  e.collective = named(
      line, 1, vocab::kGpuCollectiveRows,
      [](const vocab::GpuCollectiveRow& c) { return vocab::hasKernel(c.id); }, "gpu collective");
  e.minBytes = line.number(2, "min_bytes");
  e.maxBytes = line.number(3, "max_bytes", /*infAllowed=*/true);
  e.route = named(
      line, 4, vocab::kGpuRouteRows, [](const vocab::GpuRouteRow& r) { return r.tunable; },
      "gpu route");
  if (!vocab::kernelOf(e.collective, line[5].c_str(), &e.kernel)) {
    line.fail(detail::concat("gpu kernel '", Line::printable(line[5]), "' is not one of ",
                             gpuCollectiveName(e.collective), "'s"));
  }
  if ((e.kernel == GpuKernel::kNone) != (e.route == GpuRoute::kVendor)) {
    line.fail(detail::concat("kernel must be '", vocab::name(GpuKernel::kNone),
                             "' exactly when the route is '", vocab::name(GpuRoute::kVendor), "'"));
  }
  e.tunedNs = line.number(6, "tuned_ns");
  e.ruleNs = line.number(7, "rule_ns");
  return e;
}

// Ranges of one collective sorted by start must each end where the next may begin.
template <typename Entry, typename Key>
void checkOverlaps(const std::vector<Entry>& entries, const std::vector<size_t>& lines,
                   const char* device, Key (*)(const Entry&)) {
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_tuple(entries[a].collective, entries[a].minBytes, lines[a]) <
           std::make_tuple(entries[b].collective, entries[b].minBytes, lines[b]);
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const Entry& prev = entries[order[k - 1]];
    const Entry& cur = entries[order[k]];
    if (prev.collective == cur.collective && cur.minBytes < prev.maxBytes) {
      XCCL_THROW(ErrorKind::kInvalidArgument, "tuning table line ",
                 std::max(lines[order[k]], lines[order[k - 1]]), ": this ", device,
                 " range overlaps the one on line ",
                 std::min(lines[order[k]], lines[order[k - 1]]));
    }
  }
}

template <typename Entry>
int keyOf(const Entry&) {
  return 0;
}

std::string maxText(uint64_t bytes) {
  return bytes == kTuningInf ? std::string("inf") : std::to_string(bytes);
}

// Message bytes (the table's convention) of a CPU request of `request` bytes per rank.
uint64_t messageBytes(Collective c, size_t request, int worldSize) {
  switch (c) {
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kGather:
    case Collective::kScatter: {
      uint64_t message = 0;
      // Saturates: a request so large still falls in the range that reaches `inf`.
      if (__builtin_mul_overflow(static_cast<uint64_t>(request),
                                 static_cast<uint64_t>(std::max(worldSize, 1)), &message)) {
        return kTuningInf - 1;
      }
      return message;
    }
    default: return request;
  }
}

}  // namespace

bool operator==(const CpuTuningEntry& a, const CpuTuningEntry& b) {
  return std::tie(a.collective, a.minBytes, a.maxBytes, a.route, a.algorithm, a.ringChunkBytes,
                  a.tunedNs, a.ruleNs) == std::tie(b.collective, b.minBytes, b.maxBytes, b.route,
                                                   b.algorithm, b.ringChunkBytes, b.tunedNs,
                                                   b.ruleNs);
}

bool operator==(const GpuTuningEntry& a, const GpuTuningEntry& b) {
  return std::tie(a.collective, a.minBytes, a.maxBytes, a.route, a.kernel, a.tunedNs, a.ruleNs) ==
         std::tie(b.collective, b.minBytes, b.maxBytes, b.route, b.kernel, b.tunedNs, b.ruleNs);
}

bool operator==(const TuningTable& a, const TuningTable& b) {
  return a.worldSize == b.worldSize && a.hosts == b.hosts && a.locality == b.locality &&
         a.cpu == b.cpu && a.gpu == b.gpu;
}

TuningTable parseTuningTable(const std::string& text) {
  XCCL_CHECK_ARG(text.size() <= kTuningMaxTextBytes, "tuning table: ", text.size(),
                 " bytes, more than the ", kTuningMaxTextBytes, " allowed");
  TuningTable table;
  std::vector<size_t> cpuLines, gpuLines;
  size_t number = 0;
  size_t start = 0;
  while (start < text.size()) {
    const size_t newline = text.find('\n', start);
    const size_t end = newline == std::string::npos ? text.size() : newline;
    const Line line(++number, text.substr(start, end - start));
    start = end + 1;
    if (number == 1) {
      if (line[0] != "xccl-tuning" || text.compare(0, end, "xccl-tuning 1") != 0) {
        line.fail("expected 'xccl-tuning 1'");
      }
      continue;
    }
    if (number == 2) {
      line.expectFields(4, "world size hosts locality");
      if (line[0] != "world") line.fail("expected the world line");
      const uint64_t size = line.number(1, "world size");
      const uint64_t hosts = line.number(2, "hosts");
      if (size < 1 || size > INT32_MAX || hosts < 1 || hosts > size) {
        line.fail(detail::concat("world ", size, " ranks on ", hosts,
                                 " hosts is impossible (1 <= hosts <= size <= 2^31-1)"));
      }
      table.worldSize = static_cast<int>(size);
      table.hosts = static_cast<int>(hosts);
      table.locality = named(line, 3, vocab::kLocalityRows, kAny, "locality");
      continue;
    }
    if (table.cpu.size() + table.gpu.size() >= kTuningMaxEntries) {
      line.fail(detail::concat("more than ", kTuningMaxEntries, " entries"));
    }
    if (line[0] == "cpu") {
      table.cpu.push_back(parseCpu(line));
      cpuLines.push_back(number);
    } else if (line[0] == "gpu") {
      table.gpu.push_back(parseGpu(line));
      gpuLines.push_back(number);
    } else {
      line.fail(detail::concat("unknown line kind '", Line::printable(line[0]),
                               "' (cpu or gpu expected)"));
    }
    const uint64_t lo = line.number(2, "min_bytes");
    const uint64_t hi = line.number(3, "max_bytes", true);
    if (lo >= hi)
      line.fail(detail::concat("min_bytes ", lo, " is not below max_bytes ", maxText(hi)));
  }
  XCCL_CHECK_ARG(number >= 2, "tuning table line ", number + 1,
                 ": missing (the header and the world line are required)");
  checkOverlaps(table.cpu, cpuLines, "cpu", keyOf<CpuTuningEntry>);
  checkOverlaps(table.gpu, gpuLines, "gpu", keyOf<GpuTuningEntry>);
  return table;
}

std::string formatTuningTable(const TuningTable& t) {
  std::string out = detail::concat("xccl-tuning 1\nworld ", t.worldSize, " ", t.hosts, " ",
                                   localityName(t.locality), "\n");
  for (const CpuTuningEntry& e : t.cpu) {
    out += detail::concat("cpu ", collectiveName(e.collective), " ", e.minBytes, " ",
                          maxText(e.maxBytes), " ", cpuRouteName(e.route), " ",
                          algorithmName(e.algorithm), " ", e.ringChunkBytes, " ", e.tunedNs, " ",
                          e.ruleNs, "\n");
  }
  for (const GpuTuningEntry& e : t.gpu) {
    out += detail::concat("gpu ", gpuCollectiveName(e.collective), " ", e.minBytes, " ",
                          maxText(e.maxBytes), " ", gpuRouteName(e.route), " ",
                          vocab::family(e.kernel), " ", e.tunedNs, " ", e.ruleNs, "\n");
  }
  return out;
}

const CpuTuningEntry* findCpu(const TuningTable& table, Collective collective, size_t requestBytes,
                              int worldSize) {
  const bool sizeless = vocab::rowOf(vocab::kCollectiveRows, collective).wholeRange;
  const uint64_t message = messageBytes(collective, requestBytes, worldSize);
  for (const CpuTuningEntry& e : table.cpu) {
    if (e.collective != collective) continue;
    if (sizeless ? (e.minBytes == 0 && e.maxBytes == kTuningInf)
                 : (e.minBytes <= message && message < e.maxBytes)) {
      return &e;
    }
  }
  return nullptr;
}

const GpuTuningEntry* findGpu(const TuningTable& table, GpuCollective collective, size_t bytes) {
  for (const GpuTuningEntry& e : table.gpu) {
    if (e.collective == collective && e.minBytes <= bytes && bytes < e.maxBytes) return &e;
  }
  return nullptr;
}

std::string tuningMismatch(const TuningTable& table, const GroupShape& shape) {
  if (table.worldSize == shape.worldSize && table.hosts == shape.hosts &&
      table.locality == shape.locality) {
    return "";
  }
  return detail::concat("table for world ", table.worldSize, "/", table.hosts, "/",
                        localityName(table.locality), ", group is ", shape.worldSize, "/",
                        shape.hosts, "/", localityName(shape.locality));
}

const char* localityName(Locality locality) { return vocab::name(locality); }

}  // namespace xccl::algo
