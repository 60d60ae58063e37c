#include "net/transport/tcp/chunk_sender.h"

#include <algorithm>
#include <cstring>

namespace xccl::net::tcp {

void ChunkSender::enqueueLocked(Peer& p, const RequestPtr& request, FrameHeader header,
                                const void* data, size_t bytes, std::vector<RequestPtr>* completed,
                                bool flush) {
  {
    header.message = p.nextMessage++;
    header.total = bytes;
    const auto* base = static_cast<const uint8_t*>(data);
    int slab = -1;
    if (bytes <= kInlineBytes) {
      // Small: copied, so the send completes once written and the copy serves a replay.
      if (p.freeSlabs.empty()) {
        p.slabs.push_back(std::make_unique<uint8_t[]>(kInlineBytes));
        p.freeSlabs.push_back(static_cast<int>(p.slabs.size()) - 1);
      }
      slab = p.freeSlabs.back();
      p.freeSlabs.pop_back();
      if (bytes > 0) std::memcpy(p.slabs[slab].get(), data, bytes);
      base = p.slabs[slab].get();
    }
    size_t offset = 0;
    do {
      header.offset = offset;
      header.length = static_cast<uint32_t>(std::min(kChunkBytes, bytes - offset));
      header.seq = p.nextSeq++;
      Chunk chunk;
      chunk.header = header;
      chunk.payload = base + offset;
      chunk.slab = slab;
      p.retained.push_back(std::move(chunk));
      const int link = pickLink(p);
      if (link >= 0) assignChunk(p, header.seq, link);
      offset += header.length;
    } while (offset < bytes);
    if (slab >= 0) {
      p.retained.back().onWritten = request;
    } else {
      p.sent.push_back({request, p.nextSeq});  // complete once acknowledged
    }
    if (flush) flushPeer(p, completed);  // the cheap path: as much as the sockets take now
  }
}

void ChunkSender::flushPeer(Peer& peer, std::vector<RequestPtr>* completed) {
  for (auto& link : peer.links) flushLink(peer, *link, epollFd_, completed);
  releaseAcked(peer, completed);
}

void ChunkSender::acknowledgedLocked(Peer& p, uint64_t ack, std::vector<RequestPtr>* completed) {
  p.acked = std::max(p.acked, ack);
  flushPeer(p, completed);  // the window moved, and acknowledged sends complete
}

std::vector<RequestPtr> ChunkSender::takeSendsLocked(Peer& p) {
  std::vector<RequestPtr> sends;
  for (auto& chunk : p.retained) {
    if (chunk.onWritten) sends.push_back(std::move(chunk.onWritten));
  }
  for (auto& message : p.sent) sends.push_back(std::move(message.request));
  p.retainedBase += p.retained.size();
  p.retained.clear();
  p.sent.clear();
  return sends;
}

void ChunkSender::failSendsLocked(Peer& peer, const Error& error) {
  for (auto& chunk : peer.retained) {
    if (chunk.onWritten) chunk.onWritten->failLocked(error);
  }
  for (auto& message : peer.sent) message.request->failLocked(error);
  peer.sent.clear();
}

}  // namespace xccl::net::tcp
