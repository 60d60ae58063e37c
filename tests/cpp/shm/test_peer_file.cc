// Shared-memory files a peer names through the store (net/regions/shm/peer_file.h): the name check
// and record parser (names.h) as pure functions, then the real creators (segment, p2p rings, window
// files) with the file tampered with between its creation and the other rank's open: a mode that
// lets others in, a size other than the layout's, another owner, numbers and names that are not
// xccl's. Every one is refused on every rank, naming the file and what is wrong, and no file is
// left behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "net/regions/shm/names.h"
#include "net/regions/shm/peer_file.h"
#include "net/regions/shm/segment.h"
#include "net/regions/shm/window_region.h"
#include "net/rendezvous/bootstrap.h"
#include "net/transport/shm_rings/mailboxes.h"
#include "shm_testing.h"
#include "threads.h"

namespace xccl::net::shm {
namespace {

using namespace std::chrono_literals;

TEST(ShmFileName, AcceptsOnlyTheFormXcclMakes) {
  EXPECT_EQ(checkFileName("xccl-p2p-1234-0123456789abcdef", "xccl-p2p-"), "");
  EXPECT_EQ(checkFileName("xccl-42-ffffffffffffffff", "xccl-"), "");
  EXPECT_EQ(checkFileName("xccl-w7-0000000000000000", "xccl-w"), "");
  // With the incarnation's tag (names.h newFileName).
  EXPECT_EQ(checkFileName("xccl-p2p-1234-89abcdef-0123456789abcdef", "xccl-p2p-"), "");
  EXPECT_EQ(checkFileName("xccl-42-0-ffffffffffffffff", "xccl-"), "");
  for (const char* bad : {"", "xccl-", "xccl-p2p-", "xccl-p2p-12-", "xccl-p2p-12-0123456789abcde",
                          "xccl-p2p-12-0123456789abcdef0", "xccl-p2p-12-0123456789ABCDEF",
                          "xccl-p2p-12_0123456789abcdef", "xccl-p2p--0123456789abcdef",
                          "xccl-p2p-12345678901-0123456789abcdef", "../etc/passwd",
                          "xccl-p2p-1/../../0123456789abcdef", "xccl-w12-0123456789abcdef",
                          "XCCL-P2P-12-0123456789abcdef", "xccl-p2p-12--0123456789abcdef",
                          "xccl-p2p-12-89abcdeg-0123456789abcdef",
                          "xccl-p2p-12-0123456789abcdef0-0123456789abcdef"}) {
    const std::string why = checkFileName(bad, "xccl-p2p-");
    EXPECT_NE(why, "") << "accepted '" << bad << "'";
  }
  // A NUL inside, a newline, and a very long name: refused, and the message stays printable.
  const std::string nul("xccl-p2p-12-0123456789abc\0ef", 28);
  EXPECT_NE(checkFileName(nul, "xccl-p2p-"), "");
  const std::string longName = "xccl-p2p-" + std::string(10000, '1');
  const std::string why = checkFileName(longName, "xccl-p2p-");
  EXPECT_NE(why.find("too long"), std::string::npos) << why;
  EXPECT_LT(why.size(), 200u);
  EXPECT_EQ(checkFileName("xccl-p2p-12\n-0123456789abcdef", "xccl-p2p-").find('\n'),
            std::string::npos);
}

TEST(ShmFileName, CountsAreStrictDecimalsThatFit) {
  const std::vector<SizeBound> any{{"bytes", 0, UINT64_MAX}};
  const std::string name = " xccl-p2p-1234-0123456789abcdef";
  EXPECT_EQ(parsePublished("+0" + name, any).sizes[0], 0u);
  EXPECT_EQ(parsePublished("+18446744073709551615" + name, any).sizes[0], UINT64_MAX);
  for (const char* bad : {"", "18446744073709551616", "99999999999999999999999", "-1", "+1", " 1",
                          "1 ", "0x10", "1e3", "12a"}) {
    EXPECT_THROW(parsePublished(std::string("+") + bad + name, any), Error) << bad;
  }
}

// Forwards to one shared store; a get of a key ending in `suffix` hands its value to `tamper`
// first (the moment the publishing rank's file exists and this rank is about to open it) and
// returns what tamper makes of it.
class TamperingStore : public Store {
 public:
  TamperingStore(Store& inner, std::string suffix,
                 std::function<std::string(const std::string&)> tamper)
      : inner_(inner), suffix_(std::move(suffix)), tamper_(std::move(tamper)) {}
  void set(const std::string& key, const Bytes& value) override { inner_.set(key, value); }
  int64_t add(const std::string& key, int64_t delta) override { return inner_.add(key, delta); }
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    Bytes value = inner_.get(key, timeout);
    if (key.size() < suffix_.size() ||
        key.compare(key.size() - suffix_.size(), suffix_.size(), suffix_) != 0) {
      return value;
    }
    return toBytes(tamper_(toString(value)));
  }

 private:
  Store& inner_;
  const std::string suffix_;
  const std::function<std::string(const std::string&)> tamper_;
};

// What is done to the file named at the end of a published value, before the peer opens it.
struct Tamper {
  const char* what;  // the test case
  const char* expected;  // in every rank's error
  std::function<void(const std::string& path)> apply;
};

std::vector<Tamper> tampers() {
  return {
      {"mode 0644", "has mode 0644", [](const std::string& p) { ::chmod(p.c_str(), 0644); }},
      {"grown by a page", "bytes, expected",
       [](const std::string& p) {
         struct stat st{};
         ::stat(p.c_str(), &st);
         ASSERT_EQ(::truncate(p.c_str(), st.st_size + 4096), 0);
       }},
      {"owned by nobody", "belongs to uid 65534",
       [](const std::string& p) { ASSERT_EQ(::chown(p.c_str(), 65534, 65534), 0); }},
  };
}

std::string lastWord(const std::string& text) { return text.substr(text.rfind(' ') + 1); }

// Runs `make(rank, store)` on two threads, rank 1's store tampering with the value under
// `suffix`; each returns its failure ("" if it succeeded).
void expectRefusedOnBothRanks(const std::string& suffix,
                              const std::function<std::string(const std::string&)>& tamper,
                              const std::string& expected,
                              const std::function<std::string(int, Store&)>& make) {
  MemoryStore shared;
  std::string name;
  TamperingStore rank1(shared, suffix, [&](const std::string& published) {
    name = lastWord(published);
    return tamper(published);
  });
  std::string why[2];
  testing::runThreads(2, [&](int rank) {
    why[rank] = make(rank, rank == 0 ? static_cast<Store&>(shared) : rank1);
  });
  ASSERT_FALSE(name.empty()) << "no value under " << suffix << " was read";
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(why[rank].find(expected), std::string::npos) << "rank " << rank << ": " << why[rank];
  }
  EXPECT_FALSE(testing::shmNameExists(name)) << name << " left in /dev/shm";
}

std::string makeRings(int rank, Store& store) {
  std::string why;
  auto boxes = shm_rings::Mailboxes::create(store, "p2p", rank, 2, 10s, &why);
  return boxes ? "" : why;
}

std::string makeSegment(int rank, Store& store) {
  std::string why;
  auto segment = Segment::create(store, rank, 2, testing::shmOptions(4096, 10s), &why);
  return segment ? "" : why;
}

std::string makeWindow(int rank, Store& store) {
  try {
    WindowRegion::create(Bootstrap(store, "win", rank, 2, 10s), {0, 1}, 8192);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

struct Creator {
  const char* what;
  const char* suffix;  // the key rank 1 reads the file's name from
  std::function<std::string(int, Store&)> make;
};

TEST(ShmPeerFiles, TamperedFilesAreRefusedBeforeMapping) {
  const Creator creators[] = {{"p2p rings", "/name", makeRings},
                              {"segment", "/name", makeSegment},
                              {"window", "/files/0", makeWindow}};
  for (const Creator& c : creators) {
    for (const Tamper& t : tampers()) {
      SCOPED_TRACE(std::string(c.what) + ", " + t.what);
      expectRefusedOnBothRanks(
          c.suffix,
          [&](const std::string& published) {
            t.apply("/dev/shm/" + lastWord(published));
            return published;
          },
          t.expected, c.make);
    }
  }
}

// Sizes or names a peer did not make: a clear refusal, never an exception from a number parser
// or an open outside /dev/shm.
TEST(ShmPeerFiles, MalformedPublicationsAreRefused) {
  const auto replaceSizes = [](const std::string& published) {
    return "+99999999999999999999999 " + lastWord(published);
  };
  const auto replaceName = [](const std::string& published) {
    return published.substr(0, published.rfind(' ') + 1) + "../../etc/passwd";
  };
  expectRefusedOnBothRanks("/name", replaceSizes, "ring bytes must be", makeRings);
  expectRefusedOnBothRanks("/name", replaceName, "is not the name of an xccl file", makeRings);
  expectRefusedOnBothRanks(
      "/name",
      [](const std::string& published) {
        return published.substr(0, published.rfind(' ') + 1) + "xccl-p2p-1-../../etc/passwd";
      },
      "is not the name of an xccl file", makeRings);
  expectRefusedOnBothRanks(
      "/name",
      [](const std::string& published) {
        return "+4096 99999999999999999999 " + lastWord(published);
      },
      "pool bytes must be", makeSegment);
  expectRefusedOnBothRanks("/name", replaceName, "is not the name of an xccl file", makeSegment);
  expectRefusedOnBothRanks(
      "/files/0", [](const std::string& p) { return "18446744073709551615 " + lastWord(p); },
      "bad shared-memory record", makeWindow);
  expectRefusedOnBothRanks("/files/0", replaceName, "is not the name of an xccl file", makeWindow);
}

}  // namespace
}  // namespace xccl::net::shm
