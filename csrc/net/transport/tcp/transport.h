// TCP transport: every peer is reached over several links (sockets; XCCL_NET_STREAMS); large
// messages are cut into chunks spread over them and written by the receiver straight into the
// posted buffer. Every chunk has a per-peer sequence number and is retained by the sender until
// the receiver acknowledges it, so when a link fails (an error, or silence for
// XCCL_NET_LINK_TIMEOUT_MS) its chunks are replayed on the surviving links, duplicates are dropped
// and the application sees nothing; the link is redialled in the background and used again.
// Links run over every interface pair two ranks share (interfaces.h); one progress thread
// (epoll) reads and writes all of them, sends start on the caller's thread (docs/network.md).
// One-sided writes are messages of their own frame type on the same links (memory.h).
#pragma once

#include <poll.h>

#include <list>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "net/rendezvous/store.h"
#include "net/transport/one_sided.h"
#include "net/transport/peer_health.h"
#include "net/transport/receive_queues.h"
#include "net/transport/status_board.h"
#include "net/transport/tcp/handshake.h"
#include "net/transport/tcp/interfaces.h"
#include "net/transport/tcp/memory.h"
#include "net/transport/tcp/peer.h"
#include "net/transport/tcp/receive_state.h"
#include "net/transport/tcp/socket.h"
#include "net/transport/transport_base.h"

namespace xccl::net::tcp {

struct TcpOptions {
  // Where to listen: `listenAddress` when set (a caller that needs the choice itself, e.g. to
  // pin the progress thread near that NIC, makes it once), else chooseListenAddress(storeHost).
  std::optional<Address> listenAddress;
  std::string storeHost;  // hint for choosing the interface; may be empty
  // Bound for building the mesh, and for how long a peer may stay without any link.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  std::string storePrefix = "tcp";  // keys written under this prefix (unique per group)
  // CPUs for the progress thread, normally those near the NIC or GPU the rank uses
  // (topo::progressCpusFor); empty: the thread is not pinned. XCCL_PIN_PROGRESS=0 ignores it.
  std::vector<int> progressCpus;
  int streams = 0;  // links per peer and interface pair; 0: XCCL_NET_STREAMS
  // NetOptions::ifnames: every name must be an interface with an IPv4 address (else
  // kInvalidArgument at creation). Without `listenAddress`, the rank listens on each one's
  // address and links run over every pair of them it shares with a peer; empty: the listen
  // address and every other up interface a peer shares a subnet with (interfaces.h).
  std::vector<std::string> ifnames;
  // Tests: these local addresses stand for interfaces (named, like `ifnames`; first choice).
  std::vector<Address> localAddresses;
  std::chrono::milliseconds linkTimeout{0};  // 0: XCCL_NET_LINK_TIMEOUT_MS
  uint64_t maxUnexpectedBytes = 0;            // 0: XCCL_NET_MAX_UNEXPECTED_BYTES
};

class TcpTransport final : public TransportBase {
 public:
  TcpTransport(Store& store, int rank, int size, const TcpOptions& options);
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  const char* name() const override { return "tcp"; }
  RequestPtr isend(int peer, MessageTag tag, const void* data, size_t bytes,
                   Completion onDone = nullptr) override;
  RequestPtr irecv(int peer, MessageTag tag, void* data, size_t bytes,
                   Completion onDone = nullptr) override;
  void wait(const std::vector<RequestPtr>& requests, Deadline deadline,
            const std::string& what) override;
  void abort(const std::string& reason) override;
  std::vector<std::string> queryStatus(Deadline deadline) override;
  std::unique_ptr<Registration> registerMemory(void* data, size_t bytes) override;
  RequestPtr iwrite(int peer, const void* data, size_t bytes, const RemoteRegion& dst,
                    uint64_t dstOffset, uint64_t signal, Completion onDone = nullptr) override;

  // Links, for tests and diagnosis.
  int linksPerPeer() const { return links_; }  // per interface pair
  int linkCount(int peer) const { return static_cast<int>(peers_.at(peer)->links.size()); }
  // "xnet1 10.231.1.2:0": the local interface and address a link runs over.
  std::string linkInterface(int peer, int link) const {
    const Link& l = *peers_.at(peer)->links.at(link);
    return l.via + " " + l.from.toString();
  }
  struct LinkCounters {
    bool up;
    uint64_t chunksSent, chunksReceived, failures, recoveries;
  };
  LinkCounters linkCounters(int peer, int link);
  // Test hooks: shut one link's socket down (as a pulled cable with an error; with `stayDown`
  // it is neither redialled nor accepted again from this side), or stop reading and writing it
  // (a silent blackhole) until it is taken down for that and redialled.
  void killLink(int peer, int link, bool stayDown = false);
  void blackholeLink(int peer, int link);
  std::string listenAddress() const { return addresses_.empty() ? "" : addresses_[rank_]; }
  // Tests: what a handshake with this rank must prove (the key and group in the store).
  const HandshakeTerms& handshakeTerms() const { return terms_; }

 private:
  friend class TcpRegistration;
  // Progress thread's receive state for one peer (receive_state.h).
  using Receiving = ReceiveState;
  class Receiver;  // transport_recv.cc: the ReceiveOwner of one peer's state
  // A connection made by the link manager, for the progress thread to take into use.
  struct Handover {
    int peer;
    int link;
    Socket socket;
    bool peerGone = false;  // the peer's listener refused: its process is gone
  };
  class LinkSink;

  // transport.cc: the mesh and the progress thread.
  void buildMesh(Store& store, const TcpOptions& options);
  void progressLoop();
  // Reads what is there now, up to a bound (true: stopped at the bound, more may be there).
  bool readLink(int peer, Link& link);
  void takeBrokenDown(int peer, Link& link);
  void tick(Clock::time_point now);
  void takeHandovers();
  void linkUp(int peer, int index, Socket socket, bool recovered);
  void linkDown(int peer, int index, const std::string& why, bool quiet = false);
  void flushPeer(Peer& peer, std::vector<RequestPtr>* completed);
  void sendAcks();
  // links.cc: the link manager thread (accepts and redials) and the handshake.
  void managerLoop();
  void handshakeEnded(std::unique_ptr<Handshake> handshake);
  void createPeers(const std::vector<std::vector<Interface>>& interfaces,
                   const std::vector<bool>& named);
  void redial(Handshakes& handshakes, int peer, int index);
  void handOver(Handover handover);
  // transport_recv.cc: chunks into receives.
  uint8_t* onHeader(int peer, Link& link, const FrameHeader& header);
  void onFrame(int peer, Link& link, const FrameHeader& header);
  void onControl(int peer, const FrameHeader& header, const std::string& text);
  // A link closed after the peer said goodbye: once none is left, the peer is gone.
  void closedAfterBye(int peer, int index);
  void openMessage(int peer, Incoming& message, std::optional<Error>* failure);
  void messageArrived(int peer, Incoming& message);
  // memory.cc: the target's and the writer's side of one-sided writes.
  void admitWrite(int peer, Incoming& message);
  uint8_t* pinChunk(Receiving::Slot& slot, Incoming& message, const FrameHeader& header);
  void landStashed(Incoming& message, const Stashed& chunk);
  void unpin(Receiving::Slot& slot);
  void writeLanded(int peer, const Incoming& message);
  void writeAnswered(int peer, const Incoming& answer);
  void chunksDoneLocked(int peer, uint64_t id, const Request& chunks);
  void finishWriteLocked(int peer, uint64_t id);
  void failWritesLocked(int peer, const Error& error);
  void deregister(uint64_t key);
  // transport_ops.cc: cutting a send into chunks on the peer's links, and failure handling.
  // `header` holds what every chunk of the message carries (type, tag or write fields).
  void enqueueLocked(Peer& p, const RequestPtr& request, FrameHeader header, const void* data,
                     size_t bytes, std::vector<RequestPtr>* completed, bool flush = true);
  std::vector<RequestPtr> dropPeer(int peer) override;
  void failPeerLocked(const PeerLoss& loss, const Error& error) override;
  void failRequestsLocked(const Error& error) override;
  void sendControl(int peer, FrameType type, uint64_t seq, const std::string& payload);
  void stopThreads();
  static void lingerUntilClosed(std::vector<pollfd>& fds, Deadline deadline);

  int links_ = 1;
  std::chrono::milliseconds linkTimeout_{1000};
  std::chrono::milliseconds peerTimeout_{std::chrono::minutes(5)};
  uint64_t maxUnexpectedBytes_ = 0;  // per peer, of messages that came before their receive
  std::vector<std::unique_ptr<Peer>> peers_;  // index = peer; null for self
  std::vector<Receiving> receiving_;          // index = peer
  std::vector<std::string> addresses_;        // every rank's first listening address
  HandshakeTerms terms_;                      // what every handshake must prove
  HandshakeLogs handshakeLogs_;               // strangers' connections: rate-limited lines
  int maxLinks_ = 1;                          // the most links any peer has
  std::vector<Interface> interfaces_;         // this rank's, in the order it published them
  std::vector<Socket> listeners_;             // one per interface
  int epollFd_ = -1;
  int wakeFd_ = -1;  // eventfd: stop, handovers or test hooks
  std::atomic<bool> stopping_{false};
  // Held by abort() and the destructor throughout: a backend may abort from one thread while
  // another destroys the transport, and the threads must be joined (and peers freed) once.
  std::mutex lifecycleMutex_;
  std::thread progressThread_;
  std::thread managerThread_;
  std::mutex handoverMutex_;
  std::vector<Handover> handovers_;

  // Guarded by mutex_ (TransportBase). Lock order: mutex_ before a Peer::sendMutex, never the
  // other way.
  ReceiveQueues receives_;
  // One-sided (memory.cc): registrations by key; how many chunks are being read into each right
  // now (a deregistration waits for none); writes awaiting their answer by (peer, message id).
  RegionTable regions_;
  std::map<uint64_t, int> landing_;
  std::map<std::pair<int, uint64_t>, PendingWrite> writes_;
};

}  // namespace xccl::net::tcp
