// The one-sided contract of net/transport/transport.h, checked the same way on every transport
// (tcp, shm, ofi): each rank registers a region, and writes into the next rank's while the previous
// rank writes into its own.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "net/transport/transport.h"
#include "threads.h"

namespace xccl::testing {

struct OneSidedCase {
  size_t bytes = 8 << 20;  // region size; writes cross many TCP chunks
  // Whether the target itself refuses writes the writer was lied to about (a region larger than
  // registered, an unknown key). Over libfabric the provider refuses them, with its own errors.
  bool targetChecks = true;
};

inline uint8_t patternByte(int writer, size_t i) {
  return static_cast<uint8_t>((i * 31 + static_cast<size_t>(writer) * 7 + 1) & 0xff);
}

inline void checkOneSidedWrites(int rank, int size, net::Transport& t, const OneSidedCase& c) {
  using net::RequestPtr;
  auto soon = [](int ms = 20000) { return net::Clock::now() + std::chrono::milliseconds(ms); };
  auto tag = [](uint64_t seq) { return net::MessageTag{net::TagSpace::kPointToPoint, 0, seq}; };
  auto errorOf = [&](const RequestPtr& r, int ms = 20000) -> std::string {
    try {
      t.wait({r}, soon(ms), "op");
    } catch (const Error& e) {
      return std::string(e.what()) + (e.kind() == ErrorKind::kInvalidArgument ? " [arg]" : "");
    }
    return "";
  };
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  // A message from prev to us (or from us to next): orders what each side did before it.
  auto syncFromPrev = [&](uint64_t seq) {
    int token = rank, got = -1;
    t.wait({t.isend(next, tag(seq), &token, 4), t.irecv(prev, tag(seq), &got, 4)}, soon(), "sync");
    EXPECT_EQ(got, prev);
  };
  const size_t bytes = c.bytes;
  std::vector<uint8_t> target(bytes, 0), source(bytes);
  for (size_t i = 0; i < bytes; ++i) source[i] = patternByte(rank, i);
  auto registration = t.registerMemory(target.data(), bytes);
  const net::RemoteRegion mine = registration->remote();
  EXPECT_NE(mine.key, 0u);
  EXPECT_EQ(mine.bytes, bytes);
  net::RemoteRegion theirs;
  t.wait({t.isend(prev, tag(100), &mine, sizeof(mine)),
          t.irecv(next, tag(100), &theirs, sizeof(theirs))},
         soon(), "regions");

  // Waits posted before the writes: each returns only once its write's bytes are visible here
  // (checked without waiting for anything else); equal signals complete in order.
  std::vector<RequestPtr> waits{t.iwaitWrite(prev, 7), t.iwaitWrite(prev, 7)};
  syncFromPrev(101);  // our waits are posted before prev writes
  auto w1 = t.iwrite(next, source.data(), 1000, theirs, 0, 7);
  auto w2 = t.iwrite(next, source.data() + 1000, bytes - 1001, theirs, 1000, 7);
  t.wait({waits[0]}, soon(), "first signal");
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(target[i], patternByte(prev, i)) << i;
  t.wait({waits[1]}, soon(), "second signal");
  for (size_t i = 0; i < bytes - 1; ++i) ASSERT_EQ(target[i], patternByte(prev, i)) << i;
  t.wait({w1, w2}, soon(), "writes");

  // Signals that come before their wait are counted, each completing one wait.
  auto w3 = t.iwrite(next, source.data(), 1, theirs, bytes - 1, 9);
  auto w4 = t.iwrite(next, source.data(), 1, theirs, bytes - 1, 9);
  t.wait({w3, w4}, soon(), "early writes");
  syncFromPrev(102);  // prev's early writes have landed here
  t.wait({t.iwaitWrite(prev, 9), t.iwaitWrite(prev, 9)}, soon(), "counted signals");
  EXPECT_EQ(target[bytes - 1], patternByte(prev, 0));
  EXPECT_NE(errorOf(t.iwaitWrite(prev, 9), 100).find("timed out"), std::string::npos);

  // Signal 0 is no signal: the bytes land, nothing waits for it, nothing is counted.
  std::vector<uint8_t> zeros(4096, 0);
  t.wait({t.iwrite(next, zeros.data(), zeros.size(), theirs, 0, 0)}, soon(), "unsignalled");
  syncFromPrev(103);
  // Without a signal nothing here says when the bytes are in place (libfabric may place them
  // after the writer's completion and after a later message): they must show up, promptly.
  auto landed = [&] {
    return __atomic_load_n(&target[0], __ATOMIC_ACQUIRE) == 0 &&
           __atomic_load_n(&target[4095], __ATOMIC_ACQUIRE) == 0;
  };
  for (auto until = soon(5000); !landed() && net::Clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(landed());
  EXPECT_EQ(errorKindOf([&] { t.iwaitWrite(prev, 0); }), ErrorKind::kInvalidArgument);

  // Out of range: refused by the writer, naming the sizes, nothing written.
  auto out = t.iwrite(next, source.data(), 2, theirs, bytes - 1, 11);
  const std::string outError = errorOf(out);
  EXPECT_NE(outError.find("[arg]"), std::string::npos) << outError;
  EXPECT_NE(outError.find(std::to_string(bytes)), std::string::npos) << outError;
  if (c.targetChecks) {
    // A writer told a larger region, or a key nobody registered: the target refuses, writes
    // nothing, and the connection carries on.
    net::RemoteRegion lie = theirs;
    lie.bytes = bytes * 2;
    const std::string tooFar = errorOf(t.iwrite(next, source.data(), 4096, lie, bytes, 12));
    EXPECT_NE(tooFar.find("[arg]"), std::string::npos) << tooFar;
    EXPECT_NE(tooFar.find("does not fit"), std::string::npos) << tooFar;
    net::RemoteRegion unknown = theirs;
    unknown.key ^= 0x5a5a;
    const std::string noKey = errorOf(t.iwrite(next, source.data(), 4096, unknown, 0, 13));
    EXPECT_NE(noKey.find("[arg]"), std::string::npos) << noKey;
    EXPECT_NE(noKey.find("4096 bytes"), std::string::npos) << noKey;
  }
  syncFromPrev(104);  // and messages still flow
  EXPECT_EQ(target[0], 0);
  EXPECT_EQ(target[4096], patternByte(prev, 4096));
  auto pending = t.iwaitWrite(prev, 11);
  EXPECT_NE(errorOf(pending, 100).find("timed out"), std::string::npos);
  // The peer must not deregister before our writes landed.
  t.wait({t.iwrite(next, source.data(), 8, theirs, 0, 14)}, soon(), "last write");
  t.wait({t.iwaitWrite(prev, 14)}, soon(), "last signal");
  syncFromPrev(105);
}

// Rank 1 deregisters while rank 0's 32 MiB write to it arrives: once deregistration returned,
// nothing more is written into the memory (a write already being copied finishes first), and the
// writer's request ends: landed before, or refused as deregistered.
inline void checkDeregistrationDuringWrite(int rank, net::Transport& t) {
  auto soon = [] { return net::Clock::now() + std::chrono::seconds(20); };
  auto tag = [](uint64_t seq) { return net::MessageTag{net::TagSpace::kPointToPoint, 0, seq}; };
  const size_t bytes = 32 << 20;
  std::vector<uint8_t> memory(bytes, 0);
  auto registration = t.registerMemory(memory.data(), bytes);
  net::RemoteRegion region = registration->remote();
  int go = 1;
  if (rank == 1) {
    t.wait({t.isend(0, tag(1), &region, sizeof(region))}, soon(), "region");
    // Deregister as soon as the write's first bytes are here, while the rest is still arriving
    // (a message from the writer would come after the whole write on an ordered transport).
    const auto giveUp = soon();
    while (__atomic_load_n(&memory[0], __ATOMIC_ACQUIRE) == 0 && net::Clock::now() < giveUp) {
      std::this_thread::yield();
    }
    registration.reset();
    const std::vector<uint8_t> after = memory;
    t.wait({t.irecv(0, tag(3), &go, 4)}, soon(), "ended");
    EXPECT_TRUE(memory == after) << "bytes landed after deregistration";
  } else {
    std::vector<uint8_t> source(bytes, 0xab);
    t.wait({t.irecv(1, tag(1), &region, sizeof(region))}, soon(), "region");
    auto write = t.iwrite(1, source.data(), bytes, region, 0, 5);
    try {
      t.wait({write}, soon(), "write");
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("deregistered"), std::string::npos) << e.what();
    }
    t.wait({t.isend(1, tag(3), &go, 4)}, soon(), "ended");
  }
}

}  // namespace xccl::testing
