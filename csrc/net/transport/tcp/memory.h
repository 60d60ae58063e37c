// One-sided writes emulated over TCP (Transport::registerMemory / iwrite / iwaitWrite). A write is
// a message of kWrite chunks on the peer's links, streamed, acknowledged and replayed like a
// send's (wire.h); the target reads each chunk straight into the registered memory, then answers
// with a kWriteAck message, and the writer's request completes on that answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "net/transport/transport.h"

namespace xccl::net::tcp {

class TcpTransport;

// Writer's side of one write, by (peer, message id), until it both has its answer and its chunks
// are done with (acknowledged, or copied for small ones): the caller may reuse its buffer only
// then, and the answer may come before the acknowledgement that covers the chunks.
struct PendingWrite {
  RequestPtr request;
  bool chunksDone = false;
  bool answered = false;
  std::string refusal;  // the target's, when it refused the write
};

// Deregisters under the transport's mutex, and waits until no chunk is being read into the range
// (at most one chunk per link; a link that stalls mid-chunk is taken down, and the chunk
// abandoned, within XCCL_NET_LINK_TIMEOUT_MS): a write arriving afterwards is refused by key,
// never written.
class TcpRegistration final : public Registration {
 public:
  TcpRegistration(TcpTransport& owner, RemoteRegion remote) : owner_(owner), remote_(remote) {}
  ~TcpRegistration() override;
  RemoteRegion remote() const override { return remote_; }

 private:
  TcpTransport& owner_;
  const RemoteRegion remote_;
};

}  // namespace xccl::net::tcp
