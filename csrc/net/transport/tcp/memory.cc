// The TCP transport's one-sided writes (memory.h): registration, the writer's side (a kWrite
// message, completed by the target's kWriteAck) and the target's (chunks into registered memory,
// signals).
#include "net/transport/tcp/memory.h"

#include <cstring>

#include "common/logging.h"

namespace xccl::net::tcp {

TcpRegistration::~TcpRegistration() { owner_.deregister(remote_.key); }

void OneSidedWrites::deregister(uint64_t key) {
  std::unique_lock<std::mutex> lock(mutex_);
  regions_.removeLocked(key);
  // A chunk being read into the range now was pinned before the key went: wait for it (one chunk
  // per link at most; an abandoned one is unpinned when its link goes down).
  completed_.wait(lock, [&] { return landing_.count(key) == 0; });
}

std::unique_ptr<Registration> OneSidedWrites::registerMemory(void* data, size_t bytes) {
  XCCL_CHECK_ARG(data != nullptr || bytes == 0, "registerMemory: null memory of ", bytes, " bytes");
  std::lock_guard<std::mutex> guard(mutex_);
  return std::make_unique<TcpRegistration>(*this, regions_.addLocked(data, bytes));
}

RequestPtr OneSidedWrites::iwrite(int peer, const void* data, size_t bytes, const RemoteRegion& dst,
                                  uint64_t dstOffset, uint64_t signal, Completion onDone) {
  XCCL_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank_, "cannot write to rank ", peer,
                 " from rank ", rank_, " of ", size_);
  const MessageTag tag{TagSpace::kPointToPoint, 0, signal, 0};
  auto request = std::make_shared<Request>(peer, tag, bytes, /*isSend=*/true, std::move(onDone));
  std::unique_lock<std::mutex> lock(mutex_);
  if (dstOffset > dst.bytes || bytes > dst.bytes - dstOffset) {
    return failedRequest(request, Error(ErrorKind::kInvalidArgument,
                                        detail::concat("a one-sided write of ", bytes,
                                                       " bytes at offset ", dstOffset,
                                                       " does not fit rank ", peer, "'s region of ",
                                                       dst.bytes, " bytes; nothing was written")));
  }
  if (const Error* refusal = health_.refusalLocked(peer, tag.space)) {
    return failedRequest(request, *refusal);
  }
  Peer& p = *peers_[peer];
  std::vector<RequestPtr> completed;
  {
    std::lock_guard<std::mutex> guard(p.sendMutex);  // lock order: mutex_, then sendMutex
    if (p.failed) {
      return failedRequest(request, Error(ErrorKind::kPeerFailure,
                                          detail::concat("rank ", peer, " has failed")));
    }
    const uint64_t id = p.nextMessage;  // enqueueLocked gives the message this id
    writes_[{peer, id}].request = request;
    // The chunks' own completion (acknowledged, or copied when small), with mutex_ held like
    // every completion.
    auto chunks = std::make_shared<Request>(peer, tag, bytes, /*isSend=*/true,
                                            [this, peer, id](const Request& done) {
                                              chunksDoneLocked(peer, id, done);
                                            });
    FrameHeader header;
    header.type = FrameType::kWrite;
    header.tag = WireTag::encode(tag);
    header.key = dst.key;
    header.target = dstOffset;
    sender_.enqueueLocked(p, chunks, header, data, bytes, &completed, /*flush=*/false);
    // The answer finds its entry now; the sockets are written without mutex_, which the
    // progress thread needs for every chunk it reads.
    lock.unlock();
    sender_.flushPeer(p, &completed);
  }
  owner_.complete(completed);
  return request;
}

// Target, progress thread: the first chunk of a write is known. It is checked whole, so a write
// that does not fit writes nothing; its chunks are then read and dropped.
void OneSidedWrites::admitWrite(int peer, Incoming& message) {
  std::lock_guard<std::mutex> guard(mutex_);
  message.refusal = refuseWrite(regions_, message, rank_, peer);
}

uint8_t* OneSidedWrites::pinChunk(ReceiveState::Slot& slot, Incoming& message,
                                  const FrameHeader& header) {
  std::lock_guard<std::mutex> guard(mutex_);
  uint8_t* at = writeLanding(regions_, message, header, rank_);
  // Pinned until the payload is in place (onFrame) or abandoned (linkDown, failPeer): the
  // registration cannot go while the socket writes into it.
  if (at != nullptr && header.length > 0) {
    slot.landing = message.key;
    ++landing_[message.key];
  }
  return at;
}

void OneSidedWrites::landStashed(Incoming& message, const Stashed& chunk) {
  std::lock_guard<std::mutex> guard(mutex_);
  uint8_t* at = writeLanding(regions_, message, chunk.header, rank_);
  if (at != nullptr && !chunk.bytes.empty())
    std::memcpy(at, chunk.bytes.data(), chunk.bytes.size());
}

void OneSidedWrites::unpin(ReceiveState::Slot& slot) {
  if (slot.landing == 0) return;
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = landing_.find(slot.landing);
  if (it != landing_.end() && --it->second == 0) landing_.erase(it);
  slot.landing = 0;
  completed_.notify_all();
}

// Target, progress thread: every chunk of the write was read. Its bytes are in place, so its
// signal completes the oldest wait for it (or is counted); then the writer gets the answer.
void OneSidedWrites::writeLanded(int peer, const Incoming& message) {
  if (message.refusal.empty()) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (signals_.arrivedLocked(peer, message.tag.seq)) completed_.notify_all();
  } else {
    XCCL_WARN("tcp", message.refusal);
  }
  FrameHeader header;
  header.type = FrameType::kWriteAck;
  header.tag = WireTag::encode({TagSpace::kPointToPoint, 0, message.id, 0});
  // Short (a message of ours), so it is copied and sent like any small message: replayed if a
  // link fails, never lost while the peer lives.
  const std::string answer = message.refusal.substr(0, kInlineBytes);
  Peer& p = *peers_[peer];
  std::vector<RequestPtr> completed;
  {
    std::lock_guard<std::mutex> guard(p.sendMutex);
    if (p.failed) return;
    sender_.enqueueLocked(p, nullptr, header, answer.data(), answer.size(), &completed);
  }
  owner_.complete(completed);
}

// Writer, progress thread: the target's answer to write `answer.tag.seq`.
void OneSidedWrites::writeAnswered(int peer, const Incoming& answer) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = writes_.find({peer, answer.tag.seq});
  if (it == writes_.end()) return;  // failed meanwhile
  it->second.answered = true;
  it->second.refusal.assign(answer.answer.begin(), answer.answer.end());
  finishWriteLocked(peer, answer.tag.seq);
}

// Writer: the write's chunks are done with (the caller's bytes are no longer needed), or failed.
void OneSidedWrites::chunksDoneLocked(int peer, uint64_t id, const Request& chunks) {
  auto it = writes_.find({peer, id});
  if (it == writes_.end()) return;
  if (chunks.state() == Request::State::kFailed) {
    try {
      chunks.rethrowIfFailed();
    } catch (const Error& e) {
      it->second.request->failLocked(e);
    }
    writes_.erase(it);
    return;
  }
  it->second.chunksDone = true;
  finishWriteLocked(peer, id);
}

void OneSidedWrites::finishWriteLocked(int peer, uint64_t id) {
  auto it = writes_.find({peer, id});
  if (it == writes_.end() || !it->second.chunksDone || !it->second.answered) return;
  PendingWrite& write = it->second;
  if (write.refusal.empty()) {
    write.request->completeLocked(peer);
  } else {
    write.request->failLocked(Error(ErrorKind::kInvalidArgument, write.refusal));
  }
  writes_.erase(it);
  completed_.notify_all();
}

// Fails the writes to `peer` (every peer when -1); its signal waits are failPeer's and
// failEverythingLocked's own step (TransportBase). mutex_ held.
void OneSidedWrites::failWritesLocked(int peer, const Error& error) {
  for (auto it = writes_.begin(); it != writes_.end();) {
    if (peer < 0 || it->first.first == peer) {
      it->second.request->failLocked(error);
      it = writes_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace xccl::net::tcp
