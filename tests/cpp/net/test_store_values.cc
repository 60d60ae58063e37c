// Values a peer publishes through the store, as a stale key or a foreign job could leave them:
// every parser refuses what its publisher never writes with an xccl::Error that names it (never
// another exception), and nothing is opened or allocated from it. Each input here once escaped
// as a std::exception or was accepted (tests/fuzz/fuzz_store_values.cc explores the rest).
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/error.h"
#include "net/regions/shm/names.h"
#include "net/regions/shm/segment.h"
#include "net/regions/shm/window_region.h"
#include "net/rendezvous/bootstrap.h"
#include "net/rendezvous/hosts.h"
#include "net/rendezvous/store.h"
#include "net/transport/shm_rings/mailboxes.h"
#include "net/transport/shm_rings/ring.h"
#include "net/transport/tcp/interfaces.h"
#include "net/transport/window_record.h"
#include "threads.h"

namespace xccl::net {
namespace {

using namespace std::chrono_literals;
using testing::errorKindOf;

TEST(StoreValues, AddressRefusesPortsItCannotHold) {
  for (const std::string bad :
       {"10.0.0.1:", "10.0.0.1:http", "10.0.0.1:80x", "10.0.0.1:65536", "10.0.0.1:-1",
        "10.0.0.1:+80", "10.0.0.1:99999999999", "[::1:80", "[:80", "10.0.0.1 :80"}) {
    EXPECT_EQ(errorKindOf([&] { tcp::Address::parse(bad); }), ErrorKind::kInvalidArgument) << bad;
  }
  EXPECT_EQ(tcp::Address::parse("10.0.0.1:65535").toString(), "10.0.0.1:65535");
  EXPECT_EQ(tcp::Address::parse("[fe80::1]:0").toString(), "[fe80::1]:0");  // a listener's "any"
}

TEST(StoreValues, InterfaceListRefusesWhatPublishNeverWrites) {
  const std::string good = "eth0=10.0.0.1:41000/167772160/4278190080";
  bool named = false;
  EXPECT_EQ(tcp::parseInterfaces("E|" + good, &named).size(), 1u);
  for (const std::string& bad :
       std::vector<std::string>{"X|" + good, "E|eth0=10.0.0.1:41000/ten/4278190080",
                                "E|eth0=10.0.0.1:41000/1/99999999999", "E|eth0=10.0.0.1:41000/-1/0",
                                "E|eth0=10.0.0.1:41000/167772160/", "E|eth0=10.0.0.1:0/0/0",
                                "E|eth0=10.0.0.1:http/0/0", "E|=10.0.0.1:41000/0/0",
                                "E|a-very-long-interface-name=10.0.0.1:41000/0/0",
                                "E|eth0=10.0.0.1:41000/167772161/4278190080"}) {
    EXPECT_EQ(errorKindOf([&] { tcp::parseInterfaces(bad, &named); }), ErrorKind::kInternal) << bad;
  }
  std::string many = "A|";
  for (size_t i = 0; i <= tcp::kMaxInterfaces; ++i) many += (i ? "," : "") + good;
  EXPECT_EQ(errorKindOf([&] { tcp::parseInterfaces(many, &named); }), ErrorKind::kInternal);
}

TEST(StoreValues, CensusRefusesAnEmptyHostRecord) {
  MemoryStore store;
  store.set("c/host/1", Bytes{});
  const Bootstrap bootstrap(store, "c", 0, 2, 1s);
  EXPECT_EQ(errorKindOf([&] { takeCensus(bootstrap, "host", "me", true); }), ErrorKind::kInternal);
}

// Rank 1 of 2 meets `record` where rank 0's segment name should be: unavailable, saying why,
// and rank 0 learns it through the mapping vote instead of waiting for it.
TEST(StoreValues, SegmentRecordFromTheStoreIsChecked) {
  for (const std::string bad : {"", "+", "+4096", "+4096 0", "+x 0 xccl-1-2", "+4096 -1 xccl-1-2",
                                "+4096 99999999999999999999 xccl-1-2", "+4096 0 ../xccl-1-2",
                                "+4096 0 other-1-2", "+1 0 xccl-1-2"}) {
    MemoryStore store;
    store.set("p/host/0", toBytes("1this-host"));
    store.set("p/name", toBytes(bad));
    store.set("p/mapped/0", Bytes{});
    shm::Options options;
    options.storePrefix = "p";
    options.hostIdentity = "this-host";
    options.timeout = 2s;
    std::string why;
    EXPECT_EQ(shm::Segment::create(store, 1, 2, options, &why), nullptr) << bad;
    EXPECT_NE(why.find("shared-memory record"), std::string::npos) << bad << ": " << why;
    EXPECT_NE(toString(store.get("p/mapped/1", 1s)), "") << bad;
  }
}

TEST(StoreValues, RingRecordFromTheStoreIsChecked) {
  for (const std::string bad : {"", "+", "+1048576", "+abc xccl-p2p-1-2", "+1 xccl-p2p-1-2",
                                "+1048576 /etc/passwd", "+99999999999999999999 xccl-p2p-1-2"}) {
    MemoryStore store;
    store.set("p/name", toBytes(bad));
    store.set("p/mapped/0", Bytes{});
    std::string why;
    EXPECT_EQ(shm_rings::Mailboxes::create(store, "p", 1, 2, 2s, &why), nullptr) << bad;
    EXPECT_NE(why.find("shared-memory record"), std::string::npos) << bad << ": " << why;
  }
}

TEST(StoreValues, WindowFileRecordFromTheStoreIsChecked) {
  for (const std::string bad : {"", "4096 xccl-w1-2", "+x xccl-w1-2", "+12 xccl-w1-2"}) {
    MemoryStore store;
    store.set("w/files/0", toBytes(bad));
    store.set("w/made/0", Bytes{});
    store.set("w/mapped/0", Bytes{});
    const Bootstrap bootstrap(store, "w", 1, 2, 2s);
    try {
      shm::WindowRegion::create(bootstrap, {0, 1}, 4096);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kSystem) << bad;
      EXPECT_NE(std::string(e.what()).find("shared-memory record"), std::string::npos) << e.what();
    }
  }
}

TEST(StoreValues, ShmNamesAreXcclFilesOnly) {
  EXPECT_TRUE(shm::isFileName("xccl-4242-0123456789abcdef"));
  for (const std::string& bad :
       std::vector<std::string>{"", "xccl-", "xccl-a/b", "../xccl-1", "xccl-1 2", "dbus-1",
                                "xccl-" + std::string(shm::kMaxNameBytes, 'a')}) {
    EXPECT_FALSE(shm::isFileName(bad)) << bad;
  }
  const shm::Published got = shm::parsePublished(shm::formatPublished({4096, 0}, "xccl-1-2"),
                                                 {{"a", 1, 4096}, {"b", 0, 0}});
  EXPECT_TRUE(got.made);
  EXPECT_EQ(got.sizes, (std::vector<uint64_t>{4096, 0}));
  EXPECT_EQ(shm::parsePublished(shm::formatRefusal("full"), {{"a", 1, 4096}}).why, "full");
}

TEST(StoreValues, WindowRecordBoundsItsShape) {
  WindowRecord record;
  record.dtype = 6;
  record.remote = {0x7f0000001000, 4096, 77, 0};
  record.sizes = {32, 32};
  const WindowRecord back = parseWindowRecord(formatWindowRecord(record));
  EXPECT_EQ(back.sizes, record.sizes);
  EXPECT_EQ(back.numel, 1024);
  EXPECT_EQ(back.remote.key, 77u);
  for (const std::string bad :
       {"", "6", "6 1 2 3 4", "6 1 2 3 4 2 32", "6 1 2 3 4 1 32 32", "6 1 2 3 4 1 -5",
        "6 1 2 3 4 99999999999999", "6 1 2 3 4 -1", "6 1 2 3 4 2 4294967296 4294967296",
        "x 1 2 3 4 0", "6 1 2 3 4 0 ", "6  1 2 3 4 0"}) {
    EXPECT_EQ(errorKindOf([&] { parseWindowRecord(bad); }), ErrorKind::kInternal) << bad;
  }
}

// A record's shape against the bytes really behind its window (net::checkWindowFits): the issue's
// 2^30 floats over a 4 KiB window, sizes that only wrap as a byte count, and the edges.
TEST(StoreValues, WindowRecordMustFitItsWindow) {
  auto record = [](std::vector<int64_t> sizes, uint64_t registered = 4096) {
    WindowRecord r;
    r.dtype = 6;  // float
    r.remote.bytes = registered;
    r.sizes = std::move(sizes);
    // Through the parser, as a peer's record arrives.
    return parseWindowRecord(formatWindowRecord(r));
  };
  const uint64_t kWindow = 4096;
  EXPECT_EQ(checkWindowFits(record({1024}), 4, kWindow, true), "");  // exact fit
  EXPECT_EQ(checkWindowFits(record({32, 32}), 4, kWindow, false), "");
  EXPECT_EQ(checkWindowFits(record({0}, 0), 4, 0, true), "");  // an empty window
  EXPECT_EQ(checkWindowFits(record({0, INT64_MAX}, 0), 8, 0, true), "");
  EXPECT_EQ(checkWindowFits(record({}, 8), 8, 8, true), "");  // a scalar: one element

  const std::string huge = checkWindowFits(record({int64_t{1} << 30}), 4, kWindow, true);
  EXPECT_NE(huge.find("1073741824 elements of 4 bytes (4294967296 bytes) is not its window of "
                      "4096 bytes"),
            std::string::npos)
      << huge;
  // One byte short, and one element too many: a view would end past the mapping.
  EXPECT_NE(checkWindowFits(record({1024}), 4, kWindow - 1, true), "");
  EXPECT_NE(checkWindowFits(record({1025}), 4, kWindow, true), "");
  // Too small is refused as well: the shape and the memory are one registration.
  EXPECT_NE(checkWindowFits(record({1023}), 4, kWindow, true), "");
  // Element counts that fit int64 but whose bytes do not fit 64 bits (or wrap to the window's
  // size: 2^62 + 1024 elements of 4 bytes are 2^64 + 4096 bytes).
  for (const std::vector<int64_t>& sizes : {std::vector<int64_t>{INT64_MAX},
                                            {int64_t{1} << 61, 2},
                                            {(int64_t{1} << 62) + 1024},
                                            {int64_t{1} << 31, int64_t{1} << 31}}) {
    const std::string why = checkWindowFits(record(sizes), 4, kWindow, true);
    EXPECT_NE(why.find("passes 2^64 bytes"), std::string::npos) << sizes[0] << ": " << why;
  }
  EXPECT_NE(checkWindowFits(record({INT64_MAX}), 16, UINT64_MAX, true), "");
  // What the peer registered with the transport must be its window too.
  const std::string registered = checkWindowFits(record({1024}, 1 << 30), 4, kWindow, true);
  EXPECT_NE(registered.find("registered 1073741824 bytes"), std::string::npos) << registered;
  EXPECT_EQ(checkWindowFits(record({1024}, 1 << 30), 4, kWindow, false), "");  // not registered
  // A dtype without an element size never fits, not even an empty window.
  EXPECT_NE(checkWindowFits(record({0}, 0), 0, 0, true), "");
  // The parser refuses dimensions whose product passes INT64_MAX before any of this.
  EXPECT_EQ(errorKindOf([&] { record({INT64_MAX, 2}); }), ErrorKind::kInternal);
}

}  // namespace
}  // namespace xccl::net
