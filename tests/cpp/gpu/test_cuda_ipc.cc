// CUDA IPC workspaces (net/regions/cuda_ipc/workspace.h) across real processes: 2 to 4 fork()ed
// ranks on device 0 (processes may share one GPU) map each other's allocations, find the fixed
// parts zeroed, and read the data every other rank wrote. Skips without a CUDA device.
//
// The test process itself never initialises CUDA, because a child fork()ed after that cannot use
// CUDA at all: even the device count is asked of a child.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "common/error.h"
#include "common/gpu_runtime.h"
#include "kernels/device_handle.h"
#include "net/regions/cuda_ipc/workspace.h"
#include "net/rendezvous/bootstrap.h"
#include "shm/shm_testing.h"
#include "topo/gpu_sharing.h"

namespace xccl {
namespace {

using namespace std::chrono_literals;
using net::cuda_ipc::Workspace;
using Clock = std::chrono::steady_clock;

void gpuCheck(gpuError_t rc, const char* what) {
  if (rc != gpuSuccess) XCCL_THROW(ErrorKind::kInternal, what, ": ", gpuGetErrorString(rc));
}

// Why this machine cannot run the tests (no driver, no device), or "" when it can. Asked once, of
// a child process.
const std::string& whyNoGpu() {
  static const std::string why = [] {
    int fds[2];
    if (::pipe(fds) != 0) return std::string("pipe() failed");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      int count = 0;
      const gpuError_t rc = XCCL_RT(GetDeviceCount)(&count);
      gpuDeviceProp_t props = {};
      // A MIG instance refuses CUDA IPC (the backend falls back: topo/gpu_sharing.h).
      const bool mig =
          count > 0 && (topo::visibleDevicesAreMig(std::getenv("CUDA_VISIBLE_DEVICES")) ||
                        (XCCL_RT(GetDeviceProperties)(&props, 0) == gpuSuccess &&
                         topo::isMigDeviceName(props.name)));
      const std::string answer = rc != gpuSuccess
                                     ? std::string("GetDeviceCount: ") + gpuGetErrorString(rc)
                                 : count == 0 ? std::string("no GPU device")
                                 : mig        ? std::string("a MIG instance refuses CUDA IPC")
                                              : std::string();
      ssize_t written = ::write(fds[1], answer.data(), answer.size());
      ::_exit(written == static_cast<ssize_t>(answer.size()) ? 0 : 1);
    }
    ::close(fds[1]);
    std::string answer;
    char buffer[256];
    for (ssize_t n; (n = ::read(fds[0], buffer, sizeof(buffer))) > 0;) answer.append(buffer, n);
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::string("device probe crashed");
    return answer;
  }();
  return why;
}

#define SKIP_WITHOUT_GPU() \
  if (!whyNoGpu().empty()) GTEST_SKIP() << "CUDA IPC not tested: " << whyNoGpu()

// Runs body(rank, store) in `size` fork()ed processes sharing a FileStore in a fresh directory, for
// at most `limit`. Returns "" when all succeeded, else one line per failed rank with its report.
std::string runProcesses(int size, const std::function<void(int, net::Store&)>& body,
                         std::chrono::seconds limit = 120s) {
  std::string dir = (std::filesystem::temp_directory_path() / "xccl-ipc-test-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) return "mkdtemp failed";
  auto reportPath = [&](int rank) { return dir + "/report." + std::to_string(rank); };
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        testing::FileStore store(dir);
        body(rank, store);
      } catch (const std::exception& e) {
        std::ofstream(reportPath(rank)) << e.what();
        code = 1;
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::string failures;
  const auto deadline = Clock::now() + limit;
  for (int rank = 0; rank < size; ++rank) {
    int status = 0;
    while (::waitpid(pids[rank], &status, WNOHANG) == 0) {
      if (Clock::now() >= deadline) {
        ::kill(pids[rank], SIGKILL);
        ::waitpid(pids[rank], &status, 0);
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    std::ifstream in(reportPath(rank));
    failures += "rank " + std::to_string(rank) + " (status " + std::to_string(status) +
                "): " + std::string(std::istreambuf_iterator<char>(in), {}) + "\n";
  }
  std::filesystem::remove_all(dir);
  return failures;
}

void barrier(net::Store& store, const std::string& name, int rank, int size) {
  net::Bootstrap(store, "barrier", rank, size, 60s).allGather(name, net::Bytes{});
}

// Rank-specific and position-dependent, so a wrong rank, offset or length all show.
std::vector<uint8_t> pattern(int rank, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(rank * 37 + i * 13 + (i >> 8));
  return out;
}

std::vector<uint8_t> copyToHost(const void* device, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  gpuCheck(XCCL_RT(Memcpy)(host.data(), device, bytes, XCCL_RT(MemcpyDeviceToHost)), "Memcpy D2H");
  return host;
}

void requireZero(const void* device, size_t bytes, const std::string& what) {
  const std::vector<uint8_t> host = copyToHost(device, bytes);
  for (size_t i = 0; i < bytes; ++i) {
    XCCL_CHECK(host[i] == 0, what, ": byte ", i, " is ", int{host[i]});
  }
}

template <typename F>
ErrorKind kindThrownBy(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  XCCL_THROW(ErrorKind::kInternal, "expected an xccl::Error, nothing was thrown");
}

class CudaIpcProcesses : public ::testing::TestWithParam<int> {};

TEST_P(CudaIpcProcesses, EveryRankReadsEveryPeersData) {
  SKIP_WITHOUT_GPU();
  const int size = GetParam();
  const size_t dataBytes = 1000003;  // odd: no vector width divides it
  const std::string failures = runProcesses(size, [&](int rank, net::Store& store) {
    auto ws = Workspace::create(store, "ws", rank, size, 0, dataBytes, 60s);
    XCCL_CHECK(ws->rank() == rank && ws->size() == size && ws->device() == 0);
    XCCL_CHECK(ws->layout().dataBytes == dataBytes);
    XCCL_CHECK(ws->data(rank) == ws->base(rank));
    XCCL_CHECK(kindThrownBy([&] { ws->base(size); }) == ErrorKind::kInvalidArgument);

    // Every rank zeroed its fixed parts before publishing, so they read as zero from anywhere.
    for (int r = 0; r < size; ++r) {
      requireZero(ws->flags(r), sizeof(kernels::FlagArea), "flags of rank " + std::to_string(r));
      XCCL_CHECK(ws->base(r) == ws->base(r), "a mapping is opened once, then cached");
    }
    requireZero(ws->epochs(), kernels::kMaxBlocks * sizeof(uint32_t), "epochs");
    requireZero(ws->error(), sizeof(uint32_t), "error word");

    const std::vector<uint8_t> mine = pattern(rank, dataBytes);
    gpuCheck(XCCL_RT(Memcpy)(ws->data(rank), mine.data(), dataBytes, XCCL_RT(MemcpyHostToDevice)),
             "Memcpy H2D");
    gpuCheck(XCCL_RT(DeviceSynchronize)(), "DeviceSynchronize");
    barrier(store, "written", rank, size);
    for (int r = 0; r < size; ++r) {
      const std::vector<uint8_t> seen = copyToHost(ws->data(r), dataBytes);
      const std::vector<uint8_t> expected = pattern(r, dataBytes);
      for (size_t i = 0; i < dataBytes; ++i) {
        XCCL_CHECK(seen[i] == expected[i], "rank ", rank, " reading rank ", r, "'s data: byte ", i,
                   " is ", int{seen[i]}, ", expected ", int{expected[i]});
      }
    }
    // No rank frees its allocation while a peer may still read it (workspace.h, Lifetime).
    barrier(store, "read", rank, size);
  });
  EXPECT_EQ(failures, "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CudaIpcProcesses, ::testing::Values(2, 3, 4));

TEST(CudaIpc, UnequalDataSizesFailOnEveryRank) {
  SKIP_WITHOUT_GPU();
  const std::string failures = runProcesses(2, [](int rank, net::Store& store) {
    std::string message;
    const ErrorKind kind =
        kindThrownBy([&] { Workspace::create(store, "ws", rank, 2, 0, 4096 + rank * 512, 30s); },
                     &message);
    XCCL_CHECK(kind == ErrorKind::kInvalidArgument, message);
    XCCL_CHECK(message.find("4608") != std::string::npos, message);
  });
  EXPECT_EQ(failures, "");
}

TEST(CudaIpc, MissingRanksTimeOutNamingThem) {
  SKIP_WITHOUT_GPU();
  const std::string failures = runProcesses(1, [](int, net::Store& store) {
    std::string message;
    const auto start = Clock::now();
    const ErrorKind kind =
        kindThrownBy([&] { Workspace::create(store, "ws", 0, 3, 0, 4096, 300ms); }, &message);
    XCCL_CHECK(kind == ErrorKind::kTimeout, message);
    XCCL_CHECK(message.find("ranks [1, 2]") != std::string::npos, message);
    XCCL_CHECK(Clock::now() - start < 20s, "the timeout bounds the whole wait");
  });
  EXPECT_EQ(failures, "");
}

// Ranks as threads of one process (how unit tests and virtual ranks run): CUDA cannot open a
// process's own IPC handle, so peers there are used through their plain pointers.
TEST(CudaIpc, RanksInOneProcessShareTheirPointers) {
  SKIP_WITHOUT_GPU();
  const std::string failures = runProcesses(1, [](int, net::Store&) {
    constexpr int kRanks = 3;
    net::MemoryStore store;
    std::vector<std::unique_ptr<Workspace>> ws(kRanks);
    std::vector<std::thread> threads;
    std::vector<std::string> errors(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        try {
          ws[r] = Workspace::create(store, "threads", r, kRanks, 0, 777, 30s);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r) XCCL_CHECK(ws[r] != nullptr, "rank ", r, ": ", errors[r]);
    for (int r = 0; r < kRanks; ++r) {
      for (int p = 0; p < kRanks; ++p) XCCL_CHECK(ws[r]->base(p) == ws[p]->base(p), r, " ", p);
    }
    const std::vector<uint8_t> two = pattern(2, 777);
    gpuCheck(XCCL_RT(Memcpy)(ws[2]->data(2), two.data(), two.size(), XCCL_RT(MemcpyHostToDevice)),
             "H2D");
    XCCL_CHECK(copyToHost(ws[0]->data(2), two.size()) == two);
  });
  EXPECT_EQ(failures, "");
}

// A rank that cannot create its part publishes why, so the others throw the same kind at once
// instead of waiting out the timeout. Runs without a GPU too (every rank then fails to count
// devices, and all throw the lowest rank's kInternal), in a child: it initialises CUDA.
TEST(CudaIpc, AFailingRankFailsTheWholeGroupAtOnce) {
  const bool haveGpu = whyNoGpu().empty();
  const std::string failures = runProcesses(1, [haveGpu](int, net::Store&) {
    constexpr int kRanks = 3;
    net::MemoryStore store;
    std::vector<ErrorKind> kinds(kRanks);
    std::vector<std::string> messages(kRanks);
    std::vector<std::thread> threads;
    const auto start = Clock::now();
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        const int device = r == 1 ? -1 : 0;  // rank 1 passes a device that does not exist
        kinds[r] =
            kindThrownBy([&] { Workspace::create(store, "fail", r, kRanks, device, 4096, 60s); },
                         &messages[r]);
      });
    }
    for (auto& t : threads) t.join();
    XCCL_CHECK(Clock::now() - start < 30s, "the group waited for the timeout");
    const ErrorKind expected = haveGpu ? ErrorKind::kInvalidArgument : ErrorKind::kInternal;
    for (int r = 0; r < kRanks; ++r) {
      XCCL_CHECK(kinds[r] == expected, "rank ", r, ": ", messages[r]);
    }
    if (haveGpu) XCCL_CHECK(messages[0].find("rank 1") != std::string::npos, messages[0]);
  });
  EXPECT_EQ(failures, "");
}

// Argument checks come before any CUDA call, so this runs (and this process stays CUDA-free)
// without a GPU too.
TEST(CudaIpc, BadGroupsAreInvalidArguments) {
  net::MemoryStore store;
  const int tooMany = kernels::kMaxRanks + 1;
  EXPECT_EQ(kindThrownBy([&] { Workspace::create(store, "x", 0, tooMany, 0, 0, 1s); }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kindThrownBy([&] { Workspace::create(store, "x", 0, 0, 0, 0, 1s); }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kindThrownBy([&] { Workspace::create(store, "x", 2, 2, 0, 0, 1s); }),
            ErrorKind::kInvalidArgument);
}

// createAgreed (issue 9 defect 4): every rank gets a workspace with every peer mapped, or every
// rank gets nullptr and the same reason; a retry is a fresh attempt.

// Writes this rank's pattern into its workspace, then checks every peer's through the mapping.
void exchangePatterns(Workspace& ws, net::Store& store, const std::string& name, int rank,
                      int size) {
  const size_t bytes = ws.layout().dataBytes;
  const std::vector<uint8_t> mine = pattern(rank, bytes);
  gpuCheck(XCCL_RT(Memcpy)(ws.data(rank), mine.data(), bytes, XCCL_RT(MemcpyHostToDevice)),
           "Memcpy H2D");
  gpuCheck(XCCL_RT(DeviceSynchronize)(), "DeviceSynchronize");
  barrier(store, name + "/written", rank, size);
  for (int r = 0; r < size; ++r) {
    XCCL_CHECK(copyToHost(ws.data(r), bytes) == pattern(r, bytes), "rank ", rank, " reading ", r);
  }
  barrier(store, name + "/read", rank, size);  // nobody frees what a peer still reads
}

class CudaIpcAgreed : public ::testing::TestWithParam<int> {};

TEST_P(CudaIpcAgreed, EveryRankMapsEveryPeer) {
  SKIP_WITHOUT_GPU();
  const int size = GetParam();
  const std::string failures = runProcesses(size, [&](int rank, net::Store& store) {
    std::string whyNot = "untouched";
    auto ws = Workspace::createAgreed(store, "ws", 0, rank, size, 0, 65536, 60s, &whyNot);
    XCCL_CHECK(ws != nullptr, whyNot);
    XCCL_CHECK(whyNot == "untouched", "whyNot is only written for a refusal: ", whyNot);
    exchangePatterns(*ws, store, "agreed", rank, size);
  });
  EXPECT_EQ(failures, "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CudaIpcAgreed, ::testing::Values(1, 2, 3));

TEST(CudaIpcAgreed, OneRankVotingNoRefusesEverywhereAndARetryStartsFresh) {
  SKIP_WITHOUT_GPU();
  constexpr int kRanks = 3;
  const std::string failures = runProcesses(kRanks, [&](int rank, net::Store& store) {
    // Rank 1 finds (through the test seam) that it cannot reach rank 2; its real checks passed.
    const Workspace::PeerCheckHook hook = [rank](int peer) {
      return rank == 1 && peer == 2 ? std::string("injected: rank 2 unreachable") : "";
    };
    std::string whyNot;
    auto refused =
        Workspace::createAgreed(store, "ws", 0, rank, kRanks, 0, 4096, 60s, &whyNot, hook);
    XCCL_CHECK(refused == nullptr, "rank ", rank, " got a workspace the group refused");
    XCCL_CHECK(whyNot == "cuda_ipc workspace 'ws' attempt 0: rank 1: injected: rank 2 unreachable",
               whyNot);
    // Attempt 1 reads only its own records: attempt 0's handles name freed memory, so a stale
    // read would fail to map or show the wrong bytes.
    whyNot.clear();
    auto ws = Workspace::createAgreed(store, "ws", 1, rank, kRanks, 0, 4096, 60s, &whyNot);
    XCCL_CHECK(ws != nullptr, whyNot);
    exchangePatterns(*ws, store, "retry", rank, kRanks);
  });
  EXPECT_EQ(failures, "");
}

TEST(CudaIpcAgreed, OneRankOutOfMemoryIsANoVoteNotAHang) {
  SKIP_WITHOUT_GPU();
  const std::string failures = runProcesses(2, [&](int rank, net::Store& store) {
    // Rank 1 asks for 2^50 bytes, which no GPU has: its allocation fails as out of memory would.
    const size_t bytes = rank == 1 ? size_t{1} << 50 : 4096;
    std::string whyNot;
    const auto start = Clock::now();
    auto ws = Workspace::createAgreed(store, "oom", 0, rank, 2, 0, bytes, 60s, &whyNot);
    XCCL_CHECK(ws == nullptr && Clock::now() - start < 30s, "rank ", rank);
    XCCL_CHECK(whyNot.rfind("cuda_ipc workspace 'oom' attempt 0: rank 1: ", 0) == 0, whyNot);
    XCCL_CHECK(whyNot.find("alloc") != std::string::npos, whyNot);
  });
  EXPECT_EQ(failures, "");
}

// Ranks as threads of one process; also runs without a GPU, where every rank's step 1 fails and
// all must still return nullptr with one reason (in a child: it initialises CUDA).
TEST(CudaIpcAgreed, RanksInOneProcessAgreeAlikeWithOrWithoutAGpu) {
  const bool haveGpu = whyNoGpu().empty();
  const std::string failures = runProcesses(1, [haveGpu](int, net::Store&) {
    constexpr int kRanks = 3;
    net::MemoryStore store;
    std::vector<std::string> why(kRanks);
    std::vector<std::unique_ptr<Workspace>> ws(kRanks);
    auto attempt = [&](int number, const Workspace::PeerCheckHook& hook) {
      testing::runThreads(kRanks, [&](int r) {
        ws[r] = Workspace::createAgreed(store, "threads", number, r, kRanks, 0, 4096, 30s, &why[r],
                                        hook);
      });
      for (int r = 1; r < kRanks; ++r) {
        XCCL_CHECK(why[r] == why[0] && (ws[r] == nullptr) == (ws[0] == nullptr), "rank ", r,
                   " disagrees: '", why[r], "' vs '", why[0], "'");
      }
    };
    attempt(0, [](int peer) { return peer == 0 ? "injected" : ""; });
    XCCL_CHECK(ws[0] == nullptr, "a refused attempt returned a workspace");
    if (!haveGpu) {
      XCCL_CHECK(why[0].find("ranks 0-2: ") != std::string::npos, why[0]);
      return;
    }
    // Ranks 1 and 2 each objected to peer 0 (rank 0's own peers are 1 and 2, never itself).
    XCCL_CHECK(why[0] == "cuda_ipc workspace 'threads' attempt 0: ranks 1-2: injected", why[0]);
    attempt(1, nullptr);
    for (int r = 0; r < kRanks; ++r) {
      XCCL_CHECK(ws[r] != nullptr, why[r]);
      for (int p = 0; p < kRanks; ++p) XCCL_CHECK(ws[r]->base(p) == ws[p]->base(p), r, " ", p);
    }
  });
  EXPECT_EQ(failures, "");
}

TEST(CudaIpcAgreed, MissingRanksTimeOutNamingThem) {
  SKIP_WITHOUT_GPU();
  const std::string failures = runProcesses(1, [](int, net::Store& store) {
    std::string message, whyNot;
    const ErrorKind kind = kindThrownBy(
        [&] { Workspace::createAgreed(store, "ws", 0, 0, 3, 0, 4096, 300ms, &whyNot); }, &message);
    XCCL_CHECK(kind == ErrorKind::kTimeout, message);
    XCCL_CHECK(message.find("ranks [1, 2]") != std::string::npos, message);
  });
  EXPECT_EQ(failures, "");
}

// Checked before any CUDA call: runs (and this process stays CUDA-free) without a GPU too.
TEST(CudaIpcAgreed, BadArgumentsAreInvalidArguments) {
  net::MemoryStore store;
  std::string whyNot;
  EXPECT_EQ(kindThrownBy([&] { Workspace::createAgreed(store, "x", 0, 0, 1, 0, 0, 1s, nullptr); }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kindThrownBy([&] { Workspace::createAgreed(store, "x", -1, 0, 1, 0, 0, 1s, &whyNot); }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kindThrownBy([&] { Workspace::createAgreed(store, "x", 0, 1, 1, 0, 0, 1s, &whyNot); }),
            ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace xccl
