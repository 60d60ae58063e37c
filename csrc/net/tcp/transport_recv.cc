// TcpTransport's answers to what a peer says outside its messages (progress thread): its
// goodbye, an abort, a status query or reply. The frames reach it from the receiving side
// (message_receiver.h, which turns chunks into receives).
#include "common/logging.h"
#include "net/tcp/transport.h"

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
  switch (header.type) {
    case FrameType::kAbort:
      failPeer(peer,
               Error(ErrorKind::kPeerFailure,
                     detail::concat("rank ", peer, " aborted the communicator: ", text)),
               true);
      return;
    case FrameType::kStatusQuery:
      sendControl(peer, FrameType::kStatusReply, header.tagSeq, status_.answer());
      return;
    case FrameType::kStatusReply: status_.reply(peer, header.tagSeq, text); return;
    default: return;  // acknowledgements were taken in onHeader
  }
}

}  // namespace xccl::net::tcp
