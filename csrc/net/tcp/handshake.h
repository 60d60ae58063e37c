// The TCP handshake (wire.h HelloExchange) over a non-blocking socket, and a set of handshakes
// run together with poll(), so that no connection, however slow or idle, holds up another or the
// thread that runs them: a stranger who connects and sends nothing costs one descriptor until
// kHandshakeTimeout, nothing more (docs/network.md, "Who may connect").
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "net/tcp/socket.h"
#include "net/tcp/wire.h"

namespace xccl::net::tcp {

// How long an accepted connection may take to complete its handshake. A peer answers within a
// round trip or two (it sends its offer as soon as it connected); the bound is there to free the
// descriptors of idle strangers, and is generous so that a loaded host (a parallel compile, many
// ranks starting at once) never loses a real peer's connection to it.
constexpr std::chrono::milliseconds kHandshakeTimeout{10000};
// The most handshakes of accepted connections in flight at once; past it the oldest is dropped
// (a real peer's handshake lasts a round trip, a flood's idle connections the full timeout).
constexpr size_t kMaxHandshakes = 256;

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
  size_t received() const { return received_; }  // bytes that came from the other end
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
};

// Runs a dialling handshake to its end on the calling thread (group creation): done, or throws
// kPeerFailure naming `address` and why (kTimeout at `deadline`).
void finishDial(Handshake& handshake, const std::string& address);

// Handshakes in flight, accepted on `listeners` or added: poll() advances them all.
class Handshakes {
 public:
  explicit Handshakes(const HandshakeTerms& terms) : terms_(terms) {}
  void add(std::unique_ptr<Handshake> handshake) { running_.push_back(std::move(handshake)); }
  bool dialling(int peer, int link) const;
  // Waits up to `wait` for any listener or handshake; accepts every waiting connection and
  // advances every ready handshake. Returns the handshakes that ended (done or failed; those past
  // their deadline fail).
  std::vector<std::unique_ptr<Handshake>> poll(const std::vector<Socket>& listeners,
                                               std::chrono::milliseconds wait);

 private:
  void acceptAll(const Socket& listener);

  const HandshakeTerms& terms_;
  std::vector<std::unique_ptr<Handshake>> running_;
};

}  // namespace xccl::net::tcp
