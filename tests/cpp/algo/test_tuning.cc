// The tuning table's text (algo/tuning.h): canonical round trip, every malformed-line class
// refused with its line number, hostile sizes and numbers, lookups in the message convention,
// and the group-shape check.
#include <gtest/gtest.h>

#include <string>

#include "algo/tuning.h"
#include "threads.h"

namespace xccl::algo {
namespace {

const std::string kHeader = "xccl-tuning 1\nworld 4 1 one_host\n";

// The parser's message for `text`, or "" when it parses.
std::string parseError(const std::string& text) {
  try {
    parseTuningTable(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

TEST(TuningTable, RoundTripsEveryFieldKind) {
  const std::string text = kHeader +
                           "cpu all_reduce 0 65536 shm one_shot 0 1200 1500\n"
                           "cpu all_reduce 65536 inf shm two_shot 0 9000 12000\n"
                           "cpu all_gather 0 inf tcp ring 262144 5 7\n"
                           "cpu barrier 0 1 shm shm 0 0 0\n"
                           "cpu reduce_scatter 1024 2048 hierarchical two_shot 4096 1 2\n"
                           "gpu all_reduce 0 1048576 kernel two_shot 100 200\n"
                           "gpu all_reduce 1048576 inf vendor none 300 400\n"
                           "gpu all_to_all 0 18446744073709551615 kernel all_pairs 1 1\n"
                           "gpu broadcast 0 inf kernel broadcast 18446744073709551615 0\n";
  const TuningTable t = parseTuningTable(text);
  EXPECT_EQ(t.worldSize, 4);
  EXPECT_EQ(t.hosts, 1);
  EXPECT_EQ(t.locality, Locality::kOneHost);
  ASSERT_EQ(t.cpu.size(), 5u);
  ASSERT_EQ(t.gpu.size(), 4u);
  EXPECT_EQ(t.cpu[1].maxBytes, kTuningInf);
  EXPECT_EQ(t.cpu[1].algorithm, Algorithm::kTwoShot);
  EXPECT_EQ(t.cpu[2].ringChunkBytes, 262144u);
  EXPECT_EQ(t.gpu[0].kernel, GpuKernel::kTwoShotAllReduce);
  EXPECT_EQ(t.gpu[2].kernel, GpuKernel::kAllPairsAllToAll);
  EXPECT_EQ(t.gpu[2].maxBytes, UINT64_MAX) << "2^64-1 written out reads as inf";
  EXPECT_EQ(t.gpu[3].tunedNs, UINT64_MAX);
  // Canonical: the text that parsed (but 2^64-1 as max_bytes, which formats as inf) comes back.
  const std::string formatted = formatTuningTable(t);
  EXPECT_EQ(parseTuningTable(formatted), t);
  EXPECT_EQ(formatTuningTable(parseTuningTable(formatted)), formatted);
  std::string expected = text;
  expected.replace(expected.find("0 18446744073709551615 kernel"), 29, "0 inf kernel");
  EXPECT_EQ(formatted, expected);
  // No trailing newline, and no entries at all, parse too.
  EXPECT_EQ(parseTuningTable(formatted.substr(0, formatted.size() - 1)), t);
  EXPECT_TRUE(parseTuningTable(kHeader).cpu.empty());
}

struct Malformed {
  const char* why;
  std::string text;
  size_t line;
  const char* says;
};

const char kBinaryBytes[] = "cpu all_reduce 0 inf tcp ri\0ng 0 1 1\n";
const std::string kBinary(kBinaryBytes, sizeof(kBinaryBytes) - 1);

TEST(TuningTable, RefusesEveryMalformedLineNamingIt) {
  const std::string ok = "cpu all_reduce 0 inf tcp ring 0 1 1\n";
  const Malformed cases[] = {
      {"empty text", "", 1, "missing"},
      {"header only", "xccl-tuning 1\n", 2, "missing"},
      {"wrong header", "xccl-tuning 2\nworld 1 1 none\n", 1, "xccl-tuning 1"},
      {"header with extra", "xccl-tuning 1 x\nworld 1 1 none\n", 1, "xccl-tuning 1"},
      {"no world line", "xccl-tuning 1\n" + ok, 2, "expected 4 fields"},
      {"world word", "xccl-tuning 1\nwarld 1 1 none\n", 2, "world line"},
      {"zero ranks", "xccl-tuning 1\nworld 0 1 none\n", 2, "impossible"},
      {"more hosts than ranks", "xccl-tuning 1\nworld 2 3 per_host\n", 2, "impossible"},
      {"world too large", "xccl-tuning 1\nworld 4294967296 1 none\n", 2, "impossible"},
      {"locality", "xccl-tuning 1\nworld 2 1 somewhere\n", 2, "unknown locality"},
      {"kind", kHeader + ok + "tpu all_reduce 0 inf tcp ring 0 1 1\n", 4, "unknown line kind"},
      {"blank line", kHeader + "\n" + ok, 3, "empty field"},
      {"double space", kHeader + "cpu all_reduce  0 inf tcp ring 0 1 1\n", 3, "empty field"},
      {"trailing space", kHeader + "cpu all_reduce 0 inf tcp ring 0 1 1 \n", 3, "empty field"},
      {"crlf", kHeader + "cpu all_reduce 0 inf tcp ring 0 1 1\r\n", 3, "not a decimal"},
      {"fields", kHeader + "cpu all_reduce 0 inf tcp ring 0 1\n", 3, "expected 9 fields"},
      {"gpu fields", kHeader + "gpu all_reduce 0 inf vendor none 1\n", 3, "expected 8 fields"},
      {"collective", kHeader + "cpu allreduce 0 inf tcp ring 0 1 1\n", 3, "unknown cpu collective"},
      {"gpu collective", kHeader + "gpu gather 0 inf vendor none 1 1\n", 3, "unknown gpu coll"},
      {"route", kHeader + "cpu all_reduce 0 inf nvlink ring 0 1 1\n", 3, "unknown cpu route"},
      {"algorithm", kHeader + "cpu all_reduce 0 inf tcp auto 0 1 1\n", 3, "unknown cpu algor"},
      {"ring without one", kHeader + "cpu all_to_all 0 inf tcp ring 0 1 1\n", 3, "cannot run"},
      {"shm reduction", kHeader + "cpu reduce 0 inf shm shm 0 1 1\n", 3, "cannot run"},
      {"shm copy shot", kHeader + "cpu broadcast 0 inf shm one_shot 0 1 1\n", 3, "cannot run"},
      {"tcp two_shot", kHeader + "cpu all_reduce 0 inf tcp two_shot 0 1 1\n", 3, "cannot run"},
      {"hier shot", kHeader + "cpu all_gather 0 inf hierarchical one_shot 0 1 1\n", 3, "cannot"},
      {"gpu route", kHeader + "gpu all_reduce 0 inf host none 1 1\n", 3, "unknown gpu route"},
      {"gpu kernel", kHeader + "gpu all_gather 0 inf kernel one_shot 1 1\n", 3, "not one of"},
      {"vendor kernel", kHeader + "gpu all_reduce 0 inf vendor one_shot 1 1\n", 3, "exactly"},
      {"kernel none", kHeader + "gpu broadcast 0 inf kernel none 1 1\n", 3, "exactly"},
      {"sign", kHeader + "cpu all_reduce -1 inf tcp ring 0 1 1\n", 3, "not a decimal"},
      {"plus", kHeader + "cpu all_reduce +1 inf tcp ring 0 1 1\n", 3, "not a decimal"},
      {"hex", kHeader + "cpu all_reduce 0x10 inf tcp ring 0 1 1\n", 3, "leading zero"},
      {"leading zero", kHeader + "cpu all_reduce 01 inf tcp ring 0 1 1\n", 3, "leading zero"},
      {"inf as min", kHeader + "cpu all_reduce inf inf tcp ring 0 1 1\n", 3, "not a decimal"},
      {"2^64", kHeader + "cpu all_reduce 0 18446744073709551616 tcp ring 0 1 1\n", 3, "64 bits"},
      {"huge ns", kHeader + "cpu all_reduce 0 inf tcp ring 0 1 99999999999999999999\n", 3,
       "64 bits"},
      {"min = max", kHeader + "cpu all_reduce 5 5 tcp ring 0 1 1\n", 3, "not below"},
      {"min > max", kHeader + "cpu all_reduce 6 5 tcp ring 0 1 1\n", 3, "not below"},
      {"chunk small", kHeader + "cpu all_reduce 0 inf tcp ring 4095 1 1\n", 3, "ring_chunk"},
      {"chunk large", kHeader + "cpu all_reduce 0 inf tcp ring 1073741825 1 1\n", 3, "ring_chunk"},
      {"overlap",
       kHeader + "cpu all_reduce 0 100 tcp ring 0 1 1\ncpu all_gather 0 inf tcp ring 0 1 1\n"
                 "cpu all_reduce 99 200 tcp direct 0 1 1\n",
       5, "overlaps the one on line 3"},
      {"overlap unsorted",
       kHeader + "gpu all_reduce 50 inf vendor none 1 1\n"
                 "gpu all_reduce 0 51 vendor none 1 1\n",
       4, "line 3"},
      {"same range", kHeader + ok + ok, 4, "overlaps"},
      {"binary", kHeader + kBinary, 3, "unknown cpu algorithm 'ri?ng'"},
  };
  for (const Malformed& c : cases) {
    const std::string error = parseError(c.text);
    EXPECT_NE(error.find("tuning table line " + std::to_string(c.line) + ":"), std::string::npos)
        << c.why << ": " << error;
    EXPECT_NE(error.find(c.says), std::string::npos) << c.why << ": " << error;
  }
}

TEST(TuningTable, CapsEntriesAndBytes) {
  auto entries = [](size_t n) {
    std::string text = kHeader;
    for (size_t i = 0; i < n; ++i) {
      text += "gpu all_reduce " + std::to_string(i) + " " + std::to_string(i + 1) +
              " vendor none 0 0\n";
    }
    return text;
  };
  EXPECT_EQ(parseTuningTable(entries(kTuningMaxEntries)).gpu.size(), kTuningMaxEntries);
  const std::string error = parseError(entries(kTuningMaxEntries + 1));
  EXPECT_NE(error.find("line " + std::to_string(kTuningMaxEntries + 3) + ": more than 4096"),
            std::string::npos)
      << error;
  std::string big = kHeader + std::string(kTuningMaxTextBytes, 'x');
  EXPECT_NE(parseError(big).find("more than the 1048576 allowed"), std::string::npos);
  // Exactly at the cap: refused for its content, not its size.
  big.resize(kTuningMaxTextBytes);
  EXPECT_NE(parseError(big).find("line 3"), std::string::npos);
}

TEST(TuningTable, FindsByMessageBytesInNcclTestsConvention) {
  const TuningTable t = parseTuningTable("xccl-tuning 1\nworld 4 1 one_host\n"
                                         "cpu all_gather 0 4096 shm shm 0 1 2\n"
                                         "cpu all_gather 4096 inf tcp ring 65536 3 4\n"
                                         "cpu all_reduce 100 200 tcp direct 0 5 6\n"
                                         "cpu all_to_all 0 1024 tcp direct 0 7 8\n"
                                         "cpu barrier 0 1 tcp direct 0 9 10\n"
                                         "gpu all_gather 4096 inf vendor none 11 12\n");
  // all_gather's request is one rank's part: 1023 x 4 = 4092 < 4096 <= 1024 x 4.
  EXPECT_EQ(findCpu(t, Collective::kAllGather, 1023, 4), &t.cpu[0]);
  EXPECT_EQ(findCpu(t, Collective::kAllGather, 1024, 4), &t.cpu[1]);
  // A part whose message overflows 64 bits still lands in the range reaching inf.
  EXPECT_EQ(findCpu(t, Collective::kAllGather, SIZE_MAX, 4), &t.cpu[1]);
  EXPECT_EQ(findCpu(t, Collective::kAllReduce, 99, 4), nullptr);
  EXPECT_EQ(findCpu(t, Collective::kAllReduce, 100, 4), &t.cpu[2]);
  EXPECT_EQ(findCpu(t, Collective::kAllReduce, 200, 4), nullptr);
  EXPECT_EQ(findCpu(t, Collective::kReduce, 150, 4), nullptr);
  // all_to_all's request carries no size: only an entry for every size could apply.
  EXPECT_EQ(findCpu(t, Collective::kAllToAll, 0, 4), nullptr);
  const TuningTable all = parseTuningTable(kHeader + "cpu all_to_all 0 inf tcp direct 0 1 1\n");
  EXPECT_EQ(findCpu(all, Collective::kAllToAll, 0, 4), &all.cpu[0]);
  EXPECT_EQ(findCpu(t, Collective::kBarrier, 0, 4), &t.cpu[4]);
  EXPECT_EQ(findGpu(t, GpuCollective::kAllGather, 4095), nullptr);
  EXPECT_EQ(findGpu(t, GpuCollective::kAllGather, 4096), &t.gpu[0]);
  EXPECT_EQ(findGpu(t, GpuCollective::kAllReduce, 4096), nullptr);
}

TEST(TuningTable, MismatchNamesBothShapes) {
  const TuningTable t = parseTuningTable(kHeader);
  EXPECT_EQ(tuningMismatch(t, GroupShape{4, Locality::kOneHost, 1, 4}), "");
  EXPECT_EQ(tuningMismatch(t, GroupShape{2, Locality::kOneHost, 1, 2}),
            "table for world 4/1/one_host, group is 2/1/one_host");
  EXPECT_EQ(tuningMismatch(t, GroupShape{4, Locality::kNone, 1, 1}),
            "table for world 4/1/one_host, group is 4/1/none");
  EXPECT_EQ(tuningMismatch(t, GroupShape{4, Locality::kPerHost, 2, 2}),
            "table for world 4/1/one_host, group is 4/2/per_host");
}

}  // namespace
}  // namespace xccl::algo
