#include "net/ofi/transport.h"

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
#include "net/bootstrap.h"
#include "net/ofi/cache.h"
#include "net/ofi/fabric.h"
#include "net/ofi/memory.h"
#include "net/ofi/op.h"
#include "net/ofi/wire.h"

namespace xccl::net::ofi {
namespace {

constexpr int kHeaderSlots = 32;
// fi_cq_sread's bound: completions and fi_cq_signal wake it at once; the bound only limits how
// long a post the provider deferred (EAGAIN) waits for its retry.
constexpr int kIdleWaitMs = 1000, kDeferredWaitMs = 1;

}  // namespace

bool available(std::string* why, bool rdmaOnly) {
  return providerAvailable(env::getString("XCCL_OFI_PROVIDER"), why, rdmaOnly);
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
                                        env::getString("XCCL_OFI_PROVIDER"));
}

OfiTransport::OfiTransport(Store& store, int rank, int size, const NetOptions& options,
                           const std::string& provider)
    : TransportBase(rank, size),
      peerAddr_(size),
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
            directed_ ? "on" : "off: payloads match on their tag alone", ")");
  // Header slots are posted before any peer learns our address, so no header arrives unposted.
  for (int i = 0; i < kHeaderSlots; ++i) {
    Op* op = new Op{};
    op->type = Op::Type::kHeaderRecv;
    op->buffer.resize(kHeaderSlotBytes);
    op->data = op->buffer.data();
    op->bytes = op->buffer.size();
    op->tag = kHeaderTag;
    headerSlots_.push_back(op);
    {
      std::lock_guard<std::mutex> guard(opsMutex_);
      live_.insert(op);
    }
    if (localMr_) op->desc = localDesc(op, op->data, op->bytes);
    check(postNow(op), "posting a header receive");
  }
  try {
    exchangeAddresses(store, options);
  } catch (...) {
    fabric_->closeEndpoint();
    for (Op* op : live_) delete op;
    live_.clear();
    throw;
  }
  progressThread_ = std::thread([this, cpus = options.progressCpus] {
    affinity::pinProgressThread(cpus, "ofi");  // never throws; unpinned when it cannot pin
    wait_slice::keepShort();
    onProgressThread();
    if (trace_.on()) trace_.progressStarted();
    progressLoop();
    if (trace_.on()) trace_.progressStopped();
  });
}

OfiTransport::~OfiTransport() {
  stop_.store(true);
  if (progressThread_.joinable()) {
    fi_cq_signal(fabric_->cq());
    progressThread_.join();
  }
  if (trace_.on()) log::write(log::Level::kWarn, "ofi", trace_.summary());
  drainForClose();
  // With the endpoint closed no completion can name an op any more: they can all go.
  fabric_->closeEndpoint();
  for (Op* op : live_) delete op;  // deferred ops are live too
  cache_.reset();
}

std::string OfiTransport::provider() const { return fabric_->providerName(); }

CacheStats OfiTransport::cacheStats() const { return cache_->stats(); }

void OfiTransport::exchangeAddresses(Store& store, const NetOptions& options) {
  const Deadline deadline = Clock::now() + options.timeout;
  const Bootstrap bootstrap =
      Bootstrap(store, options.storePrefix, rank_, size_, options.timeout).until(deadline);
  session_ = bootstrap.sharedToken("session");

  // Each rank publishes "<provider>\0<endpoint name>": ranks on different providers cannot talk.
  std::vector<uint8_t> name(256);
  size_t length = name.size();
  check(fi_getname(&fabric_->ep()->fid, name.data(), &length), "fi_getname");
  name.resize(length);
  Bytes mine = toBytes(provider());
  mine.push_back(0);
  mine.insert(mine.end(), name.begin(), name.end());
  const std::vector<Bytes> all = bootstrap.allGather("addr", mine);
  std::vector<uint8_t> table;
  for (int peer = 0; peer < size_; ++peer) {
    const Bytes& record = all[peer];
    auto zero = std::find(record.begin(), record.end(), uint8_t{0});
    const std::string theirs(record.begin(), zero);
    const size_t theirLength = zero == record.end() ? 0 : record.end() - zero - 1;
    if (theirs != provider() || theirLength != length) {
      XCCL_THROW(ErrorKind::kInvalidArgument, "rank ", peer, " uses libfabric provider '", theirs,
                 "' and rank ", rank_, " '", provider(),
                 "': set XCCL_OFI_PROVIDER alike on every rank");
    }
    table.insert(table.end(), zero + 1, record.end());
  }
  // FI_AV_TABLE: the i-th address inserted is fi_addr i, so rank r is fi_addr r.
  std::vector<fi_addr_t> addresses(size_, FI_ADDR_NOTAVAIL);
  int inserted = fi_av_insert(fabric_->av(), table.data(), size_, addresses.data(), 0, nullptr);
  check(inserted, "fi_av_insert");
  XCCL_CHECK(inserted == size_, "fi_av_insert took ", inserted, " of ", size_, " addresses");
  for (int peer = 0; peer < size_; ++peer) peerAddr_[peer] = addresses[peer];
  if (directed_) {
    // A message that arrives before its sender's address is inserted may stay filed under no
    // address (libfabric's peer API re-files them only since 1.19), where a directed receive
    // never matches it: nobody sends until every rank has inserted every address.
    bootstrap.allGather("inserted", Bytes{});
  }
}

void OfiTransport::progressLoop() {
  fi_cq_tagged_entry entries[16];
  while (!stop_.load()) {
    try {
      bool waiting;
      {
        std::lock_guard<std::mutex> guard(opsMutex_);
        waiting = !deferred_.empty();
      }
      const uint64_t asleep = trace_.on() ? Trace::nowNs() : 0;
      ssize_t n =
          fi_cq_sread(fabric_->cq(), entries, 16, nullptr, waiting ? kDeferredWaitMs : kIdleWaitMs);
      const uint64_t awake = trace_.on() ? Trace::nowNs() : 0;
      if (trace_.on()) {
        trace_.add(Trace::kSread, awake - asleep);
        trace_.wake(n);
      }
      if (n > 0) {
        for (ssize_t i = 0; i < n; ++i) {
          onCompletion(static_cast<Op*>(entries[i].op_context), entries[i].flags, entries[i].data,
                       entries[i].len);
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

void OfiTransport::onCompletion(Op* op, uint64_t flags, uint64_t data, size_t length) {
  if ((flags & FI_REMOTE_CQ_DATA) && (flags & FI_REMOTE_WRITE)) {
    onSignal(data);
    return;
  }
  if (op == nullptr) return;
  if (trace_.on()) traceCompletion(op);
  switch (op->type) {
    case Op::Type::kHeaderRecv:
      onHeader(op->buffer.data(), length);
      if (!stop_.load()) post(op);
      return;
    case Op::Type::kDataRecv:
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

void OfiTransport::onHeader(const uint8_t* message, size_t length) {
  Header header;
  if (const char* bad = parseHeader(message, length, session_, rank_, size_, &header)) {
    XCCL_WARN("ofi", "dropped a ", length, "-byte message: ", bad);
    return;
  }
  const int source = header.source;
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
  const std::string text(reinterpret_cast<const char*>(payload), header.inlineBytes);
  switch (header.kind) {
    case Kind::kData: matchData(header, payload); return;
    case Kind::kAbort:
      failPeer(source,
               Error(ErrorKind::kPeerFailure,
                     detail::concat("rank ", source, " aborted the communicator: ", text)),
               true);
      return;
    case Kind::kStatusQuery:
      sendControl(source, Kind::kStatusReply, header.seq, status_.answer());
      return;
    case Kind::kStatusReply: status_.reply(source, header.seq, text); return;
  }
  XCCL_WARN("ofi", "rank ", source, " sent an unknown message kind ",
            static_cast<unsigned>(header.kind));
}

}  // namespace xccl::net::ofi
