// TCP transport: every peer is reached over several links (sockets; XCCL_NET_STREAMS); large
// messages are cut into chunks spread over them and written by the receiver straight into the
// posted buffer. Every chunk has a per-peer sequence number and is retained by the sender until
// the receiver acknowledges it, so when a link fails (an error, or silence for
// XCCL_NET_LINK_TIMEOUT_MS) its chunks are replayed on the surviving links, duplicates are dropped
// and the application sees nothing; the link is redialled in the background and used again.
// Links run over every interface pair two ranks share (interfaces.h); one progress thread
// (epoll) reads and writes all of them, sends start on the caller's thread (docs/network.md).
// One-sided writes are messages of their own frame type on the same links (memory.h).
//
// TcpTransport is the face (net::Transport, through TransportBase) over named parts, each a
// class with its own state and one reason to change:
//   LinkManager (link_manager.h): building the mesh, then its thread that accepts connections
//     and redials failed links (handshakes, listeners, interfaces).
//   ProgressLoop (progress_loop.h): the progress thread: epoll, reading links, ticks (link and
//     peer timeouts, heartbeats, acknowledgements), links up and down, handovers.
//   ChunkSender (chunk_sender.h): cutting messages into chunks on a peer's links, flushing.
//   MessageReceiver (message_receiver.h): frames into the transport, chunks into receives.
//   OneSidedWrites (memory.h): one-sided writes, the target's and the writer's side.
// The parts reach each other one way (LinkManager -> the face; ProgressLoop -> MessageReceiver
// -> OneSidedWrites -> ChunkSender), and what they ask of the face through a narrow interface
// each (X::Owner), which the face implements by forwarding: TransportBase's completion and
// failure steps, the peer's control frames and goodbye. The face holds only what spans parts:
// the peers (peer.h; every part's, each under its own sendMutex), the threads' life (started
// once the mesh is built, stopped and joined once under lifecycleMutex_: the progress thread
// first, then the link manager's), the goodbye and the abort on every link, and the failure
// steps TransportBase asks of it, each a step per part.
// Locks: mutex_ (TransportBase) guards matching, health, completion, the receives and the
// one-sided writes; Peer::sendMutex a peer's links and sending side. Lock order: mutex_ before a
// Peer::sendMutex, never the other way (a sendMutex holder never takes mutex_).
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/transport/tcp/chunk_sender.h"
#include "net/transport/tcp/link_manager.h"
#include "net/transport/tcp/memory.h"
#include "net/transport/tcp/message_receiver.h"
#include "net/transport/tcp/options.h"
#include "net/transport/tcp/peer.h"
#include "net/transport/tcp/progress_loop.h"
#include "net/transport/transport_base.h"

namespace xccl::net::tcp {

class TcpTransport final : public TransportBase,
                           private LinkManager::Owner,
                           private ProgressLoop::Owner,
                           private MessageReceiver::Owner,
                           private OneSidedWrites::Owner {
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
  int linksPerPeer() const { return manager_.linksPerPeer(); }  // per interface pair
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
  void blackholeLink(int peer, int link) { progress_.blackholeLink(peer, link); }
  std::string listenAddress() const { return manager_.listenAddress(); }
  // Tests: what a handshake with this rank must prove (the key and group in the store).
  const HandshakeTerms& handshakeTerms() const { return manager_.handshakeTerms(); }

 private:
  // The parts' owners (the interfaces above), each a forward to TransportBase or a part.
  void complete(const std::vector<RequestPtr>& requests) override { completeAll(requests); }
  void losePeer(int peer, const Error& error) override { failPeer(peer, error, false); }
  void progressStopped(const Error& error) override { failAll(error); }
  void peerCreated(int peer, int links) override { receiver_.addPeer(peer, links); }
  void linkConnected(int peer, int index, Socket socket) override {
    progress_.linkUp(peer, index, std::move(socket), /*recovered=*/false);
  }
  void handOver(Handover handover) override { progress_.handOver(std::move(handover)); }
  void linkDown(int peer, int index, const std::string& why, bool quiet) override {
    progress_.linkDown(peer, index, why, quiet);
  }

  // transport_recv.cc: the peer's control frames (abort, status query and reply), and its
  // goodbye.
  void onControl(int peer, const FrameHeader& header, const std::string& text) override;
  // A link closed after the peer said goodbye: once none is left, the peer is gone.
  void closedAfterBye(int peer, int index) override;
  // transport_ops.cc: failure handling (each a step per part) and control frames.
  std::vector<RequestPtr> dropPeer(int peer) override;
  void failPeerLocked(const PeerLoss& loss, const Error& error) override;
  void failRequestsLocked(const Error& error) override;
  void sendControl(int peer, ControlKind kind, uint64_t round, const std::string& payload) override;
  // transport.cc: TcpOptions with the environment's defaults, once the arguments are checked.
  struct Settings {
    int streams;  // links per peer and interface pair
    std::chrono::milliseconds linkTimeout;
    std::chrono::milliseconds peerTimeout;  // the longest a peer may stay without any link
    uint64_t maxUnexpectedBytes;  // per peer, of messages that came before their receive
  };
  static Settings settingsFor(int rank, int size, const TcpOptions& options);
  // The threads' life.
  void stopThreads();
  static void lingerUntilClosed(std::vector<pollfd>& fds, Deadline deadline);

  // Declaration order is construction order: the peers and the settings first (the parts hold
  // them; the arguments are checked before anything is made), then the progress loop, whose
  // epoll set the sender arms; the loop holds the later parts by reference and uses them only
  // once running. Destruction runs the other way, after the destructor has joined the threads
  // and freed the peers; the loop closes its descriptors last.
  Peers peers_;
  const Settings settings_;
  std::atomic<bool> stopping_{false};  // both threads stop on it
  // Held by abort() and the destructor throughout: a backend may abort from one thread while
  // another destroys the transport, and the threads must be joined (and peers freed) once.
  std::mutex lifecycleMutex_;
  ProgressLoop progress_;
  const int epollFd_;  // progress_'s epoll set, which every writer arms (flushLink)
  ChunkSender sender_;
  OneSidedWrites writes_;
  MessageReceiver receiver_;
  LinkManager manager_;
};

}  // namespace xccl::net::tcp
