// The TCP handshake (wire.h HelloExchange) over a non-blocking socket, and a set of handshakes
// run together with poll(), so that no connection, however slow or idle, holds up another or the
// thread that runs them: a stranger who connects and sends nothing costs one descriptor until
// kHandshakeTimeout, nothing more (docs/network.md, "Who may connect").
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/logging.h"
#include "net/transport/tcp/socket.h"
#include "net/transport/tcp/wire.h"

namespace xccl::net::tcp {

// How long an accepted connection may take to complete its handshake. A peer answers within a
// round trip or two (it sends its offer as soon as it connected); the bound is there to free the
// descriptors of idle strangers, and is generous so that a loaded host (a parallel compile, many
// ranks starting at once) never loses a real peer's connection to it.
constexpr std::chrono::milliseconds kHandshakeTimeout{10000};
// The most handshakes of accepted connections in flight at once in this process, all groups
// together; past it one is dropped, the one that made the least progress (Handshakes).
constexpr size_t kMaxHandshakes = 256;
// The most connections a listener accepts per poll round: a flood of connections cannot hold up
// the handshakes already running, and a real peer's connection behind it is reached in a few
// rounds.
constexpr size_t kAcceptsPerRound = 32;
// How long a listener is not polled after accept failed for want of descriptors (EMFILE,
// ENFILE) or kernel memory: the connection stays queued and the listener readable, so polling
// it on would spin.
constexpr std::chrono::milliseconds kAcceptPause{100};

class Handshake {
 public:
  enum class Status { kRunning, kDone, kFailed };
  // Dialling `link` to `peer` over `socket` (connected, or a non-blocking connect under way).
  Handshake(Socket socket, const HandshakeTerms& terms, int peer, int link, Deadline deadline);
  // An accepted connection.
  Handshake(Socket socket, const HandshakeTerms& terms, Deadline deadline);
  Handshake(const Handshake&) = delete;
  Handshake& operator=(const Handshake&) = delete;

  int fd() const { return socket_.fd(); }
  short events() const;  // what to poll for
  // Moves as far as the socket allows now; never blocks.
  Status advance();
  // Fails it (its deadline passed) unless it already ended.
  void expire();
  Status status() const { return status_; }
  bool dialing() const { return dialing_; }
  int peer() const { return exchange_.peer(); }
  int link() const { return exchange_.link(); }
  Deadline deadline() const { return deadline_; }
  const std::string& why() const { return why_; }
  bool refused() const { return refused_; }      // dialling: nothing listens there
  int connectError() const { return connectError_; }  // dialling: why connecting failed, or 0
  // Failed because the other end's hello was refused (another key, group, rank or link): no
  // retry can help, unlike a failed connection (refused, reset, closed, timed out).
  bool verdict() const { return verdict_; }
  size_t received() const { return received_; }  // bytes that came from the other end
  // Whether a whole hello came and passed (for an acceptor: the dialer's offer). A real dialer
  // sends its offer at once, strangers rarely can: such a handshake is evicted last.
  bool heardHello() const { return heardHello_; }
  const std::string& from() const { return from_; }  // the remote address, for logs
  Socket take() { return std::move(socket_); }

 private:
  Status fail(std::string why);

  Socket socket_;
  HelloExchange exchange_;
  bool dialing_;
  bool connecting_;
  Deadline deadline_;
  Status status_ = Status::kRunning;
  std::string why_, from_;
  Hello out_;
  size_t outSent_ = 0, outBytes_ = 0;
  uint8_t in_[sizeof(Hello)];
  size_t inGot_ = 0;
  size_t received_ = 0;
  bool refused_ = false;
  int connectError_ = 0;
  bool verdict_ = false;
  bool heardHello_ = false;

  // Of accepted handshakes, kept by Handshakes under its process-wide lock: the order they were
  // accepted in, and whether another group's Handshakes evicted it (its socket is shut down).
  friend class Handshakes;
  uint64_t order_ = 0;
  bool evicted_ = false;
};

// Runs a dialling handshake to its end on the calling thread: done, or throws kPeerFailure naming
// `address` and why (kTimeout at `deadline`).
void finishDial(Handshake& handshake, const std::string& address);

// The rate-limited log lines of one transport's handshakes (common/logging.h RateLimiter):
// strangers decide how often these happen. A few lines are let through at once, so that the
// first refusals of a misconfigured peer (which may differ: a wrong key, then a closed
// connection) are all seen.
struct HandshakeLogs {
  static constexpr uint64_t kBurst = 5;
  log::RateLimiter evicted{std::chrono::seconds(10), kBurst};
  log::RateLimiter refused{std::chrono::seconds(10), kBurst};
  log::RateLimiter noDescriptors{std::chrono::seconds(10), kBurst};
};

// Handshakes in flight, accepted on `listeners` or added: poll() advances them all. Accepted
// handshakes of every Handshakes in the process share kMaxHandshakes slots. A connection is
// advanced once as soon as it is accepted (a real dialer's offer is usually there already) before
// it takes a slot; when none is free, the one to drop is, over all of them and the newcomer: an
// idle one (nothing received), oldest first; else one with part of a hello, least received
// first; a handshake that received a whole hello last. Dialling handshakes take no slot.
class Handshakes {
 public:
  Handshakes(const HandshakeTerms& terms, HandshakeLogs& logs);
  ~Handshakes();
  Handshakes(const Handshakes&) = delete;
  Handshakes& operator=(const Handshakes&) = delete;

  void add(std::unique_ptr<Handshake> handshake);
  bool dialling(int peer, int link) const;
  // Waits up to `wait` for any listener or handshake; advances every ready handshake, then
  // accepts up to kAcceptsPerRound waiting connections per listener (none for kAcceptPause after
  // running out of descriptors). Returns the handshakes that ended (done or failed; those past
  // their deadline, and those another Handshakes evicted, fail).
  std::vector<std::unique_ptr<Handshake>> poll(const std::vector<Socket>& listeners,
                                               std::chrono::milliseconds wait);
  // Accepted handshakes in flight: of this set, and of the whole process (tests).
  size_t accepted() const;
  static size_t acceptedInProcess();

 private:
  struct Registry;
  static Registry& registry();
  // With the registry's lock held.
  void acceptSome(const Socket& listener, std::vector<std::unique_ptr<Handshake>>* ended);
  void admit(std::unique_ptr<Handshake> handshake);
  void release(const Handshake& handshake);  // it leaves running_: its slot is free

  const HandshakeTerms& terms_;
  HandshakeLogs& logs_;
  std::vector<std::unique_ptr<Handshake>> running_;  // changed only with the registry's lock
  size_t accepted_ = 0;                               // of running_, not evicted
  Clock::time_point acceptPausedUntil_{};
};

}  // namespace xccl::net::tcp
