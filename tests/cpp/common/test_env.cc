// The XCCL_* registry (common/env.h): every kind's parsing and range checks, the table's own
// consistency, docs/environment.md's "Accepted" column, and reads from a real environment (in a
// fresh process each: values are cached per process).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/error.h"
#include "common/logging.h"
#include "threads.h"

namespace xccl::env {
namespace {

using testing::errorKindOf;
using testing::inFreshProcess;
using testing::invalidArgumentMessage;

Variable testVariable(const char* name, Kind kind) {
  Variable v;
  v.name = name;
  v.defaultValue = "";
  v.meaning = "test";
  v.kind = kind;
  return v;
}

Variable integerVariable(int64_t min, int64_t max, int64_t multipleOf) {
  Variable v = testVariable("XCCL_TEST_INT", Kind::kInteger);
  v.min = min;
  v.max = max;
  v.multipleOf = multipleOf;
  return v;
}

TEST(EnvIntegers, AcceptDecimalAndHexWithinTheRange) {
  const Variable v = integerVariable(-16, 1 << 20, 1);
  EXPECT_EQ(checkValue(v, "0"), "0");
  EXPECT_EQ(checkValue(v, "4096"), "4096");
  EXPECT_EQ(checkValue(v, "0x1000"), "4096");
  EXPECT_EQ(checkValue(v, "0X1f"), "31");
  EXPECT_EQ(checkValue(v, "-16"), "-16");
  EXPECT_EQ(checkValue(v, "-0x10"), "-16");
  EXPECT_EQ(checkValue(v, "010"), "10") << "decimal, not octal as stoll's base 0 would read it";
}

TEST(EnvIntegers, RejectMalformedValuesNamingVariableAndValue) {
  const Variable v = integerVariable(0, 1 << 20, 1);
  for (const char* bad : {"abc", "12abc", " 12", "12 ", "+5", "0x", "-", "1e3", "32M", "1.5",
                          "99999999999999999999", "0x10000000000000000"}) {
    SCOPED_TRACE(bad);
    const std::string message = invalidArgumentMessage([&] { checkValue(v, bad); });
    EXPECT_NE(message.find(std::string("XCCL_TEST_INT='") + bad + "'"), std::string::npos)
        << message;
    EXPECT_NE(message.find("not an integer"), std::string::npos) << message;
  }
}

TEST(EnvIntegers, RangeAndStepAreInclusiveBounds) {
  const Variable v = integerVariable(4096, 8192, 256);
  EXPECT_EQ(checkValue(v, "4096"), "4096");
  EXPECT_EQ(checkValue(v, "8192"), "8192");
  EXPECT_EQ(checkValue(v, "4352"), "4352");
  const std::string below = invalidArgumentMessage([&] { checkValue(v, "3840"); });
  EXPECT_NE(below.find("below the minimum"), std::string::npos) << below;
  EXPECT_NE(below.find("integer 4096 to 8192, multiple of 256"), std::string::npos) << below;
  EXPECT_NE(invalidArgumentMessage([&] { checkValue(v, "8448"); }).find("above the maximum"),
            std::string::npos);
  EXPECT_NE(invalidArgumentMessage([&] { checkValue(v, "4097"); }).find("not a multiple"),
            std::string::npos);
  EXPECT_NE(invalidArgumentMessage([&] { checkValue(v, "-4096"); }).find("below the minimum"),
            std::string::npos);
}

TEST(EnvBooleans, AcceptEverySpellingInAnyCase) {
  const Variable v = testVariable("XCCL_TEST_BOOL", Kind::kBoolean);
  for (const char* yes : {"1", "true", "TRUE", "Yes", "on", "ON"}) {
    EXPECT_EQ(checkValue(v, yes), "1");
  }
  for (const char* no : {"0", "false", "False", "NO", "off"}) {
    EXPECT_EQ(checkValue(v, no), "0");
  }
  for (const char* bad : {"2", "-1", "y", "enable", "maybe", " 1"}) {
    const std::string message = invalidArgumentMessage([&] { checkValue(v, bad); });
    EXPECT_NE(message.find("not a boolean"), std::string::npos) << message;
  }
}

TEST(EnvChoices, SynonymsShareOneCanonicalSpelling) {
  const Variable& algo = find("XCCL_GPU_ALGO");
  EXPECT_EQ(checkValue(algo, "nccl"), "nccl");
  EXPECT_EQ(checkValue(algo, "rccl"), "nccl");
  EXPECT_EQ(checkValue(algo, "VENDOR"), "nccl");
  EXPECT_EQ(checkValue(algo, "Two_Shot"), "two_shot");
  const std::string message = invalidArgumentMessage([&] { checkValue(algo, "three_shot"); });
  EXPECT_NE(message.find("XCCL_GPU_ALGO='three_shot' is invalid (unknown name)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("one of auto, nccl (or rccl, vendor), kernel, one_shot, two_shot, "
                         "all_pairs"),
            std::string::npos)
      << message;
  // A prefix or a synonym list is not a name.
  EXPECT_EQ(errorKindOf([&] { checkValue(algo, "one"); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(errorKindOf([&] { checkValue(algo, "nccl|rccl"); }), ErrorKind::kInvalidArgument);
}

TEST(EnvText, AcceptsAnything) {
  const Variable& file = find("XCCL_TOPO_FILE");
  EXPECT_EQ(checkValue(file, " a b|c 0x10 "), " a b|c 0x10 ");
}

// XCCL_SHM_CMA_MIN_BYTES: one byte count or never for all four collectives, or a list per
// collective, read back canonically (decimal, the registry's order, one word when all alike).
TEST(EnvBytesPerCollective, OneValueOrAListPerCollective) {
  const Variable& v = find("XCCL_SHM_CMA_MIN_BYTES");
  EXPECT_EQ(checkValue(v, "1048576"), "1048576");
  EXPECT_EQ(checkValue(v, "0x100000"), "1048576");
  EXPECT_EQ(checkValue(v, "0"), "0");
  EXPECT_EQ(checkValue(v, "Never"), "never");
  EXPECT_EQ(checkValue(v, "1099511627776"), "1099511627776");
  EXPECT_EQ(checkValue(v, "broadcast=NEVER,all_reduce=0x100000"),
            "all_reduce=1048576,broadcast=never");
  EXPECT_EQ(checkValue(v, "all_gather=262144"), "all_gather=262144");
  EXPECT_EQ(checkValue(v, "broadcast=7,reduce=7,all_gather=7,all_reduce=7"), "7");
}

TEST(EnvBytesPerCollective, RefusesWhatItCannotReadNamingTheVariable) {
  const Variable& v = find("XCCL_SHM_CMA_MIN_BYTES");
  const std::pair<const char*, const char*> cases[] = {
      {"-1", "below the minimum"},
      {"1099511627777", "above the maximum"},
      {"18446744073709551616", "not an integer or never"},  // 2^64: from_chars' overflow
      {"99999999999999999999999", "not an integer or never"},
      {"1M", "not an integer or never"},
      {" 1048576", "not an integer or never"},
      {"all_reduce=", "not an integer or never"},
      {"all_reduce=1,all_reduce=2", "a collective named twice"},
      {"all_reduce=1,", "not a list of collective=bytes"},
      {"all_reduce=1,,broadcast=2", "not a list of collective=bytes"},
      {"all_to_all=1", "not a list of collective=bytes"},  // a collective without a single copy
      {"ALL_REDUCE=1", "not a list of collective=bytes"},
      {"allreduce=1", "not a list of collective=bytes"},
      {"all_reduce=1;broadcast=2", "not an integer or never"},
      {"=1", "not a list of collective=bytes"},
      {"all_reduce=1=2", "not an integer or never"},
      {"all_reduce=-5", "below the minimum"},
      {"broadcast=1099511627777", "above the maximum"},
  };
  for (const auto& [value, why] : cases) {
    const std::string message = invalidArgumentMessage([&] { checkValue(v, value); });
    EXPECT_NE(message.find(std::string("XCCL_SHM_CMA_MIN_BYTES='") + value + "' is invalid (" +
                           why + ")"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("all_reduce, reduce, all_gather, broadcast"), std::string::npos)
        << message;
  }
  // A NUL inside a name does not make its prefix match.
  EXPECT_EQ(errorKindOf([&] { checkValue(v, std::string("all_reduce\0x=1", 14)); }),
            ErrorKind::kInvalidArgument);
}

TEST(EnvTable, EveryDeclarationIsConsistentAndEveryDefaultAccepted) {
  std::map<std::string, int> seen;
  for (const Variable& v : all()) {
    SCOPED_TRACE(v.name);
    EXPECT_EQ(std::string(v.name).rfind("XCCL_", 0), 0u);
    EXPECT_EQ(seen[v.name]++, 0) << "declared twice";
    if (v.kind == Kind::kInteger) {
      EXPECT_LE(v.min, v.max);
      EXPECT_GE(v.multipleOf, 1);
      EXPECT_EQ(v.min % v.multipleOf, 0) << "the minimum itself must be accepted";
    }
    if (v.kind == Kind::kChoice) {
      EXPECT_FALSE(v.choices.empty());
    }
    if (v.kind == Kind::kBytesPerCollective) {
      EXPECT_FALSE(v.collectives.empty());
      EXPECT_LE(v.min, v.max);
    }
    if (v.kind == Kind::kBoolean) {
      EXPECT_NE(std::string(v.defaultValue), "");
    }
    if (v.defaultValue[0] != '\0') {
      EXPECT_NO_THROW(checkValue(v, v.defaultValue));
    }
  }
  EXPECT_EQ(errorKindOf([] { find("XCCL_NOT_DECLARED"); }), ErrorKind::kInternal);
}

// Issue 9 defect 6: a workspace below one element made all_reduce loop forever.
TEST(EnvTable, GpuWorkspaceBytesIsBoundedBelowAndAligned) {
  const Variable& v = find("XCCL_GPU_WORKSPACE_BYTES");
  for (const char* bad : {"0", "1", "8", "-1", "4095", "4097", "1099511628032"}) {
    EXPECT_EQ(errorKindOf([&] { checkValue(v, bad); }), ErrorKind::kInvalidArgument) << bad;
  }
  EXPECT_EQ(checkValue(v, "4096"), "4096");
  EXPECT_EQ(checkValue(v, "65536"), "65536");
  EXPECT_EQ(checkValue(v, "0x2000000"), "33554432");
  // Every accepted size splits into whole elements of every dtype, 16-byte aligned.
  EXPECT_EQ(v.min % 16, 0);
  EXPECT_EQ(v.multipleOf % 16, 0);
}

// docs/environment.md's XCCL table: one row per variable whose default and "Accepted" cells say
// what the table says (the names alone are checked by tests/python/test_env_defaults.py).
TEST(EnvTable, DocsStateEachDefaultAndRange) {
  std::ifstream in(std::string(XCCL_SOURCE_DIR) + "/docs/environment.md");
  ASSERT_TRUE(in.good());
  std::map<std::string, std::vector<std::string>> rows;  // name -> cells
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `XCCL_", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream split(line.substr(1));
    for (std::string cell; std::getline(split, cell, '|');) {
      cells.push_back(cell.substr(1, cell.size() >= 2 ? cell.size() - 2 : 0));
    }
    const std::string name = cells[0].substr(1, cells[0].find('`', 1) - 1);
    rows[name] = cells;
  }
  for (const Variable& v : all()) {
    SCOPED_TRACE(v.name);
    ASSERT_EQ(rows.count(v.name), 1u);
    const std::vector<std::string>& cells = rows[v.name];
    ASSERT_GE(cells.size(), 4u);
    const std::string defaultCell = v.defaultValue[0] == '\0'
                                        ? std::string("(unset)")
                                        : "`" + std::string(v.defaultValue) + "`";
    EXPECT_EQ(cells[1].rfind(defaultCell, 0), 0u) << cells[1];
    EXPECT_EQ(cells[2], describeAccepted(v) + (v.groupWide ? "; same on every rank" : ""));
  }
}

// The kind and text of the xccl::Error fn throws, "nothing thrown" when it throws none.
std::string kindAndMessage(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return std::string(errorKindName(e.kind())) + ": " + e.what();
  }
  return "nothing thrown";
}

TEST(EnvReads, OutOfRangeValuesThrowOnEveryRead) {
  if (!inFreshProcess({{"XCCL_GPU_WORKSPACE_BYTES", "8"}})) return;
  const std::string first = kindAndMessage([] { getInt("XCCL_GPU_WORKSPACE_BYTES"); });
  EXPECT_EQ(first.rfind("invalid argument: xccl: XCCL_GPU_WORKSPACE_BYTES='8' is invalid (below "
                        "the minimum): XCCL_GPU_WORKSPACE_BYTES accepts integer 4096 to 2^40, "
                        "multiple of 256",
                        0),
            0u)
      << first;
  EXPECT_EQ(kindAndMessage([] { getString("XCCL_GPU_WORKSPACE_BYTES"); }), first)
      << "a bad value is never cached as good";
}

TEST(EnvReads, ValuesComeBackNormalised) {
  if (!inFreshProcess({{"XCCL_LOG_LEVEL", "DEBUG"},
                       {"XCCL_PIN_PROGRESS", "Off"},
                       {"XCCL_SHM_DISABLE", "yes"},
                       {"XCCL_RING_CHUNK_BYTES", "0x8000"},
                       {"XCCL_GPU_ALGO", "Vendor"}})) {
    return;
  }
  EXPECT_EQ(getString("XCCL_LOG_LEVEL"), "debug");
  EXPECT_TRUE(log::enabled(log::Level::kDebug));
  EXPECT_FALSE(getBool("XCCL_PIN_PROGRESS"));
  EXPECT_TRUE(getBool("XCCL_SHM_DISABLE"));
  EXPECT_EQ(getInt("XCCL_RING_CHUNK_BYTES"), 32768);
  EXPECT_EQ(getString("XCCL_RING_CHUNK_BYTES"), "0x8000") << "text comes back as written";
  EXPECT_EQ(getString("XCCL_GPU_ALGO"), "vendor") << "a synonym is kept, only its case changes";
}

TEST(EnvReads, TypedReadsOfTheWrongKindAreBugs) {
  if (!inFreshProcess({})) return;
  EXPECT_EQ(kindAndMessage([] { getInt("XCCL_LOG_LEVEL"); }).rfind("internal error", 0), 0u);
  EXPECT_EQ(kindAndMessage([] { getBool("XCCL_GPU_WORKSPACE_BYTES"); }).rfind("internal error", 0),
            0u);
  if (std::getenv("XCCL_SHM_SLOT_BYTES") == nullptr) {
    EXPECT_EQ(kindAndMessage([] { getInt("XCCL_SHM_SLOT_BYTES"); }).rfind("invalid argument", 0),
              0u)
        << "unset with no default";
  }
}

TEST(EnvReads, CheckAllNamesEveryBadVariable) {
  if (!inFreshProcess({{"XCCL_SMALL_MSG_BYTES", "-1"},
                       {"XCCL_PIN_PROGRESS", "sometimes"},
                       {"XCCL_ALGO", "tree"}})) {
    return;
  }
  const std::string message = kindAndMessage([] { checkAll(); });
  EXPECT_EQ(message.rfind("invalid argument: ", 0), 0u) << message;
  for (const char* part : {"XCCL_SMALL_MSG_BYTES='-1'", "XCCL_PIN_PROGRESS='sometimes'",
                           "XCCL_ALGO='tree'", "one of auto, direct, ring, shm"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " in " << message;
  }
  EXPECT_EQ(message.find("XCCL_GPU"), std::string::npos) << "only the bad ones: " << message;
}

TEST(EnvReads, GroupWideSettingsAreCanonical) {
  if (!inFreshProcess({{"XCCL_GPU_ALGO", "RCCL"},
                       {"XCCL_GPU_WORKSPACE_BYTES", "0x10000"},
                       {"XCCL_SOCKET_IFNAME", "eth9"},
                       {"XCCL_NET", ""},
                       {"XCCL_NET_STREAMS", ""},
                       {"XCCL_ALGO", ""},
                       {"XCCL_RING_CHUNK_BYTES", ""},
                       {"XCCL_SMALL_MSG_BYTES", ""},
                       {"XCCL_SHM_TWO_SHOT_BYTES", ""},
                       {"XCCL_SHM_CMA_MIN_BYTES", "broadcast=NEVER,all_reduce=0x100000"},
                       {"XCCL_GPU_VERIFY", "Yes"}})) {
    return;
  }
  std::string settings;
  for (const auto& [name, value] : groupWideSettings()) settings += name + "=" + value + ";";
  EXPECT_EQ(settings,
            "XCCL_NET=auto;XCCL_NET_STREAMS=2;XCCL_ALGO=auto;XCCL_RING_CHUNK_BYTES=524288;"
            "XCCL_SMALL_MSG_BYTES=65536;XCCL_SHM_TWO_SHOT_BYTES=;"
            "XCCL_SHM_CMA_MIN_BYTES=all_reduce=1048576,broadcast=never;"
            "XCCL_GPU_ALGO=nccl;"
            "XCCL_GPU_WORKSPACE_BYTES=65536;XCCL_GPU_VERIFY=1;");
}

// Logging runs in destructors and progress threads: a bad level must not make it throw.
TEST(EnvReads, ABadLogLevelLogsAtTheDefaultInsteadOfThrowing) {
  if (!inFreshProcess({{"XCCL_LOG_LEVEL", "loud"}})) return;
  EXPECT_TRUE(log::enabled(log::Level::kWarn));
  EXPECT_FALSE(log::enabled(log::Level::kInfo));
  EXPECT_NE(kindAndMessage([] { checkAll(); }).find("XCCL_LOG_LEVEL='loud'"), std::string::npos);
}

}  // namespace
}  // namespace xccl::env
