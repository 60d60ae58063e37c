// libfabric transport: reliable-datagram endpoints (FI_EP_RDM) with tagged send/recv and RMA
// writes carrying remote completion data. One endpoint, address vector (FI_AV_TABLE, index =
// rank) and completion queue per group; one progress thread sleeps in fi_cq_sread, so an idle
// or waiting rank burns no CPU. Matching is in software on ordered per-peer streams (wire.h
// says why). Built when libfabric is found (XCCL_HAVE_OFI), else available() says why not.
#pragma once

#include <atomic>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "net/rendezvous/net_key.h"
#include "net/rendezvous/store.h"
#include "net/transport/net_options.h"
#include "net/transport/ofi/auth.h"
#include "net/transport/ofi/streams.h"
#include "net/transport/ofi/trace.h"
#include "net/transport/one_sided.h"
#include "net/transport/peer_health.h"
#include "net/transport/status_board.h"
#include "net/transport/transport_base.h"

namespace xccl::net::ofi {

// Whether this build has libfabric and fi_getinfo offers a usable provider; `why` receives the
// reason when not. `rdmaOnly`: count only providers with RDMA hardware (verbs, efa). With
// XCCL_NET_KEY_FILE set, a provider that cannot name a message's source endpoint (FI_SOURCE) is
// not usable; *keyRefused says that was the reason.
bool available(std::string* why, bool rdmaOnly = false, bool* keyRefused = nullptr);

// For `python -m xccl doctor`: "<provider> on <interface>" as createTransport would choose now
// (for the store host `storeHost`), or why there is none.
std::string describeChoice(const std::string& storeHost);

// Collective over the store. XCCL_OFI_PROVIDER picks the provider (unknown: kInvalidArgument
// listing those available); XCCL_NET_KEY_FILE, when set, is the key every peer must prove.
std::unique_ptr<Transport> createTransport(Store& store, int rank, int size,
                                           const NetOptions& options);

// Everything below exists only in builds with libfabric; no libfabric header is needed to
// include this file (the objects are forward-declared).
class Fabric;
class RegistrationCache;
struct CacheStats;
struct Op;

class OfiTransport final : public TransportBase {
 public:
  // `provider`: XCCL_OFI_PROVIDER's value (createTransport reads it), empty for the default.
  // `key`: XCCL_NET_KEY_FILE's key (createTransport reads it): every peer must prove it at
  // creation (auth.h) before anything from it is accepted; creation fails naming a rank that
  // does not. Without, peers are told apart by the store's session token alone.
  OfiTransport(Store& store, int rank, int size, const NetOptions& options,
               const std::string& provider, std::optional<NetKey> key = std::nullopt);
  ~OfiTransport() override;
  OfiTransport(const OfiTransport&) = delete;
  OfiTransport& operator=(const OfiTransport&) = delete;

  const char* name() const override { return "ofi"; }
  // The libfabric provider in use, e.g. "tcp;ofi_rxm".
  std::string provider() const;
  CacheStats cacheStats() const;

  // Defaults as in Transport, for callers holding an OfiTransport.
  RequestPtr isend(int peer, MessageTag tag, const void* data, size_t bytes,
                   Completion onDone = nullptr) override;
  RequestPtr irecv(int peer, MessageTag tag, void* data, size_t bytes,
                   Completion onDone = nullptr) override;
  void wait(const std::vector<RequestPtr>& requests, Deadline deadline,
            const std::string& what) override;
  void abort(const std::string& reason) override;
  std::vector<std::string> queryStatus(Deadline deadline) override;

  std::unique_ptr<Registration> registerMemory(void* data, size_t bytes) override;

  // Whether receives of large payloads accept only their sender's address (the provider has
  // FI_DIRECTED_RECV); without, the tag alone (sender rank and message id) matches them.
  bool directedReceives() const { return directed_; }
  // Whether the provider names each received message's source endpoint (FI_SOURCE): then a
  // message whose claimed sender is not the endpoint it came from is dropped.
  bool sourcesKnown() const { return sourced_; }
  // Messages dropped because the endpoint they came from is not the rank they claim, or a peer
  // that has not proven the key (keyed groups).
  uint64_t forgedDropped() const { return droppedForged_.load(); }
  // Test hook: the next `count` registrations of local buffers fail as a refusing fi_mr_reg
  // would, whether or not the provider needs local buffers registered.
  void failNextRegistrations(int count) { failRegistrations_.store(count); }
  RequestPtr iwrite(int peer, const void* data, size_t bytes, const RemoteRegion& dst,
                    uint64_t dstOffset, uint64_t signal, Completion onDone = nullptr) override;

 private:
  // A header that arrived (matched later by irecv) with its inline payload, if any.
  struct Unexpected {
    int peer;
    MessageTag tag;
    uint64_t bytes;
    uint64_t dataId;
    std::vector<uint8_t> payload;  // inline payloads only
  };
  struct Posted {
    RequestPtr request;
    uint8_t* data;
  };
  // transport.cc: setup, the progress thread, completions.
  void exchangeAddresses(Store& store, const NetOptions& options, Deadline deadline);
  void startProgress(const NetOptions& options);
  void stopProgress();
  void progressLoop();
  void onCompletion(Op* op, uint64_t flags, uint64_t data, size_t length, uint64_t source);
  void onError(Op* op, int error, const std::string& text);
  void onHeader(const uint8_t* message, size_t length, uint64_t source);
  void deliver(const Header& header, const uint8_t* payload);
  void matchData(const Header& header, const uint8_t* payload);
  void onSignal(uint64_t data);
  // The rank whose endpoint `source` (a completion's FI_SOURCE address) is, or -1: an endpoint
  // outside the address vector (FI_ADDR_NOTAVAIL) or none.
  int rankOfSource(uint64_t source) const;
  // Counts a dropped message (forgedDropped) and logs it at doubling counts.
  void dropForged(const std::string& what);
  // auth.cc's exchange with every peer, over kAuthTag (keyed groups only; the progress thread
  // runs). Throws naming the first rank that did not prove the key.
  void authenticate(Store& store, const NetOptions& options, Deadline deadline);
  void onAuth(Op* op, size_t length, uint64_t source);
  void sendAuth(int peer, const void* message, size_t bytes);
  // op.cc, posting: `post` runs the libfabric call now or, when the provider says EAGAIN, later on
  // the progress thread; a hard failure fails the op's request. Callable with or without mutex_.
  void post(Op* op);
  void onProgressThread();  // marks the calling thread as this transport's progress thread
  long postNow(Op* op);
  // fi_tinject of a header message of at most injectBytes_: the provider copies it, and no
  // completion follows. False when it was not taken (then post() it).
  bool injectNow(const Op* op);
  void retryDeferred();
  void finish(Op* op);  // forgets and frees a completed op
  void drainForClose();  // destructor, progress thread stopped
  void* localDesc(Op* op, const void* data, size_t bytes);
  void traceCompletion(const Op* op);  // XCCL_OFI_TRACE only

  // transport_ops.cc: matching helpers and failure handling (one-sided: memory.cc).
  RequestPtr sendMessage(int peer, Header header, const void* data, RequestPtr request);
  void receiveData(const RequestPtr& request, uint8_t* data, int peer, uint64_t dataId);
  void discardData(int peer, uint64_t dataId, uint64_t bytes);
  void sendControl(int peer, ControlKind kind, uint64_t round, const std::string& text) override;
  // sendControl's message, whose request abort() waits for (kEagerBytes of text at most).
  RequestPtr postControl(int peer, ControlKind kind, uint64_t round, const std::string& text);
  void failPeerLocked(const PeerLoss& loss, const Error& error) override;
  void failRequestsLocked(const Error& error) override;

  std::unique_ptr<Fabric> fabric_;
  std::unique_ptr<RegistrationCache> cache_;  // destroyed before fabric_ (its MRs need it)
  std::unique_ptr<SignalCodec> codec_;
  bool localMr_ = false;  // FI_MR_LOCAL: every local buffer needs a descriptor
  bool virtAddr_ = false;  // FI_MR_VIRT_ADDR: RMA addresses are virtual, else offsets
  uint64_t session_ = 0;
  std::optional<NetKey> key_;  // XCCL_NET_KEY_FILE's: peers must prove it
  bool sourced_ = false;  // FI_SOURCE: completions name their source endpoint
  std::vector<uint64_t> peerAddr_;  // fi_addr_t by rank
  std::vector<std::vector<uint8_t>> names_;  // fi_getname by rank (the key exchange binds them)
  // Keyed groups: which peers proved the key. Written and read on the progress thread alone
  // (before any peer is proven, the constructor waits and reads only the count below).
  std::vector<uint8_t> proven_;
  // The key exchange in progress, guarded by mutex_: one PeerAuth by rank (null for this rank).
  AuthTerms authTerms_;
  std::vector<std::unique_ptr<PeerAuth>> auth_;
  bool authOpen_ = false;  // slots are reposted while true
  int authDone_ = 0;  // peers whose exchange is over (PeerAuth::finished)
  std::string authFailure_;
  std::atomic<uint64_t> droppedForged_{0};
  std::vector<Op*> headerSlots_;  // receives for headers, reposted after each one
  std::thread progressThread_;
  std::atomic<bool> stop_{false};

  size_t injectBytes_ = 0;  // the provider's inject size (fi_tinject), 0: never inject
  bool directed_ = false;  // FI_DIRECTED_RECV: payload receives name their sender's fi_addr
  std::atomic<int> failRegistrations_{0};  // failNextRegistrations
  std::atomic<uint64_t> droppedSignals_{0};  // write completions naming no peer
  Trace trace_;  // XCCL_OFI_TRACE

  std::mutex opsMutex_;  // guards live_, deferred_
  std::unordered_set<Op*> live_;  // every op handed to libfabric and not finished
  std::deque<Op*> deferred_;  // posts not handed to the provider yet, in posting order

  std::mutex sendMutex_;  // guards the send side's numbering
  std::vector<uint64_t> sendStream_;  // next stream number per destination
  uint64_t nextDataId_ = 0;

  // Guarded by mutex_ (TransportBase).
  HeaderStreams streams_;  // headers in stream order per source, those ahead of their turn held
  std::list<Posted> posted_;
  std::list<Unexpected> unexpected_;
};

}  // namespace xccl::net::ofi
