// One peer's links (sockets) and the state that makes them interchangeable: the chunks sent but
// not yet acknowledged (retained for replay), the per-link write queues, and on the receiving side
// which sequence numbers arrived. Every member is guarded by Peer::sendMutex unless it says
// otherwise; the read side belongs to the progress thread.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/transport/tcp/socket.h"
#include "net/transport/tcp/wire.h"
#include "net/transport/transport.h"

namespace xccl::net::tcp {

// Messages up to this size are copied into a retained slab and their send completes once
// written; larger ones are sent from the caller's buffer and complete once acknowledged.
constexpr size_t kInlineBytes = 32 << 10;
// Large messages are cut into chunks of this size, spread over the peer's links.
constexpr size_t kChunkBytes = 512 << 10;
// How far sequence numbers may run ahead of the acknowledgement (the receiver's window).
constexpr uint64_t kWindow = 1 << 16;

struct Chunk {
  FrameHeader header;
  const uint8_t* payload = nullptr;
  int link = -1;     // the link carrying it now; -1 while the peer has no link up
  int writing = 0;   // links writing it right now: its bytes must stay valid
  int slab = -1;     // the copy it is sent from (small messages)
  RequestPtr onWritten;  // small messages complete once written
};

// A large message completes when every chunk below endSeq is acknowledged.
struct SentMessage {
  RequestPtr request;
  uint64_t endSeq;
};

struct ControlFrame {
  FrameHeader header;
  std::shared_ptr<const std::string> payload;
};

struct Link {
  int index = 0;
  Socket socket;
  bool up = false;
  bool broken = false;  // a write failed: shut down, the progress thread takes it down
  bool watchingWritable = false;
  std::string local, remote;  // addresses, for logs and errors
  // Which interface pair it runs over (fixed at creation): the local interface's name
  // ("xnet1"), the address it binds to when dialling, the peer's listener.
  std::string via;
  Address from, to;
  std::string lastError;      // why it last went down
  std::deque<uint64_t> queue;  // sequence numbers of chunks to write, in order
  std::deque<ControlFrame> control;
  // The frame being written: its header (with the ack of the moment) and payload.
  bool writing = false;
  FrameHeader current;
  const uint8_t* currentPayload = nullptr;
  std::shared_ptr<const std::string> currentControl;
  size_t written = 0;
  Clock::time_point lastSent{}, downSince{}, nextDial{};
  // Read side: progress thread only.
  FrameReader reader;
  Clock::time_point lastHeard{};
  uint64_t readingSeq = UINT64_MAX;  // a data chunk whose payload is being written in place
  // Counters for tests and logs (atomics: read from any thread).
  std::atomic<uint64_t> chunksSent{0}, chunksReceived{0}, failures{0}, recoveries{0};
  std::atomic<bool> blackholed{false};  // test hook: neither read nor written
  std::atomic<bool> heldDown{false};    // test hook: neither redialled nor accepted
};

class Peer {
 public:
  Peer(int rank, int links) : rank(rank) {
    for (int i = 0; i < links; ++i) {
      this->links.push_back(std::make_unique<Link>());
      this->links.back()->index = i;
    }
  }
  const int rank;
  std::mutex sendMutex;
  std::vector<std::unique_ptr<Link>> links;
  // Sending side.
  uint64_t nextMessage = 0, nextSeq = 0;
  uint64_t acked = 0;          // the peer's cumulative acknowledgement
  uint64_t retainedBase = 0;   // sequence number of retained.front()
  std::deque<Chunk> retained;  // every chunk from retainedBase to nextSeq
  std::deque<SentMessage> sent;
  std::vector<std::unique_ptr<uint8_t[]>> slabs;
  std::vector<int> freeSlabs;
  bool failed = false;  // the peer is gone: nothing more is written
  unsigned nextPick = 0;  // spreads ties between equally loaded links
  // Receiving side's acknowledgement, written by the progress thread, piggybacked by writers.
  std::atomic<uint64_t> received{0};
  uint64_t ackSent = 0;  // progress thread
  bool saidBye = false;  // progress thread: the peer is closing its links on purpose

  Chunk& chunk(uint64_t seq) { return retained[seq - retainedBase]; }
  int upLinks() const;
  std::string describeLinks() const;  // "link 0 (a -> b): state; ..."
};

// Every rank's Peer, index = rank; null for this rank. Filled once while the mesh is built
// (LinkManager), then only its elements change, each under its own sendMutex.
using Peers = std::vector<std::unique_ptr<Peer>>;

// Writes as much of `link`'s queue as the socket takes now. Small sends that finished go to
// `completed`. Returns false when the socket failed (then shut down and marked broken: the
// progress thread takes the link down). Peer::sendMutex held.
bool flushLink(Peer& peer, Link& link, int epollFd, std::vector<RequestPtr>* completed);
// Writes the rest of a half-written frame, blocking until `deadline` (the threads are stopped:
// before a last abort or goodbye frame, which must not land inside it). False if it could not.
bool finishFrame(Link& link, Deadline deadline);
// The link with the fewest queued chunks among those up, or -1.
int pickLink(const Peer& peer);
// Queues chunk `seq` on link `index` (which must be up).
void assignChunk(Peer& peer, uint64_t seq, int index);
// Drops retained chunks below the acknowledgement and completes large sends wholly acknowledged.
void releaseAcked(Peer& peer, std::vector<RequestPtr>* completed);
// Sets which events the progress thread's epoll reports for `link` (its id: peer, index).
void watchLink(Link& link, int epollFd, int peer, bool writable);

inline uint64_t linkKey(int peer, int index) {
  return (static_cast<uint64_t>(peer) << 16) | static_cast<uint64_t>(index);
}

}  // namespace xccl::net::tcp
