#include "net/transport/ofi/transport.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <cstring>

#include "common/env.h"
#include "common/logging.h"
#include "common/thread_affinity.h"
#include "common/wait_slice.h"
#include "net/rendezvous/bootstrap.h"
#include "net/transport/ofi/cache.h"
#include "net/transport/ofi/fabric.h"
#include "net/transport/ofi/memory.h"
#include "net/transport/ofi/op.h"
#include "net/transport/ofi/wire.h"

namespace xccl::net::ofi {
namespace {

constexpr int kHeaderSlots = 32;
// Receives for key exchange messages (two from each peer), reposted after each; a stranger's
// message takes a slot only until it is dropped.
constexpr int kMaxAuthSlots = 64;
constexpr size_t kAuthSlotBytes = 256;  // more than a message: a longer one is refused, not cut
// fi_cq_sread's bound: completions and fi_cq_signal wake it at once; the bound only limits how
// long a post the provider deferred (EAGAIN) waits for its retry.
constexpr int kIdleWaitMs = 1000, kDeferredWaitMs = 1;

}  // namespace

bool available(std::string* why, bool rdmaOnly, bool* keyRefused) {
  return providerAvailable(env::getString("XCCL_OFI_PROVIDER"), why, rdmaOnly, keyRefused);
}

std::string describeChoice(const std::string& storeHost) {
  try {
    NetOptions options;
    options.storeHost = storeHost;
    Choice choice = chooseProvider(env::getString("XCCL_OFI_PROVIDER"), options);
    const char* domain = choice.info->domain_attr->name;
    return detail::concat(choice.info->fabric_attr->prov_name, " on ", domain ? domain : "?");
  } catch (const Error& e) {
    return e.what();
  }
}

std::unique_ptr<Transport> createTransport(Store& store, int rank, int size,
                                           const NetOptions& options) {
  return std::make_unique<OfiTransport>(store, rank, size, options,
                                        env::getString("XCCL_OFI_PROVIDER"), keyFromFile());
}

OfiTransport::OfiTransport(Store& store, int rank, int size, const NetOptions& options,
                           const std::string& provider, std::optional<NetKey> key)
    : TransportBase(rank, size),
      key_(std::move(key)),
      peerAddr_(size),
      proven_(size, 0),
      trace_(env::getBool("XCCL_OFI_TRACE")),
      sendStream_(size),
      streams_(size) {
  XCCL_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "bad rank ", rank, " of ", size);
  XCCL_CHECK_ARG(size < (1 << 23), "the ofi transport takes at most 2^23 ranks, not ", size);
  {
    Choice choice = chooseProvider(provider, options);
    fabric_ = std::make_unique<Fabric>(choice.info);
  }
  const fi_info* info = fabric_->info();
  if (std::string refused = sourceRefusal(info, key_.has_value()); !refused.empty()) {
    XCCL_THROW(ErrorKind::kInvalidArgument, refused);
  }
  sourced_ = (info->caps & FI_SOURCE) != 0;
  localMr_ = (info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  virtAddr_ = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  directed_ = (info->caps & FI_DIRECTED_RECV) != 0;
  injectBytes_ = info->tx_attr->inject_size;
  codec_ = std::make_unique<SignalCodec>(info->domain_attr->cq_data_size);
  cache_ = std::make_unique<RegistrationCache>(
      static_cast<uint64_t>(env::getInt("XCCL_OFI_MR_CACHE_BYTES")),
      [this](const void* data, size_t bytes) -> std::shared_ptr<void> {
        return std::make_shared<MemoryRegion>(*fabric_, data, bytes, FI_SEND | FI_RECV | FI_WRITE);
      });
  XCCL_INFO("ofi", "provider ", fabric_->providerName(), " on ",
            info->domain_attr->name ? info->domain_attr->name : "?", " (mr_mode 0x", std::hex,
            info->domain_attr->mr_mode, std::dec, ", directed receives ",
            directed_ ? "on" : "off: payloads match on their tag alone", ", sources ",
            sourced_ ? "checked" : "unknown: a header's claimed sender is trusted", ", ",
            key_ ? "peers prove XCCL_NET_KEY_FILE's key" : "no key file", ")");
  // Header slots are posted before any peer learns our address, so no header arrives unposted.
  for (int i = 0; i < kHeaderSlots; ++i) {
    Op* op = Op::slot(Op::Type::kHeaderRecv, kHeaderSlotBytes, kHeaderTag);
    headerSlots_.push_back(op);
    {
      std::lock_guard<std::mutex> guard(opsMutex_);
      live_.insert(op);
    }
    if (localMr_) op->desc = localDesc(op, op->data, op->bytes);
    check(postNow(op), "posting a header receive");
  }
  const Deadline deadline = Clock::now() + options.timeout;
  try {
    exchangeAddresses(store, options, deadline);
  } catch (...) {
    fabric_->closeEndpoint();
    for (Op* op : live_) delete op;
    live_.clear();
    throw;
  }
  startProgress(options);
  if (key_) {
    try {
      authenticate(store, options, deadline);
    } catch (...) {
      stopProgress();
      drainForClose();
      fabric_->closeEndpoint();
      for (Op* op : live_) delete op;
      live_.clear();
      throw;
    }
  }
}

void OfiTransport::startProgress(const NetOptions& options) {
  progressThread_ = std::thread([this, cpus = options.progressCpus] {
    affinity::pinProgressThread(cpus, "ofi");  // never throws; unpinned when it cannot pin
    wait_slice::keepShort();
    onProgressThread();
    if (trace_.on()) trace_.progressStarted();
    progressLoop();
    if (trace_.on()) trace_.progressStopped();
  });
}

void OfiTransport::stopProgress() {
  stop_.store(true);
  if (progressThread_.joinable()) {
    fi_cq_signal(fabric_->cq());
    progressThread_.join();
  }
}

OfiTransport::~OfiTransport() {
  stopProgress();
  if (trace_.on()) log::write(log::Level::kWarn, "ofi", trace_.summary());
  drainForClose();
  // With the endpoint closed no completion can name an op any more: they can all go.
  fabric_->closeEndpoint();
  for (Op* op : live_) delete op;  // deferred ops are live too
  cache_.reset();
}

std::string OfiTransport::provider() const { return fabric_->providerName(); }

CacheStats OfiTransport::cacheStats() const { return cache_->stats(); }

void OfiTransport::exchangeAddresses(Store& store, const NetOptions& options, Deadline deadline) {
  const Bootstrap bootstrap =
      Bootstrap(store, options.storePrefix, rank_, size_, options.timeout).until(deadline);
  session_ = bootstrap.sharedToken("session");

  // Each rank publishes "<provider>\0<k or -><endpoint name>": ranks on different providers
  // cannot talk, and a rank without the key file cannot join ranks that have one ('k').
  std::vector<uint8_t> name(256);
  size_t length = name.size();
  check(fi_getname(&fabric_->ep()->fid, name.data(), &length), "fi_getname");
  name.resize(length);
  Bytes mine = toBytes(provider());
  mine.push_back(0);
  mine.push_back(key_ ? 'k' : '-');
  mine.insert(mine.end(), name.begin(), name.end());
  const std::vector<Bytes> all = bootstrap.allGather("addr", mine);
  std::vector<uint8_t> table;
  names_.assign(size_, {});
  for (int peer = 0; peer < size_; ++peer) {
    const Bytes& record = all[peer];
    auto zero = std::find(record.begin(), record.end(), uint8_t{0});
    const std::string theirs(record.begin(), zero);
    const size_t theirLength = zero == record.end() ? 0 : record.end() - zero - 1;
    if (theirs != provider() || theirLength != length + 1) {
      XCCL_THROW(ErrorKind::kInvalidArgument, "rank ", peer, " uses libfabric provider '", theirs,
                 "' and rank ", rank_, " '", provider(),
                 "': set XCCL_OFI_PROVIDER alike on every rank");
    }
    const bool keyed = *(zero + 1) == 'k';
    if (keyed != key_.has_value()) {
      XCCL_THROW(ErrorKind::kInvalidArgument, "rank ", peer, " runs the ofi engine ",
                 keyed ? "with" : "without", " XCCL_NET_KEY_FILE and rank ", rank_,
                 key_ ? " with one" : " without",
                 ": set it alike on every rank (a rank without the job's key cannot join)");
    }
    names_[peer].assign(zero + 2, record.end());
    table.insert(table.end(), zero + 2, record.end());
  }
  // FI_AV_TABLE: the i-th address inserted is fi_addr i, so rank r is fi_addr r.
  std::vector<fi_addr_t> addresses(size_, FI_ADDR_NOTAVAIL);
  int inserted = fi_av_insert(fabric_->av(), table.data(), size_, addresses.data(), 0, nullptr);
  check(inserted, "fi_av_insert");
  XCCL_CHECK(inserted == size_, "fi_av_insert took ", inserted, " of ", size_, " addresses");
  for (int peer = 0; peer < size_; ++peer) {
    XCCL_CHECK(addresses[peer] == static_cast<fi_addr_t>(peer), "fi_av_insert put rank ", peer,
               " at fi_addr ", addresses[peer], " of an FI_AV_TABLE");
    peerAddr_[peer] = addresses[peer];
  }
  if (directed_ || sourced_) {
    // A message that arrives before its sender's address is inserted may stay filed under no
    // address (libfabric's peer API re-files them only since 1.19), where a directed receive
    // never matches it, and its completion names no source (FI_ADDR_NOTAVAIL), so the source
    // check would drop it: nobody sends until every rank has inserted every address.
    bootstrap.allGather("inserted", Bytes{});
  }
}

int OfiTransport::rankOfSource(uint64_t source) const {
  // FI_AV_TABLE: fi_addr r is rank r (checked when the addresses were inserted).
  if (source == FI_ADDR_NOTAVAIL || source >= static_cast<uint64_t>(size_)) return -1;
  return static_cast<int>(source);
}

void OfiTransport::dropForged(const std::string& what) {
  const uint64_t dropped = ++droppedForged_;
  if ((dropped & (dropped - 1)) == 0) {
    XCCL_WARN("ofi", "rank ", rank_, " dropped ", what, "; ", dropped, " dropped so far");
  }
}

void OfiTransport::authenticate(Store& store, const NetOptions& options, Deadline deadline) {
  const Bootstrap bootstrap =
      Bootstrap(store, options.storePrefix, rank_, size_, options.timeout).until(deadline);
  authTerms_.key = *key_;
  authTerms_.group = options.storePrefix;
  authTerms_.session = session_;
  authTerms_.self = rank_;
  authTerms_.addresses = names_;
  std::vector<Op*> slots;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auth_.resize(size_);
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      uint8_t nonce[kAuthNonceBytes];
      randomBytes(nonce, sizeof(nonce));
      auth_[peer] = std::make_unique<PeerAuth>(authTerms_, peer, nonce);
    }
    authOpen_ = true;
  }
  const int slotCount = std::min(kMaxAuthSlots, 2 * (size_ - 1));
  for (int i = 0; i < slotCount; ++i) {
    Op* op = Op::slot(Op::Type::kAuthRecv, kAuthSlotBytes, kAuthTag);
    try {
      if (localMr_) op->desc = localDesc(op, op->data, op->bytes);
    } catch (...) {
      delete op;
      throw;
    }
    post(op);
  }
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const AuthMessage hello = auth_[peer]->nonceMessage();
    sendAuth(peer, &hello, sizeof(hello));
  }
  std::string failure;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // Until the exchange with every peer is over, even after one failed: a rank still answers
    // the others' nonces, so that each learns the real reason instead of timing out.
    const bool finished = completed_.wait_until(lock, deadline, [&] {
      if (authDone_ == size_ - 1) return true;
      for (int peer = 0; peer < size_; ++peer) {
        if (peer != rank_ && health_.peerErrorLocked(peer) != nullptr) return true;
      }
      return false;
    });
    for (int peer = 0; failure.empty() && peer < size_; ++peer) {
      if (peer == rank_) continue;
      if (const Error* error = health_.peerErrorLocked(peer)) failure = error->what();
    }
    if (failure.empty()) failure = authFailure_;
    if (failure.empty() && !finished) {
      for (int peer = 0; peer < size_; ++peer) {
        if (peer == rank_ || auth_[peer]->finished()) continue;
        failure = detail::concat(
            "rank ", peer, " did not complete the key exchange within ",
            std::chrono::duration_cast<std::chrono::milliseconds>(options.timeout).count(),
            " ms (is XCCL_NET_KEY_FILE set on it, and is it running?)");
        break;
      }
    }
    authOpen_ = false;
  }
  {
    // The slots still posted end cancelled (onError frees them), or with a late message
    // (onAuth frees it).
    std::lock_guard<std::mutex> ops(opsMutex_);
    for (Op* op : live_) {
      if (op->type == Op::Type::kAuthRecv) fi_cancel(&fabric_->ep()->fid, &op->context);
    }
  }
  // Every rank says how its exchange went; none sends a header before every rank has proven
  // every peer, so a peer's first header never arrives before its proof was checked here.
  Agreement agreed;
  try {
    agreed = bootstrap.agree("auth", failure);
  } catch (const Error&) {
    if (failure.empty()) throw;
  }
  if (!failure.empty()) {
    XCCL_THROW(ErrorKind::kInvalidArgument, "ofi key exchange on rank ", rank_, ": ", failure);
  }
  if (!agreed.ok()) {
    XCCL_THROW(ErrorKind::kInvalidArgument, "ofi key exchange failed on ", agreed.first());
  }
}

void OfiTransport::sendAuth(int peer, const void* message, size_t bytes) {
  Op* op = Op::make(Op::Type::kSend, peer, nullptr);
  op->tag = kAuthTag;
  op->buffer.assign(static_cast<const uint8_t*>(message),
                    static_cast<const uint8_t*>(message) + bytes);
  op->data = op->buffer.data();
  op->bytes = op->buffer.size();
  try {
    op->desc = localDesc(op, op->data, op->bytes);
  } catch (const Error& e) {
    delete op;
    std::lock_guard<std::mutex> guard(mutex_);
    if (authFailure_.empty()) {
      authFailure_ = detail::concat("sending the key exchange to rank ", peer, ": ", e.what());
    }
    completed_.notify_all();
    return;
  }
  post(op);
}

// Progress thread: a key exchange message arrived (or a stranger's message on its tag).
void OfiTransport::onAuth(Op* op, size_t length, uint64_t source) {
  AuthMessage reply;
  bool replied = false;
  const int peer = rankOfSource(source);
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!authOpen_) {
      finish(op);
      return;
    }
    if (peer < 0 || peer == rank_) {
      dropForged("a key exchange message from an endpoint outside the group");
    } else {
      PeerAuth& auth = *auth_[peer];
      const bool before = auth.finished();
      const std::string why = auth.receive(op->buffer.data(), length, &reply, &replied);
      if (!why.empty() && authFailure_.empty()) authFailure_ = why;
      if (!before && auth.finished()) ++authDone_;
      if (auth.proven()) proven_[peer] = 1;
      completed_.notify_all();
    }
  }
  if (replied) sendAuth(peer, &reply, sizeof(reply));
  post(op);
}

void OfiTransport::progressLoop() {
  fi_cq_tagged_entry entries[16];
  fi_addr_t sources[16];
  while (!stop_.load()) {
    try {
      bool waiting;
      {
        std::lock_guard<std::mutex> guard(opsMutex_);
        waiting = !deferred_.empty();
      }
      const uint64_t asleep = trace_.on() ? Trace::nowNs() : 0;
      const int waitMs = waiting ? kDeferredWaitMs : kIdleWaitMs;
      ssize_t n = sourced_ ? fi_cq_sreadfrom(fabric_->cq(), entries, 16, sources, nullptr, waitMs)
                           : fi_cq_sread(fabric_->cq(), entries, 16, nullptr, waitMs);
      const uint64_t awake = trace_.on() ? Trace::nowNs() : 0;
      if (trace_.on()) {
        trace_.add(Trace::kSread, awake - asleep);
        trace_.wake(n);
      }
      if (n > 0) {
        for (ssize_t i = 0; i < n; ++i) {
          onCompletion(static_cast<Op*>(entries[i].op_context), entries[i].flags, entries[i].data,
                       entries[i].len, sourced_ ? sources[i] : FI_ADDR_NOTAVAIL);
        }
        if (trace_.on()) trace_.add(Trace::kHandle, Trace::nowNs() - awake);
      } else if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        if (fi_cq_readerr(fabric_->cq(), &err, 0) > 0) {
          const char* text =
              fi_cq_strerror(fabric_->cq(), err.prov_errno, err.err_data, nullptr, 0);
          onError(static_cast<Op*>(err.op_context), err.err, text ? text : fi_strerror(err.err));
        }
      } else if (n < 0 && n != -FI_EAGAIN && n != -FI_ETIMEDOUT && n != -FI_EINTR) {
        XCCL_THROW(ErrorKind::kSystem, "fi_cq_sread failed: ", fi_strerror(static_cast<int>(-n)));
      }
      retryDeferred();
    } catch (const std::exception& e) {
      // Nothing escapes the progress thread: every request fails with the cause instead.
      Error error(ErrorKind::kSystem, detail::concat("ofi progress thread stopped: ", e.what()));
      failAll(error);
      return;
    }
  }
}

void OfiTransport::onCompletion(Op* op, uint64_t flags, uint64_t data, size_t length,
                                uint64_t source) {
  if ((flags & FI_REMOTE_CQ_DATA) && (flags & FI_REMOTE_WRITE)) {
    // `source` is not read here: ofi_rxm reports remote-write completions without one (the
    // completion queue's source slot keeps an earlier entry's), so the writer is what its CQ
    // data says (memory.cc, onSignal).
    onSignal(data);
    return;
  }
  if (op == nullptr) return;
  if (trace_.on()) traceCompletion(op);
  switch (op->type) {
    case Op::Type::kHeaderRecv:
      onHeader(op->buffer.data(), length, source);
      if (!stop_.load()) post(op);
      return;
    case Op::Type::kAuthRecv: onAuth(op, length, source); return;
    case Op::Type::kDataRecv:
      if (sourced_ && !directed_ && rankOfSource(source) != op->peer && op->request) {
        // Without directed receives any endpoint sending the payload's tag fills the buffer;
        // the request fails rather than pass another endpoint's bytes off as its sender's.
        dropForged(detail::concat("a payload for rank ", op->peer, " from another endpoint"));
        std::lock_guard<std::mutex> guard(mutex_);
        op->request->failLocked(Error(
            ErrorKind::kPeerFailure,
            detail::concat("the payload announced by rank ", op->peer,
                           " came from another endpoint (a forged message): not its payload")));
        completed_.notify_all();
        break;
      }
      if (length != op->bytes && op->request) {
        // The sender's header announced the user's size; anything else is not its payload.
        std::lock_guard<std::mutex> guard(mutex_);
        op->request->failLocked(
            Error(ErrorKind::kPeerFailure,
                  detail::concat("received ", length, " bytes from rank ", op->peer,
                                 " where its header announced ", op->bytes, ": not its payload")));
        completed_.notify_all();
        break;
      }
      [[fallthrough]];
    case Op::Type::kSend:
    case Op::Type::kWrite:
      if (op->request && op->completes) {
        std::lock_guard<std::mutex> guard(mutex_);
        op->request->completeLocked(op->type == Op::Type::kDataRecv ? op->peer
                                                                    : op->request->peer());
        if (trace_.on()) trace_.notified();
        completed_.notify_all();
      }
      break;
    case Op::Type::kDiscard: break;
  }
  finish(op);
}

void OfiTransport::onError(Op* op, int error, const std::string& text) {
  if (op == nullptr) return;
  if (op->type == Op::Type::kAuthRecv) {
    bool open;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      open = authOpen_ && !stop_.load();
    }
    if (open && error != FI_ECANCELED) {
      XCCL_WARN("ofi", "key exchange receive failed: ", text);
      post(op);
    } else {
      finish(op);
    }
    return;
  }
  if (op->type == Op::Type::kHeaderRecv) {
    if (error != FI_ECANCELED && !stop_.load()) {
      XCCL_WARN("ofi", "header receive failed: ", text);
      post(op);
    }
    return;
  }
  if (op->type == Op::Type::kDiscard || error == FI_ECANCELED) {
    // Discards end truncated by design; cancelled ops belong to requests already failed.
    if (op->request && error == FI_ECANCELED) {
      std::lock_guard<std::mutex> guard(mutex_);
      op->request->failLocked(Error(ErrorKind::kAborted, "cancelled"));
      completed_.notify_all();
    }
    finish(op);
    return;
  }
  const bool sending = op->type != Op::Type::kDataRecv;
  Error failure(ErrorKind::kPeerFailure, detail::concat(sending ? "sending to" : "receiving from",
                                                        " rank ", op->peer, " failed (", text,
                                                        "): the process exited, was killed, or its "
                                                        "network is down"));
  const int peer = op->peer;
  if (op->request) {
    std::lock_guard<std::mutex> guard(mutex_);
    op->request->failLocked(failure);
    completed_.notify_all();
  }
  finish(op);
  // A send the provider gave up on means the peer cannot be reached any more.
  if (sending && peer >= 0) failPeer(peer, failure, false);
}

void OfiTransport::onHeader(const uint8_t* message, size_t length, uint64_t from) {
  Header header;
  if (const char* bad = parseHeader(message, length, session_, rank_, size_, &header)) {
    XCCL_WARN("ofi", "dropped a ", length, "-byte message: ", bad);
    return;
  }
  const int source = header.source;
  if (sourced_ && rankOfSource(from) != source) {
    const int actual = rankOfSource(from);
    dropForged(detail::concat("a header claiming rank ", source, " from ",
                              actual < 0 ? std::string("an endpoint outside the group")
                                         : detail::concat("rank ", actual, "'s endpoint")));
    return;
  }
  if (key_ && !proven_[source]) {
    dropForged(detail::concat("a header from rank ", source, ", which has not proven the key"));
    return;
  }
  std::string why;
  HeaderStreams::Verdict verdict;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    verdict = streams_.acceptLocked(header, message, length, &why);
  }
  if (verdict == HeaderStreams::Verdict::kRefused) {
    failPeer(source, Error(ErrorKind::kPeerFailure, why), true);
    return;
  }
  if (verdict != HeaderStreams::Verdict::kInTurn) return;
  deliver(header, message + sizeof(Header));
  for (;;) {
    std::vector<uint8_t> next;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (!streams_.nextLocked(source, &next)) return;
    }
    std::memcpy(&header, next.data(), sizeof(header));
    deliver(header, next.data() + sizeof(Header));
  }
}

void OfiTransport::deliver(const Header& header, const uint8_t* payload) {
  const int source = header.source;
  switch (header.kind) {
    case Kind::kData: matchData(header, payload); return;
    case Kind::kControl:
      onControl(source, header.control.kind, header.control.round,
                std::string(reinterpret_cast<const char*>(payload), header.inlineBytes));
      return;
  }
  XCCL_WARN("ofi", "rank ", source, " sent an unknown message kind ",
            static_cast<unsigned>(header.kind));
}

}  // namespace xccl::net::ofi
