// One peer's receive state on the TCP transport, apart from sockets and locks so that tests and a
// fuzzer (tests/fuzz/fuzz_tcp_receive.cc) drive it with any frames: which chunks arrived (by
// sequence number: a replay is dropped, the cumulative acknowledgement moves), chunks of messages
// not known yet (stashed, bounded), and which bytes of each message arrived (a message completes
// only when every byte did; a chunk overlapping another of its message is refused). Where a
// message's bytes go, and what its completion means, belongs to the owner (ReceiveOwner).
// Progress thread only. A frame this state refuses throws: the link it came on is dropped and
// the peer replays the chunk, so nothing it refused counts as received.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "net/transport/one_sided.h"
#include "net/transport/receive_queues.h"
#include "net/transport/tcp/peer.h"
#include "net/transport/tcp/wire.h"

namespace xccl::net::tcp {

// More than this stashed per peer means the peer does not follow the protocol: a sender runs
// at most a window ahead, and an overtaking chunk waits only for the few before it.
constexpr size_t kMaxStashedBytes = size_t{1} << 30;

// Disjoint byte ranges [begin, end) of one message that arrived or are arriving.
class ByteRanges {
 public:
  bool overlaps(uint64_t begin, uint64_t length) const;
  void add(uint64_t begin, uint64_t length);  // must not overlap
  uint64_t bytes() const { return bytes_; }

 private:
  std::map<uint64_t, uint64_t> ranges_;  // begin -> end, adjacent ones merged
  uint64_t bytes_ = 0;
};

// A message from the peer whose chunks are arriving.
struct Incoming {
  RequestPtr request;
  uint8_t* data = nullptr;  // where chunks go; null: discarded (kWrite: looked up per chunk)
  UnexpectedPtr unexpected;
  MessageTag tag;  // kWrite: seq is the signal; kWriteAck: seq is the write's message id
  uint64_t total = 0;
  ByteRanges arrived;  // complete once it covers `total` bytes (never with a hole)
  bool done = false;
  FrameType type = FrameType::kData;
  uint64_t id = 0;               // the sender's message id
  uint64_t key = 0, target = 0;  // kWrite: the registration and where the write starts in it
  std::string refusal;           // kWrite: why it is refused (its chunks are then discarded)
  std::vector<uint8_t> answer;   // kWriteAck: the refusal, empty for success
};

// A chunk of a message whose predecessors are not known yet: matched after them (FIFO).
struct Stashed {
  FrameHeader header;
  std::vector<uint8_t> bytes;
};

// What the receive state asks of its owner (the transport, or a test's fake).
class ReceiveOwner {
 public:
  virtual ~ReceiveOwner() = default;
  // Message `message.id` is known now, in message order: say where it lands (request, data,
  // unexpected, refusal). Leaving `data` null discards its bytes.
  virtual void open(Incoming& message) = 0;
  // Where chunk `header` of write `message` goes, read in place on `link`; null: discarded.
  virtual uint8_t* landWrite(int link, Incoming& message, const FrameHeader& header) = 0;
  virtual void landStashedWrite(Incoming& message, const Stashed& chunk) = 0;
  // Every byte of `message` arrived.
  virtual void complete(Incoming& message) = 0;
  // `link` is reading a chunk that came again on another link: it is stale, take it down
  // (its slot is cleared after this returns).
  virtual void dropLink(int link) = 0;
};

class ReceiveState {
 public:
  // Per link: where the chunk being read goes (set by the header, used when it is complete).
  struct Slot {
    bool duplicate = false;
    bool stashing = false;
    bool reading = false;  // a message chunk is being read: `header`
    FrameHeader header;
    Stashed pending;  // when stashing
    std::vector<uint8_t> control;
    uint64_t landing = 0;  // owner's: the registration this chunk is being read into
  };

  ReceiveState();
  // A validated message frame's header on `link`: where its payload goes (null: discarded).
  uint8_t* chunkHeader(int link, const FrameHeader& header, ReceiveOwner& owner);
  // Its payload is in place.
  void chunkArrived(int link, const FrameHeader& header, ReceiveOwner& owner);
  // The peer acknowledged every chunk below `ack` of the `sent` this side sent: whether that is
  // news (throws when it acknowledges chunks never sent).
  bool acknowledged(uint64_t ack, uint64_t sent);
  // The peer failed: every message, stashed chunk and slot goes.
  void clear();

  uint64_t received() const { return received_; }  // cumulative acknowledgement to send
  size_t stashedBytes() const { return stashedBytes_; }
  uint64_t lastAck() const { return lastAck_; }

  std::deque<Incoming> incoming;  // messages from `base` on, in message order
  uint64_t base = 0, nextKnown = 0;
  std::vector<Stashed> stash;
  std::vector<uint64_t> seen;  // bitmap over [received, received + kWindow), by seq % kWindow
  bool ackDue = false;         // a message completed whose sender waits for the acknowledgement
  std::vector<Slot> slots;     // by link

 private:
  Incoming& knownMessage(const FrameHeader& header, ReceiveOwner& owner);
  // Refuses a chunk whose bytes overlap ones that arrived or are arriving on another link.
  void claim(const Incoming& message, const FrameHeader& header, int link) const;
  void addChunk(Incoming& message, const FrameHeader& header, ReceiveOwner& owner);
  void drainStash(ReceiveOwner& owner);

  size_t stashedBytes_ = 0;  // bytes in `stash` (slots still reading one are bounded by links)
  uint64_t received_ = 0;
  uint64_t lastAck_ = 0;
};

// Where data message `message` from `peer` lands: the posted receive it matches, else kept as
// unexpected within `limit` bytes per peer (named `limitName` in the error). Past it, *failure
// says why the peer must fail and the message's bytes are discarded. Returns whether a posted
// receive was taken or failed (its waiters must be woken). The queues' mutex held.
bool openReceiveLocked(ReceiveQueues& receives, int peer, Incoming& message, uint64_t limit,
                       const char* limitName, std::optional<Error>* failure);

// Write admission (memory.cc), socket-free: why a write of `message` from `peer` into this
// rank's `regions` is refused, empty when it fits. It is checked whole at its first chunk, so
// a write that does not fit writes nothing.
std::string refuseWrite(const RegionTable& regions, const Incoming& message, int self, int peer);
// Where a chunk of an admitted write goes, or null (discarded, and `message.refusal` set) when
// its registration went since.
uint8_t* writeLanding(const RegionTable& regions, Incoming& message, const FrameHeader& header,
                      int self);

}  // namespace xccl::net::tcp
