// The process_vm_readv reader (net/regions/shm/cma.h): batches past IOV_MAX, partial transfers that
// end in a fault, ranges that wrap, a gone process, hostile pids; and the group's probe: everyone
// agrees, XCCL_SHM_CMA=0 on one rank or a wrong pid on one rank turns it off for all.
#include <limits.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <cstring>
#include <numeric>

#include "net/regions/shm/cma.h"
#include "shm_testing.h"

namespace xccl {
namespace {

using net::shm::CmaPiece;
using net::shm::cmaRead;
using net::shm::cmaTryRead;

// A process that exited and was reaped: its pid names nobody (until reused, which takes a
// wrap of the pid space).
pid_t goneProcess() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

// Skips where the kernel or a seccomp filter forbids even reading oneself.
#define SKIP_WITHOUT_CMA()                                                \
  do {                                                                    \
    uint64_t probe = 1, into = 0;                                         \
    size_t failed = 0;                                                    \
    const CmaPiece piece{reinterpret_cast<uintptr_t>(&probe), &into, 8};  \
    const int err = cmaTryRead(::getpid(), &piece, 1, &failed);           \
    if (err != 0) GTEST_SKIP() << "process_vm_readv: " << errnoText(err); \
  } while (0)

TEST(CmaReader, ReadsMorePiecesThanOneCallTakes) {
  SKIP_WITHOUT_CMA();
  constexpr size_t kPieces = 3 * IOV_MAX + 17;
  std::vector<uint8_t> source(kPieces * 13), copy(source.size(), 0);
  std::iota(source.begin(), source.end(), uint8_t{7});
  std::vector<CmaPiece> pieces;
  for (size_t i = 0, at = 0; i < kPieces; ++i) {
    const size_t length = i % 5 == 0 ? 0 : std::min<size_t>(i % 26, source.size() - at);
    pieces.push_back({reinterpret_cast<uintptr_t>(source.data() + at), copy.data() + at, length});
    at += length;
  }
  size_t failed = 0;
  ASSERT_EQ(cmaTryRead(::getpid(), pieces.data(), pieces.size(), &failed), 0);
  for (const CmaPiece& p : pieces) {
    const size_t at = static_cast<uint8_t*>(p.local) - copy.data();
    EXPECT_EQ(std::memcmp(copy.data() + at, source.data() + at, p.length), 0);
  }
}

// The second page is unmapped: the kernel copies the first and reports a partial transfer; the
// retry from there faults. Bytes past the local range stay untouched.
TEST(CmaReader, PartialTransferThenFaultIsACleanError) {
  SKIP_WITHOUT_CMA();
  const size_t page = ::sysconf(_SC_PAGESIZE);
  auto* map = static_cast<uint8_t*>(
      ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(map, MAP_FAILED);
  std::memset(map, 0x5a, page);
  ASSERT_EQ(::munmap(map + page, page), 0);
  std::vector<uint8_t> local(3 * page, 0xee);
  const CmaPiece piece{reinterpret_cast<uintptr_t>(map), local.data(), 2 * page};
  size_t failed = 9;
  EXPECT_EQ(cmaTryRead(::getpid(), &piece, 1, &failed), EFAULT);
  EXPECT_EQ(failed, 0u);
  EXPECT_EQ(local[0], 0x5a);
  EXPECT_EQ(local[page - 1], 0x5a);
  for (size_t i = 2 * page; i < 3 * page; ++i) ASSERT_EQ(local[i], 0xee) << i;
  try {
    cmaRead("allreduce #3", ::getpid(), 1, &piece, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kPeerFailure);
    EXPECT_NE(text.find("allreduce #3"), std::string::npos) << text;
    EXPECT_NE(text.find("of rank 1"), std::string::npos) << text;
    EXPECT_NE(text.find("8192 bytes at [0x"), std::string::npos) << text;
    EXPECT_NE(text.find("Bad address"), std::string::npos) << text;
  }
  ::munmap(map, page);
}

TEST(CmaReader, RangesThatWrapAreRefusedWithoutAnyCall) {
  std::vector<uint8_t> local(64, 0xee);
  const CmaPiece piece{~uint64_t{0} - 10, local.data(), 32};
  size_t failed = 0;
  EXPECT_EQ(cmaTryRead(::getpid(), &piece, 1, &failed), EFAULT);
  for (uint8_t b : local) ASSERT_EQ(b, 0xee);
}

TEST(CmaReader, AGoneProcessIsNamedAsAFailedRank) {
  SKIP_WITHOUT_CMA();
  uint64_t into = 0;
  const CmaPiece piece{reinterpret_cast<uintptr_t>(&into), &into, sizeof(into)};
  try {
    cmaRead("broadcast #1", goneProcess(), 2, &piece, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPeerFailure);
    EXPECT_NE(std::string(e.what()).find("broadcast #1: rank 2 failed: its process (pid "),
              std::string::npos)
        << e.what();
  }
}

TEST(CmaReader, PidsFromTheStoreAreParsedStrictly) {
  EXPECT_EQ(net::shm::parsePid("1234"), 1234);
  EXPECT_EQ(net::shm::parsePid("4194304"), 4194304);
  for (const char* bad : {"", "0", "-5", "+5", " 5", "5 ", "12a", "4194305", "99999999999999999999",
                          "999999999999999999999", "0x10"}) {
    EXPECT_EQ(net::shm::parsePid(bad), 0) << "'" << bad << "'";
  }
}

// The security decision behind the probe: under Yama's ptrace_scope 1 only the ranks' common
// parent is named as the reader, never anyone (PR_SET_PTRACER_ANY); different parents and scopes
// 2 and 3 fall back to the slots with the reason.
TEST(CmaPeerAccess, OnlyACommonParentIsEverLetIn) {
  for (int scope : {-1, 0}) {
    const net::shm::PeerAccess open = net::shm::peerAccess(scope, {100, 200, 300});
    EXPECT_EQ(open.tracer, 0) << scope;
    EXPECT_EQ(open.whyNot, "") << scope;
  }
  const net::shm::PeerAccess siblings = net::shm::peerAccess(1, {4242, 4242, 4242});
  EXPECT_EQ(siblings.tracer, 4242);
  EXPECT_EQ(siblings.whyNot, "");
  const net::shm::PeerAccess strangers = net::shm::peerAccess(1, {4242, 4242, 77});
  EXPECT_EQ(strangers.tracer, 0);
  EXPECT_NE(strangers.whyNot.find("ranks 0 and 2 have different parent processes (4242 and 77)"),
            std::string::npos)
      << strangers.whyNot;
  const net::shm::PeerAccess outside = net::shm::peerAccess(1, {0, 0});
  EXPECT_EQ(outside.tracer, 0);
  EXPECT_NE(outside.whyNot.find("outside their pid namespace"), std::string::npos);
  for (int scope : {2, 3}) {
    const net::shm::PeerAccess closed = net::shm::peerAccess(scope, {4242, 4242});
    EXPECT_EQ(closed.tracer, 0);
    EXPECT_NE(closed.whyNot.find("ptrace_scope is " + std::to_string(scope)), std::string::npos)
        << closed.whyNot;
  }
}

// Runs create() on `size` thread ranks with options changed per rank; returns each rank's
// (cma available, reason).
std::vector<std::pair<bool, std::string>> probeRanks(
    int size, const std::function<void(int, net::shm::Options&)>& change) {
  net::MemoryStore store;
  std::vector<std::pair<bool, std::string>> results(size);
  testing::runThreads(size, [&](int rank) {
    net::shm::Options options = testing::shmOptions(64 << 10);
    change(rank, options);
    std::string why;
    auto segment = net::shm::Segment::create(store, rank, size, options, &why);
    if (!segment) XCCL_THROW(ErrorKind::kInternal, "shared memory unavailable: ", why);
    results[rank] = {segment->cma() != nullptr, segment->cmaUnavailable()};
  });
  return results;
}

TEST(CmaProbe, EveryRankGetsItWhenEveryPairCanRead) {
  SKIP_WITHOUT_CMA();
  for (const auto& [available, why] : probeRanks(3, [](int, net::shm::Options&) {})) {
    EXPECT_TRUE(available) << why;
  }
}

TEST(CmaProbe, OneRankTurningItOffTurnsItOffForAll) {
  const auto results = probeRanks(3, [](int rank, net::shm::Options& o) { o.cma = rank != 1; });
  for (const auto& [available, why] : results) {
    EXPECT_FALSE(available);
    EXPECT_EQ(why, "off on rank 1 (XCCL_SHM_CMA=0)");
  }
}

// What ranks in another pid namespace publish: a number that is not the reader's view of them.
TEST(CmaProbe, AWrongPidOnOneRankTurnsItOffForAll) {
  SKIP_WITHOUT_CMA();
  const pid_t gone = goneProcess();
  const auto results =
      probeRanks(3, [&](int rank, net::shm::Options& o) { o.cmaPid = rank == 2 ? gone : 0; });
  for (const auto& [available, why] : results) {
    EXPECT_FALSE(available);
    EXPECT_NE(why.find("cannot read rank 2 (pid " + std::to_string(gone) + ")"), std::string::npos)
        << why;
    EXPECT_NE(why.find("No such process"), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace xccl
