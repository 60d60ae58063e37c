// RAII socket and the blocking-with-deadline helpers used while the mesh is built. After that,
// sockets are non-blocking and owned by the progress thread.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "net/transport/address.h"
#include "net/transport/transport.h"

namespace xccl::net::tcp {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void close();

  void setNonBlocking();
  void setNoDelay();
  // Blocking-style I/O on a non-blocking socket, bounded by `deadline` (poll, never spin).
  void sendAll(const void* data, size_t bytes, Deadline deadline);
  void recvAll(void* data, size_t bytes, Deadline deadline);

 private:
  int fd_ = -1;
};

using Address = net::Address;

// Data-path options of a connected socket: TCP_NODELAY, and socket buffers of 4 MiB where the
// kernel allows that much (a smaller explicit size would switch off its autotuning).
void tuneSocket(Socket& socket);
// Listening socket on `host` (an interface address) with a kernel-chosen port. Its queue holds
// 4096 connections (or net.core.somaxconn if lower), so that a burst of strangers' connections
// does not fill it and make the kernel drop a real peer's connection attempt.
Socket listenOn(const Address& host, Address* bound);
// Connects, retrying refused connections until `deadline` (the peer may still be starting);
// from `from`'s address (any port) when given, so the link leaves through that interface.
Socket connectTo(const Address& peer, Deadline deadline, const Address* from = nullptr);
// Starts a non-blocking connection (from `from`'s address when given): the socket, connected or
// connecting, or invalid with `*error` the errno of what failed (`*bindFailed`: binding to `from`;
// ECONNREFUSED: nothing listens there).
Socket startConnect(const Address& peer, const Address* from, int* error, bool* bindFailed);
// Binds `fd` to `from`'s address with a kernel-chosen port; false (errno set) if it cannot.
bool bindSource(int fd, const Address& from);
// Accepts one connection, waiting at most until `deadline`.
Socket acceptOne(const Socket& listener, Deadline deadline);
// Accepts one connection on whichever of `listeners` has one first, waiting until `deadline`.
Socket acceptAny(const std::vector<Socket>& listeners, Deadline deadline);

// The interfaces TCP listens and links on, decided here only: `netIfnames` (XCCL_NET_IFNAMES,
// NetOptions::ifnames) when given, else socketIfname() alone, else none named (empty: the
// listen address and every other usable interface, interfaces.h). socketIfname, Address and
// chooseListenAddress: net/transport/address.h.
std::vector<std::string> linkIfnames(const std::vector<std::string>& netIfnames);

}  // namespace xccl::net::tcp
