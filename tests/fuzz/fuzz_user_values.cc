// libFuzzer target: arbitrary text as a value a user wrote, through the parsers that read one: an
// XCCL_* variable's value (common/env.h checkValue, every declared variable), a topology file
// (XCCL_TOPO_FILE: topo::fromJson and its JSON reader) and a cpu list (a topology file's "cpus").
// The first byte picks the parser (and the variable), the rest is the value. What must hold
// beyond ASan/UBSan: bad input is refused with xccl::Error carrying a message (never another
// exception), an accepted value is within its bounds, and its canonical form reads back alike.
// Seeds: make_seeds.py.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/error.h"
#include "topo/json.h"
#include "topo/sysfs.h"
#include "topo/topology.h"

namespace {

using namespace xccl;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "invariant broken: %s\n", what);
  std::abort();
}

void require(bool ok, const char* what) {
  if (!ok) fail(what);
}

void envValue(uint8_t pick, const std::string& value) {
  const std::vector<env::Variable>& all = env::all();
  const env::Variable& var = all[pick % all.size()];
  const std::string canonical = env::checkValue(var, value);
  require(env::checkValue(var, canonical) == canonical, "canonical value does not read back");
  switch (var.kind) {
    case env::Kind::kText: require(canonical == value, "text changed"); break;
    case env::Kind::kBoolean: require(canonical == "1" || canonical == "0", "boolean"); break;
    case env::Kind::kInteger: {
      const long long n = std::stoll(canonical);  // canonical decimal: cannot fail
      require(n >= var.min && n <= var.max && n % var.multipleOf == 0, "integer out of range");
      break;
    }
    case env::Kind::kChoice: {
      bool declared = false;
      for (const std::string& entry : var.choices) {
        declared = declared || entry == canonical || entry.rfind(canonical + "|", 0) == 0;
      }
      require(declared, "a choice that is not declared");
      break;
    }
    case env::Kind::kBytesPerCollective: {
      const auto set = env::bytesPerCollective(var, value);
      require(!set.empty() && set.size() <= var.collectives.size(), "no or too many entries");
      require(env::bytesPerCollective(var, canonical) == set, "canonical value means another");
      size_t next = 0;  // entries in the variable's order, each collective once
      for (const auto& [collective, bytes] : set) {
        while (next < var.collectives.size() && var.collectives[next] != collective) ++next;
        require(next < var.collectives.size(), "a collective out of order or not declared");
        ++next;
        require(bytes == env::kNever || (bytes >= static_cast<uint64_t>(var.min) &&
                                         bytes <= static_cast<uint64_t>(var.max)),
                "bytes out of range");
      }
      break;
    }
  }
}

void cpuList(const std::string& text) {
  const std::vector<int> cpus = topo::parseCpuList(text);
  require(cpus.size() <= topo::kMaxCpus, "more cpus than the bound");
  require(std::is_sorted(cpus.begin(), cpus.end()) &&
              std::adjacent_find(cpus.begin(), cpus.end()) == cpus.end(),
          "cpu list not sorted and unique");
  require(cpus.empty() || cpus.front() >= 0, "negative cpu");
  require(topo::parseCpuList(topo::formatCpuList(cpus)) == cpus, "cpu list round trip");
}

void json(const std::string& text) {
  const topo::Json value = topo::Json::parse(text);
  const std::string dumped = value.dump();
  require(topo::Json::parse(dumped).dump() == dumped, "JSON round trip");
}

void topology(const std::string& text) {
  const topo::Topology parsed = topo::fromJson(text);
  const int gpus = static_cast<int>(parsed.gpus.size());
  for (const topo::GpuLink& link : parsed.gpuLinks) {
    require(link.gpuA >= 0 && link.gpuA < link.gpuB && link.gpuB < gpus, "link to no GPU");
  }
  for (size_t i = 0; i < parsed.gpus.size(); ++i) {
    require(parsed.gpus[i].index == static_cast<int>(i), "GPU index");
  }
  const std::string dumped = topo::toJson(parsed);
  require(topo::toJson(topo::fromJson(dumped)) == dumped, "topology round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: envValue(data[0] / 4, text); break;
      case 1: cpuList(text); break;
      case 2: json(text); break;
      default: topology(text); break;
    }
  } catch (const Error& e) {
    require(std::strlen(e.what()) > 0, "an error without a message");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not an xccl::Error: %s\n", e.what());
    std::abort();
  }
  return 0;
}
