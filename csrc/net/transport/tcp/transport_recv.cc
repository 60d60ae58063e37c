// TcpTransport's answers to what a peer says outside its messages (progress thread): its
// goodbye, an abort, a status query or reply. The frames reach it from the receiving side
// (message_receiver.h, which turns chunks into receives).
#include "common/logging.h"
#include "net/transport/tcp/transport.h"

namespace xccl::net::tcp {

void TcpTransport::closedAfterBye(int peer, int index) {
  linkDown(peer, index, "the peer closed it on purpose", /*quiet=*/true);
  Peer& p = *peers_[peer];
  {
    std::lock_guard<std::mutex> guard(p.sendMutex);
    if (p.failed || p.upLinks() > 0) return;
  }
  failPeer(peer,
           Error(ErrorKind::kPeerFailure,
                 detail::concat("rank ", peer,
                                " closed its connections (the process exited, was killed, "
                                "or aborted)")),
           false);
}

void TcpTransport::onControl(int peer, const FrameHeader& header, const std::string& text) {
  // Acknowledgements were taken in onHeader; control frames are every engine's protocol.
  if (header.type != FrameType::kControl) return;
  TransportBase::onControl(peer, header.control.kind, header.control.round, text);
}

}  // namespace xccl::net::tcp
