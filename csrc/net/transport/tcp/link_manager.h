// The TCP transport's link manager: building the mesh (the group's key and id, this rank's
// interfaces and listeners, every rank's published interfaces, each peer's links, and the first
// connection of every link: higher ranks dial lower ranks, one handshake each, handshake.h), and
// then its own thread, which accepts connections and redials failed links in the background and
// hands each connection made to the progress thread (Handover). Its state is its own: the
// handshake terms and logs, the interfaces, listeners and published addresses (fixed once the
// mesh is built) and the thread. It reads the peers' links (a link's `from`, `to` and test
// hooks never change; the rest under Peer::sendMutex) and takes no other lock.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/rendezvous/store.h"
#include "net/transport/tcp/handshake.h"
#include "net/transport/tcp/interfaces.h"
#include "net/transport/tcp/options.h"
#include "net/transport/tcp/peer.h"
#include "net/transport/tcp/socket.h"

namespace xccl::net::tcp {

// A connection made by the link manager, for the progress thread to take into use.
struct Handover {
  int peer;
  int link;
  Socket socket;
  bool peerGone = false;  // the peer's listener refused: its process is gone
};

class LinkManager {
 public:
  // What the link manager asks of the transport it serves.
  class Owner {
   public:
    virtual ~Owner() = default;
    // While the mesh is built: `peer` has `links` links, none up yet.
    virtual void peerCreated(int peer, int links) = 0;
    // While the mesh is built, on the creating thread: link `index` to `peer` is connected.
    virtual void linkConnected(int peer, int index, Socket socket) = 0;
    // Later, on the manager thread: a connection (or a peer found gone) for the progress thread.
    virtual void handOver(Handover handover) = 0;
  };
  // `streams`: links per peer and interface pair. The thread stops once `stopping` is set.
  LinkManager(int rank, int size, int streams, std::chrono::milliseconds linkTimeout, Peers& peers,
              const std::atomic<bool>& stopping, Owner& owner)
      : rank_(rank),
        size_(size),
        links_(streams),
        linkTimeout_(linkTimeout),
        peers_(peers),
        stopping_(stopping),
        owner_(owner) {}
  LinkManager(const LinkManager&) = delete;
  LinkManager& operator=(const LinkManager&) = delete;

  // Builds the mesh through `store` (collective; bounded by options.timeout): every peer and
  // its links, each connected once. A group of one checks options.ifnames only.
  void build(Store& store, const TcpOptions& options);
  // The thread that accepts and redials, until `stopping`; join() after setting it.
  void start() {
    thread_ = std::thread([this] { managerLoop(); });
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

  int linksPerPeer() const { return links_; }  // per interface pair
  std::string listenAddress() const { return addresses_.empty() ? "" : addresses_[rank_]; }
  const HandshakeTerms& handshakeTerms() const { return terms_; }

 private:
  void createPeers(const std::vector<std::vector<Interface>>& interfaces,
                   const std::vector<bool>& named);
  void managerLoop();
  void handshakeEnded(std::unique_ptr<Handshake> handshake);
  void redial(Handshakes& handshakes, int peer, int index);

  const int rank_;
  const int size_;
  const int links_;  // per peer and interface pair
  const std::chrono::milliseconds linkTimeout_;
  Peers& peers_;
  const std::atomic<bool>& stopping_;
  Owner& owner_;
  std::vector<std::string> addresses_;  // every rank's first listening address
  HandshakeTerms terms_;  // what every handshake must prove
  HandshakeLogs handshakeLogs_;  // strangers' connections: rate-limited lines
  std::vector<Interface> interfaces_;  // this rank's, in the order it published them
  std::vector<Socket> listeners_;  // one per interface
  std::thread thread_;
};

}  // namespace xccl::net::tcp
