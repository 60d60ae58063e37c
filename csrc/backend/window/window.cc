// XcclWindow (window.h): creation, registration (collective), deregistration, map_remote_tensor.
// The operations are in window_ops.cc, the waits in window_wait.cc.
#include "backend/window/window.h"

#if XCCL_TORCH_HAS_WINDOW

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>

#include "backend/core/group_core.h"
#include "backend/core/store_adapter.h"
#include "backend/core/torch_error.h"
#include "net/rendezvous/group_layout.h"
#include "net/transport/window_record.h"

namespace xccl::backend {
namespace {

// Signals of window `id` carry kSignalBase | id over the transport: never 0 (a put's "no
// signal"), unlike any other window's of the group (for 2^24 windows), and within 32 bits,
// since a provider's remote CQ data may carry no more (tcp;ofi_rxm leaves 48).
constexpr uint64_t kSignalBase = uint64_t{0x57} << 24;  // "W"
constexpr uint64_t kSignalIds = uint64_t{1} << 24;

constexpr const char* kStale =
    "the group was reconfigured after this window was created, which ended the window with its "
    "membership; create a new one (torch.distributed._new_window)";

// The bytes of one element of dtype number `dtype` as a peer's record gives it, or 0 for a number
// that names no dtype a window can hold: outside c10::ScalarType, Undefined, quantized (a view of
// one needs a quantizer from_blob cannot give), or any elementSize refuses.
size_t elementSizeOf(int dtype) {
  if (dtype < 0 || dtype >= static_cast<int>(at::ScalarType::NumOptions)) return 0;
  const auto type = static_cast<at::ScalarType>(dtype);
  if (type == at::ScalarType::Undefined || c10::isQIntType(type)) return 0;
  try {
    return c10::elementSize(type);
  } catch (const c10::Error&) {
    return 0;
  }
}

// One rank's registration as every rank learns it: dtype, shape and its RemoteRegion.
std::string describe(const at::Tensor& tensor, const net::RemoteRegion& remote) {
  net::WindowRecord record;
  record.dtype = static_cast<int>(tensor.scalar_type());
  record.remote = remote;
  record.sizes = tensor.sizes().vec();
  return net::formatWindowRecord(record);
}

// The collective steps' bootstrap: keys under the window's and the step's own prefix.
net::Bootstrap bootstrapOf(StoreAdapter& store, int rank, int size, const std::string& step,
                           std::chrono::milliseconds timeout) {
  return net::Bootstrap(store, step, rank, size, timeout);
}

// An xccl::Error's message without its "xccl: " lead, to follow one naming the call.
std::string messageOf(const Error& e) {
  const std::string text = e.what();
  return text.rfind("xccl: ", 0) == 0 ? text.substr(6) : text;
}

}  // namespace

XcclWindow::XcclWindow(c10::intrusive_ptr<c10d::Backend> owner, GroupCore& group, uint64_t id)
    : owner_(std::move(owner)),
      group_(group),
      id_(id),
      rank_(group_.membership().rank()),
      size_(group_.membership().size()),
      signalValue_(kSignalBase | (id % kSignalIds)),
      epoch_(group_.membership().membershipEpoch()),
      pending_(size_),
      orphans_(size_) {
  // Which ranks share this host, as the group's shared-memory transport decides (one rank's
  // XCCL_SHM_DISABLE turns it off for all), from the membership's layout: their windows are
  // mapped, the others' reached through the transport.
  const net::GroupLayout& layout = group_.membership().layout();
  local_ = layout.shmDisabled() ? std::vector<int>{rank_} : layout.ranksOnThisHost();
  unmapped_ = layout.shmDisabled()
                  ? "is not mapped here: XCCL_SHM_DISABLE is set on rank " +
                        std::to_string(layout.census.firstAbsent) + ", so windows use the network"
                  : "is on another host than rank " + std::to_string(rank_);
}

XcclWindow::~XcclWindow() {
  {
    std::lock_guard<std::mutex> guard(waitMutex_);
    stopping_ = true;
  }
  waitChanged_.notify_all();
  if (waiter_.joinable()) waiter_.join();
  failWaits("the window was destroyed");
  // After the group's shutdown (destroy_process_group) or a reconfigure its transport is gone,
  // and with it every registration's state: nothing is left to deregister from, and the
  // registration must not try.
  std::lock_guard<std::mutex> guard(mutex_);
  if (registered_ && registered_->registration &&
      (group_.membership().transportGone() || stale())) {
    (void)registered_->registration.release();
  }
}

void XcclWindow::tensor_register(const at::Tensor& tensor, bool owning) {
  group_.checkUsable("tensor_register");
  TORCH_CHECK_VALUE(!stale(), "xccl window tensor_register: ", kStale);
  // Arguments are checked on every rank and agreed on first, so a bad one raises ValueError on
  // all ranks instead of leaving the others in the collective until the timeout.
  std::string bad;
  if (tensor.is_cuda()) {
    bad = "CUDA windows are not supported yet (register a CPU tensor)";
  } else if (!tensor.device().is_cpu() || tensor.layout() != c10::kStrided) {
    bad = "the window tensor must be a dense CPU tensor";
  } else if (!tensor.is_contiguous()) {
    bad = "the window tensor must be contiguous";
  } else if (elementSizeOf(static_cast<int>(tensor.scalar_type())) == 0) {
    bad = detail::concat("a window cannot hold ", tensor.scalar_type(), " elements");
  } else {
    std::lock_guard<std::mutex> guard(mutex_);
    if (registered_) bad = "a tensor is already registered (call tensor_deregister first)";
  }
  const std::string step = std::to_string(++generation_);
  StoreAdapter store(group_.membership().store(),
                     "xccl/win/" + std::to_string(id_) + "/reg" + step + "/");
  const net::Bootstrap bootstrap =
      bootstrapOf(store, rank_, size_, "", group_.sequencer().timeout())
          .until(net::Clock::now() + group_.sequencer().timeout());
  try {
    const net::Agreement args = bootstrap.agree("args", bad);
    if (!args.ok()) XCCL_THROW(ErrorKind::kInvalidArgument, args.first());
    auto reg = std::make_shared<Registered>();
    const size_t bytes = tensor.nbytes();
    reg->region = net::shm::WindowRegion::create(bootstrap.scoped("shm"), local_, bytes);
    const std::shared_ptr<net::shm::WindowMapping>& own = reg->region->mapping(rank_);
    if (bytes > 0) std::memcpy(own->data(), tensor.data_ptr(), bytes);
    // The tensor itself becomes the window: a storage over the mapping, same shape and strides.
    // Its DataPtr holds the mapping, so the memory lives as long as the tensor does.
    auto* holder = new std::shared_ptr<net::shm::WindowMapping>(own);
    c10::DataPtr data(
        own->data(), holder,
        [](void* ctx) { delete static_cast<std::shared_ptr<net::shm::WindowMapping>*>(ctx); },
        c10::Device(c10::kCPU));
    c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, std::move(data), nullptr, false);
    {
      at::NoGradGuard noGrad;
      const_cast<at::Tensor&>(tensor).set_(storage, 0, tensor.sizes(), tensor.strides());
    }
    // Ranks of other hosts write through the transport: register the memory with it.
    std::string failure;
    net::RemoteRegion remote;
    if (static_cast<int>(local_.size()) < size_) {
      try {
        reg->registration = group_.membership().transport()->registerMemory(own->data(), bytes);
        remote = reg->registration->remote();
      } catch (const Error& e) {
        failure = e.what();
      }
    }
    const net::Agreement registered = bootstrap.agree("transport", failure);
    if (!registered.ok()) XCCL_THROW(ErrorKind::kInvalidArgument, registered.first());
    const std::vector<std::string> all = bootstrap.allGather("info", describe(tensor, remote));
    // Every record is only its rank's word: its shape must be exactly the memory behind it (the
    // file mapped here, or what it registered with the transport) before any view or write uses
    // it. Agreed, since ranks may judge a record differently (its writer reads its own copy, not
    // the store's), so a bad one fails the registration on every rank instead of leaving its
    // writer registered alone.
    reg->peers.resize(size_);
    std::string refused;
    for (int r = 0; r < size_ && refused.empty(); ++r) {
      PeerWindow& peer = reg->peers[r];
      net::WindowRecord record;
      std::string why;
      try {
        record = net::parseWindowRecord(all[r]);
        peer.elementSize = elementSizeOf(record.dtype);
        const uint64_t mapped =
            reg->region->maps(r) ? reg->region->mapping(r)->bytes() : record.remote.bytes;
        why = net::checkWindowFits(record, peer.elementSize, mapped, reg->registration != nullptr);
      } catch (const Error& e) {
        why = messageOf(e);
      }
      if (!why.empty()) {
        refused =
            detail::concat("rank ", r, "'s window record does not describe its window: ", why);
        continue;
      }
      peer.dtype = static_cast<at::ScalarType>(record.dtype);
      peer.sizes = record.sizes;
      peer.remote = record.remote;
      peer.numel = record.numel;
    }
    const net::Agreement records = bootstrap.agree("records", refused);
    if (!records.ok()) XCCL_THROW(ErrorKind::kPeerFailure, records.first());
    if (owning) reg->tensor = tensor;
    std::lock_guard<std::mutex> guard(mutex_);
    registered_ = std::move(reg);
    deregistered_ = false;
  } catch (const Error& e) {
    throwTorchError(e.kind(), std::string("xccl tensor_register: ") + messageOf(e));
  }
}

void XcclWindow::tensor_deregister() {
  if (stale()) {
    // The membership the registration was agreed in is gone, so there is no one to agree with:
    // deregistering is local. The registration's transport went with the membership.
    std::lock_guard<std::mutex> guard(mutex_);
    if (registered_ && registered_->registration) (void)registered_->registration.release();
    registered_.reset();
    deregistered_ = true;
    return;
  }
  std::shared_ptr<Registered> reg = current("tensor_deregister");
  StoreAdapter store(group_.membership().store(), "xccl/win/" + std::to_string(id_) + "/dereg" +
                                                      std::to_string(generation_) + "/");
  try {
    // Our puts in flight end first; then every rank agrees, so nobody writes any more once the
    // memory leaves the transport and the peers' mappings go.
    for (int peer = 0; peer < size_; ++peer) {
      if (!reg->region->maps(peer))
        fence(peer, deadlineOf(c10d::kUnsetTimeout), "tensor_deregister");
    }
    bootstrapOf(store, rank_, size_, "", group_.sequencer().timeout()).agree("done", "");
  } catch (const Error& e) {
    throwTorchError(e.kind(), std::string("xccl tensor_deregister: ") + messageOf(e));
  }
  {
    std::lock_guard<std::mutex> guard(mutex_);
    registered_.reset();
    deregistered_ = true;
    // orphans_ stay: their iwaitWrites are still posted and take the next signals of the
    // window's signal value, whichever registration those belong to.
  }
  failWaits("tensor_deregister was called while it waited");
}

at::Tensor XcclWindow::map_remote_tensor(int64_t rank) {
  checkRank(rank, "map_remote_tensor");
  std::shared_ptr<Registered> reg = current("map_remote_tensor");
  const int peer = static_cast<int>(rank);
  TORCH_CHECK_VALUE(reg->region->maps(peer), "xccl map_remote_tensor: rank ", peer, " ", unmapped_,
                    "; its window cannot be mapped (use put and signal)");
  std::shared_ptr<net::shm::WindowMapping> mapping = reg->region->mapping(peer);
  const PeerWindow& window = reg->peers[peer];
  // Registration checked the shape against this very mapping; the view relies on it, so it is
  // checked again where an error would otherwise be a read past the mapping.
  uint64_t bytes = 0;
  TORCH_CHECK(window.numel >= 0 &&
                  !__builtin_mul_overflow(static_cast<uint64_t>(window.numel), window.elementSize,
                                          &bytes) &&
                  bytes <= mapping->bytes(),
              "xccl map_remote_tensor: rank ", peer, "'s window of ", window.numel, " elements of ",
              window.elementSize, " bytes does not fit its mapping of ", mapping->bytes(),
              " bytes");
  // The view holds the mapping: it stays valid after tensor_deregister or the window's end.
  return at::from_blob(
      mapping->data(), window.sizes, [mapping](void*) {},
      at::TensorOptions().dtype(window.dtype).device(c10::kCPU));
}

c10d::WindowAttr XcclWindow::get_attr(int64_t peerRank) {
  checkRank(peerRank, "get_attr");
  return c10d::WindowAttr{c10d::WindowAccessType::UNIFIED};
}

std::shared_ptr<XcclWindow::Registered> XcclWindow::current(const char* opName) const {
  // A group shut down (its transport gone) or broken by a failed collective refuses windows too.
  group_.checkUsable(opName);
  TORCH_CHECK_VALUE(!stale(), "xccl window ", opName, ": ", kStale);
  std::lock_guard<std::mutex> guard(mutex_);
  TORCH_CHECK_VALUE(registered_ != nullptr, "xccl window ", opName, ": ",
                    deregistered_ ? "the window's tensor was deregistered (tensor_deregister); "
                                    "register one again first"
                                  : "no tensor is registered (tensor_register first)");
  return registered_;
}

bool XcclWindow::stale() const { return group_.membership().membershipEpoch() != epoch_; }

void XcclWindow::checkRank(int64_t rank, const char* opName) const {
  TORCH_CHECK_VALUE(rank >= 0 && rank < size_, "xccl window ", opName, ": rank ", rank,
                    " is outside the group of size ", size_);
}

void XcclWindow::checkAlive(int peer) const {
  if (peer == rank_) return;
  try {
    group_.membership().peerAlive(peer);
  } catch (const Error& e) {
    throwTorchError(e.kind(), e.what());
  }
}

net::Deadline XcclWindow::deadlineOf(std::chrono::milliseconds requested) const {
  const auto timeout = requested != c10d::kUnsetTimeout ? requested : group_.sequencer().timeout();
  return net::Clock::now() + timeout;
}

c10::intrusive_ptr<XcclWork> XcclWindow::newWork(c10d::OpType type, const char* opName,
                                                 std::vector<at::Tensor> outputs) const {
  return c10::make_intrusive<XcclWork>(rank_, type, opName, 0, std::move(outputs),
                                       group_.sequencer().timeout());
}

}  // namespace xccl::backend

#endif  // XCCL_TORCH_HAS_WINDOW
