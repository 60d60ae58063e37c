// XcclWindow's writes (window.h): put, put_pages, put_strided and signal. Each checks everything
// first (ValueError, nothing written), then turns its request into contiguous pieces and write()
// moves them: memcpys into the mapping of a rank of this host, or iwrites to another host's,
// completing one Work together.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/core/group_core.h"
#include "backend/core/torch_error.h"
#include "backend/window/window.h"

#if XCCL_TORCH_HAS_WINDOW

namespace xccl::backend {
namespace {

// Adjacent pieces (source and target both continuing) become one: pages listed in order, or the
// rows of a tensor that is contiguous after all, cost one copy or iwrite.
void append(std::vector<WindowPiece>& pieces, const uint8_t* src, size_t dstOffset, size_t bytes) {
  if (bytes == 0) return;
  if (!pieces.empty()) {
    WindowPiece& last = pieces.back();
    if (last.src + last.bytes == src && last.dstOffset + last.bytes == dstOffset) {
      last.bytes += bytes;
      return;
    }
  }
  pieces.push_back({src, dstOffset, bytes});
}

// The page numbers in a list given as a 1-D int64 CPU tensor (python/xccl/window.py converts
// lists), copied first and each checked against `count` pages: the caller's tensor may change
// under us (the GIL is released), so only the copy that was checked is used.
std::vector<int64_t> pageList(const at::Tensor& pages, const char* which, int64_t count) {
  TORCH_CHECK_VALUE(pages.device().is_cpu() && pages.scalar_type() == at::kLong &&
                        pages.dim() == 1 && pages.is_contiguous(),
                    "xccl put_pages: ", which, " must be a list of ints or a 1-D int64 CPU tensor");
  const int64_t* data = pages.const_data_ptr<int64_t>();
  std::vector<int64_t> list(data, data + pages.numel());
  for (size_t i = 0; i < list.size(); ++i) {
    TORCH_CHECK_VALUE(list[i] >= 0 && list[i] < count, "xccl put_pages: ", which, "[", i,
                      "] = ", list[i], " is outside the ", count, " pages there");
  }
  return list;
}

// `a * b`, or ValueError naming `what` when it does not fit int64 (every user number is checked
// before it becomes an address).
int64_t product(int64_t a, int64_t b, const char* opName, const char* what) {
  int64_t out = 0;
  TORCH_CHECK_VALUE(!__builtin_mul_overflow(a, b, &out), "xccl ", opName, ": ", what, " (", a,
                    " * ", b, ") does not fit in 64 bits");
  return out;
}

// Whether the bytes [a, a + aBytes) and [b, b + bBytes) share any byte.
bool overlaps(const uint8_t* a, size_t aBytes, const uint8_t* b, size_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

// Copies `pieces` into `into`, reading every source as it was before the call even when the
// sources lie in the target memory (a put from a view of the window, ours or a peer's from
// map_remote_tensor). One piece is a memmove; several are staged first when the span of the
// sources meets the span written, since one piece's write could overwrite a later one's source.
void copyInto(uint8_t* into, const std::vector<WindowPiece>& pieces) {
  if (pieces.empty()) return;
  uintptr_t srcLow = UINTPTR_MAX, srcHigh = 0, dstLow = UINTPTR_MAX, dstHigh = 0;
  for (const WindowPiece& piece : pieces) {
    const auto from = reinterpret_cast<uintptr_t>(piece.src);
    const auto to = reinterpret_cast<uintptr_t>(into + piece.dstOffset);
    srcLow = std::min(srcLow, from);
    srcHigh = std::max(srcHigh, from + piece.bytes);
    dstLow = std::min(dstLow, to);
    dstHigh = std::max(dstHigh, to + piece.bytes);
  }
  if (srcLow >= dstHigh || dstLow >= srcHigh) {
    for (const WindowPiece& piece : pieces) {
      std::memcpy(into + piece.dstOffset, piece.src, piece.bytes);
    }
  } else if (pieces.size() == 1) {
    std::memmove(into + pieces[0].dstOffset, pieces[0].src, pieces[0].bytes);
  } else {
    std::vector<uint8_t> staged;
    for (const WindowPiece& piece : pieces) {
      staged.insert(staged.end(), piece.src, piece.src + piece.bytes);
    }
    const uint8_t* from = staged.data();
    for (const WindowPiece& piece : pieces) {
      std::memcpy(into + piece.dstOffset, from, piece.bytes);
      from += piece.bytes;
    }
  }
}

}  // namespace

size_t XcclWindow::checkTarget(const char* opName, const Registered& reg, int dst,
                               const at::Tensor& src) const {
  TORCH_CHECK_VALUE(!src.is_cuda(), "xccl window ", opName,
                    ": CUDA windows are not supported yet (put CPU tensors)");
  TORCH_CHECK_VALUE(src.device().is_cpu() && src.layout() == c10::kStrided, "xccl window ", opName,
                    ": the source must be a dense CPU tensor");
  const PeerWindow& window = reg.peers[dst];
  TORCH_CHECK_VALUE(src.scalar_type() == window.dtype, "xccl window ", opName, ": the source is ",
                    src.scalar_type(), " but rank ", dst, "'s window is ", window.dtype);
  // The window's size in bytes fits int64, so any element offset within it converts to bytes
  // without overflow (the size came from the peer through the store).
  const auto elem = static_cast<int64_t>(src.element_size());
  TORCH_CHECK_VALUE(window.numel >= 0, "xccl window ", opName, ": rank ", dst,
                    " registered a window of ", window.numel, " elements");
  product(window.numel, elem, opName, "the target window's bytes");
  return static_cast<size_t>(elem);
}

XcclWindow::WorkPtr XcclWindow::put(const at::Tensor& tensor, int64_t dstRank,
                                    int64_t targetOffsetNelems, bool asyncOp,
                                    const c10d::PutOptions& opts) {
  checkRank(dstRank, "put");
  std::shared_ptr<Registered> reg = current("put");
  const int dst = static_cast<int>(dstRank);
  const size_t elem = checkTarget("put", *reg, dst, tensor);
  const int64_t windowNumel = reg->peers[dst].numel;
  TORCH_CHECK_VALUE(targetOffsetNelems >= 0 && targetOffsetNelems <= windowNumel &&
                        tensor.numel() <= windowNumel - targetOffsetNelems,
                    "xccl window put: ", tensor.numel(), " elements at offset ", targetOffsetNelems,
                    " do not fit rank ", dst, "'s window of ", windowNumel, " elements");
  // Both within the window, whose bytes fit int64 (checkTarget).
  const size_t dstOffset = static_cast<size_t>(targetOffsetNelems) * elem;
  const size_t bytes = static_cast<size_t>(tensor.numel()) * elem;
  const net::Deadline deadline = deadlineOf(opts.timeout);
  // A non-contiguous source goes in row-major order, as tensor.contiguous() would give it: into
  // this host's peer straight from its strides (copy_ into a view of the target), to another
  // host, or when the source's memory is the target's own (a view of the window), through a
  // contiguous copy, so no element is read after it was overwritten.
  if (!tensor.is_contiguous() && reg->region->maps(dst)) {
    uint8_t* into = reg->region->mapping(dst)->data();
    const c10::Storage& storage = tensor.storage();
    if (!overlaps(static_cast<const uint8_t*>(storage.data()), storage.nbytes(), into + dstOffset,
                  bytes)) {
      checkFits("put", *reg, dst, {{nullptr, dstOffset, bytes}});
      checkAlive(dst);
      at::Tensor target = at::from_blob(into + dstOffset, tensor.sizes(), tensor.options());
      target.copy_(tensor);
      auto work = newWork(c10d::OpType::SEND, "put", {tensor});
      work->succeed();
      return work;
    }
  }
  at::Tensor src = tensor.contiguous();
  std::vector<WindowPiece> pieces;
  append(pieces, static_cast<const uint8_t*>(src.const_data_ptr()), dstOffset, src.nbytes());
  return write("put", *reg, dst, pieces, {src}, asyncOp, deadline);
}

XcclWindow::WorkPtr XcclWindow::putPages(const at::Tensor& src, const at::Tensor& srcPages,
                                         int64_t dstRank, const at::Tensor& dstPages,
                                         int64_t pageElems, bool asyncOp) {
  checkRank(dstRank, "put_pages");
  std::shared_ptr<Registered> reg = current("put_pages");
  const int dst = static_cast<int>(dstRank);
  const size_t elem = checkTarget("put_pages", *reg, dst, src);
  TORCH_CHECK_VALUE(src.is_contiguous(), "xccl put_pages: the source must be contiguous");
  TORCH_CHECK_VALUE(pageElems > 0, "xccl put_pages: page_elems must be positive, not ", pageElems);
  TORCH_CHECK_VALUE(srcPages.numel() == dstPages.numel(), "xccl put_pages: src_pages has ",
                    srcPages.numel(), " pages but dst_pages ", dstPages.numel());
  const int64_t pageBytes =
      product(pageElems, static_cast<int64_t>(elem), "put_pages", "page_elems in bytes");
  const std::vector<int64_t> from = pageList(srcPages, "src_pages", src.numel() / pageElems);
  const std::vector<int64_t> to =
      pageList(dstPages, "dst_pages", reg->peers[dst].numel / pageElems);
  const auto* base = static_cast<const uint8_t*>(src.const_data_ptr());
  std::vector<WindowPiece> pieces;
  pieces.reserve(from.size());
  for (size_t i = 0; i < from.size(); ++i) {
    // A page index below count = numel / pageElems ends within its tensor: no overflow left,
    // but the products are checked all the same.
    const int64_t srcOffset = product(from[i], pageBytes, "put_pages", "a source page's offset");
    const int64_t dstOffset = product(to[i], pageBytes, "put_pages", "a target page's offset");
    append(pieces, base + srcOffset, static_cast<size_t>(dstOffset),
           static_cast<size_t>(pageBytes));
  }
  return write("put_pages", *reg, dst, pieces, {src}, asyncOp, deadlineOf(c10d::kUnsetTimeout));
}

XcclWindow::WorkPtr XcclWindow::putStrided(const at::Tensor& src, int64_t dstRank,
                                           int64_t targetOffsetNelems, int64_t dstRowStrideNelems,
                                           bool asyncOp) {
  checkRank(dstRank, "put_strided");
  std::shared_ptr<Registered> reg = current("put_strided");
  const int dst = static_cast<int>(dstRank);
  const size_t elem = checkTarget("put_strided", *reg, dst, src);
  TORCH_CHECK_VALUE(src.dim() == 2, "xccl put_strided: the source must be 2-D, not ", src.dim(),
                    "-D");
  const int64_t rows = src.size(0), cols = src.size(1);
  TORCH_CHECK_VALUE(cols <= 1 || src.stride(1) == 1,
                    "xccl put_strided: each source row must be contiguous (stride(1) == 1)");
  TORCH_CHECK_VALUE(rows <= 1 || dstRowStrideNelems >= cols, "xccl put_strided: rows of ", cols,
                    " elements need dst_row_stride_nelems >= ", cols, ", not ", dstRowStrideNelems);
  // The last row ends at offset + (rows - 1) * stride + cols: every step checked, since a
  // stride near 2^63 wraps to an end inside the window and would write before it.
  const int64_t windowNumel = reg->peers[dst].numel;
  int64_t end = targetOffsetNelems;
  const bool overflow = rows > 0 && (__builtin_mul_overflow(rows - 1, dstRowStrideNelems, &end) ||
                                     __builtin_add_overflow(end, cols, &end) ||
                                     __builtin_add_overflow(end, targetOffsetNelems, &end));
  TORCH_CHECK_VALUE(targetOffsetNelems >= 0 && !overflow && end <= windowNumel,
                    "xccl put_strided: ", rows, " rows of ", cols, " elements at offset ",
                    targetOffsetNelems, ", stride ", dstRowStrideNelems, " end ",
                    overflow ? std::string("past element 2^63")
                             : "at element " + std::to_string(end),
                    ", past rank ", dst, "'s window of ", windowNumel, " elements");
  // Every row now lies within the window (bytes fit int64) and within the source tensor.
  const auto* base = static_cast<const uint8_t*>(src.const_data_ptr());
  const size_t rowBytes = static_cast<size_t>(cols) * elem;
  std::vector<WindowPiece> pieces;
  for (int64_t i = 0; i < rows; ++i) {
    append(pieces, base + static_cast<size_t>(i * src.stride(0)) * elem,
           static_cast<size_t>(targetOffsetNelems + i * dstRowStrideNelems) * elem, rowBytes);
  }
  return write("put_strided", *reg, dst, pieces, {src}, asyncOp, deadlineOf(c10d::kUnsetTimeout));
}

void XcclWindow::checkFits(const char* opName, const Registered& reg, int dst,
                           const std::vector<WindowPiece>& pieces) const {
  // The target's real size: its mapping here, or what it registered with the transport.
  const size_t size =
      reg.region->maps(dst) ? reg.region->mapping(dst)->bytes() : reg.peers[dst].remote.bytes;
  for (const WindowPiece& piece : pieces) {
    size_t end = 0;
    TORCH_CHECK_VALUE(!__builtin_add_overflow(piece.dstOffset, piece.bytes, &end) && end <= size,
                      "xccl window ", opName, ": ", piece.bytes, " bytes at byte ", piece.dstOffset,
                      " do not fit rank ", dst, "'s window of ", size, " bytes");
  }
}

XcclWindow::WorkPtr XcclWindow::write(const char* opName, const Registered& reg, int dst,
                                      const std::vector<WindowPiece>& pieces,
                                      std::vector<at::Tensor> keep, bool asyncOp,
                                      net::Deadline deadline) {
  // The callers checked already; this holds whatever a caller or a peer's numbers got wrong.
  checkFits(opName, reg, dst, pieces);
  auto work = newWork(c10d::OpType::SEND, opName, keep);
  if (reg.region->maps(dst)) {
    // This host: copies straight into the peer's mapping, done before we return.
    checkAlive(dst);
    copyInto(reg.region->mapping(dst)->data(), pieces);
    work->succeed();
    return work;
  }
  // Another host: one iwrite per piece (signal 0: none), one completion for all of them.
  struct Batch {
    std::atomic<size_t> left;
    std::mutex mutex;
    std::string error;
  };
  auto batch = std::make_shared<Batch>();
  batch->left = pieces.size();
  const std::string what = std::string(opName) + " to rank " + std::to_string(dst);
  Executor* executor = group_.sequencer().executor();
  auto onDone = [batch, work, executor, what](const net::Request& request) {
    if (request.state() == net::Request::State::kFailed) {
      std::lock_guard<std::mutex> guard(batch->mutex);
      if (batch->error.empty()) batch->error = what + " failed: " + request.errorMessage();
    }
    if (batch->left.fetch_sub(1) != 1) return;
    executor->complete([batch, work] {
      if (batch->error.empty()) {
        work->succeed();
      } else {
        work->fail(ErrorKind::kPeerFailure, batch->error);
      }
    });
  };
  if (pieces.empty()) {
    work->succeed();
    return work;
  }
  std::vector<net::RequestPtr> requests;
  requests.reserve(pieces.size());
  for (const WindowPiece& piece : pieces) {
    requests.push_back(group_.membership().transport()->iwrite(dst, piece.src, piece.bytes,
                                                               reg.peers[dst].remote,
                                                               piece.dstOffset,
                                                               /*signal=*/0, onDone));
  }
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auto& pending = pending_[dst];
    std::erase_if(pending, [](const net::RequestPtr& r) { return r->done(); });
    pending.insert(pending.end(), requests.begin(), requests.end());
  }
  if (!asyncOp) {
    try {
      group_.membership().transport()->wait(requests, deadline, what);
    } catch (const Error& e) {
      throwTorchError(e.kind(), e.what());
    }
  }
  return work;
}

void XcclWindow::fence(int peer, net::Deadline deadline, const std::string& what) {
  std::vector<net::RequestPtr> pending;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    pending.swap(pending_[peer]);
  }
  std::erase_if(pending, [](const net::RequestPtr& r) { return r->done(); });
  if (!pending.empty()) group_.membership().transport()->wait(pending, deadline, what);
}

XcclWindow::WorkPtr XcclWindow::signal(int64_t peerRank, bool asyncOp,
                                       const c10d::SignalOptions& opts) {
  checkRank(peerRank, "signal");
  std::shared_ptr<Registered> reg = current("signal");
  const int peer = static_cast<int>(peerRank);
  auto work = newWork(c10d::OpType::SEND, "signal");
  if (reg->region->maps(peer)) {
    // Our puts there were memcpys on this thread, already done: the release increment orders them.
    checkAlive(peer);
    reg->region->signal(peer);
    work->succeed();
    return work;
  }
  const std::string what = "signal to rank " + std::to_string(peer);
  const net::Deadline deadline = deadlineOf(opts.timeout);
  try {
    // Another host: the transport may deliver a later write first, so the signal leaves only
    // once every earlier put to `peer` completed (its bytes visible there).
    fence(peer, deadline, what);
    Executor* executor = group_.sequencer().executor();
    net::RequestPtr request = group_.membership().transport()->iwrite(
        peer, nullptr, 0, reg->peers[peer].remote, 0, signalValue_,
        [work, executor, what](const net::Request& r) {
          const bool ok = r.state() == net::Request::State::kDone;
          const std::string error = ok ? "" : what + " failed: " + r.errorMessage();
          executor->complete([work, ok, error] {
            if (ok) {
              work->succeed();
            } else {
              work->fail(ErrorKind::kPeerFailure, error);
            }
          });
        });
    if (!asyncOp) group_.membership().transport()->wait({request}, deadline, what);
  } catch (const Error& e) {
    throwTorchError(e.kind(), e.what());
  }
  return work;
}

}  // namespace xccl::backend

#endif  // XCCL_TORCH_HAS_WINDOW
