// Segment creation: agreement through the store, sizing against /dev/shm, create/map/unlink.
#include "net/regions/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "common/env.h"
#include "common/error.h"
#include "common/logging.h"
#include "net/regions/shm/futex.h"
#include "net/regions/shm/layout.h"
#include "net/regions/shm/names.h"
#include "net/regions/shm/peer_file.h"
#include "net/rendezvous/bootstrap.h"
#include "net/rendezvous/hosts.h"
#include "topo/host.h"

namespace xccl::net::shm {
namespace {

constexpr const char* kShmDirectory = "/dev/shm";  // where glibc's shm_open puts names

std::string mib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", bytes / 1048576.0);
  return text;
}

// Chooses the slot size for `size` ranks, or returns 0 with the reason.
size_t chooseSlotBytes(int size, const Options& options, std::string* why) {
  struct statvfs fs{};
  if (::statvfs(kShmDirectory, &fs) != 0) {
    *why = detail::concat("statvfs(", kShmDirectory, ") failed: ", errnoText(errno));
    return 0;
  }
  const size_t freeBytes = static_cast<size_t>(fs.f_bavail) * fs.f_frsize;
  if (options.slotBytes != 0) {
    const size_t slot = roundUp(std::max(options.slotBytes, kMinSlotBytes), kPageBytes);
    const size_t need = Layout::of(size, slot).totalBytes;
    if (need > freeBytes) {
      *why = detail::concat("the segment needs ", mib(need), " (slot ", slot, " bytes x 2 x ", size,
                            " ranks) but ", kShmDirectory, " has ", mib(freeBytes),
                            " free; lower XCCL_SHM_SLOT_BYTES or enlarge ", kShmDirectory);
      return 0;
    }
    return slot;
  }
  // Leave half of the free space to other groups and processes.
  size_t slot = kDefaultSlotBytes;
  while (slot > kMinAdaptiveSlotBytes && Layout::of(size, slot).totalBytes > freeBytes / 2) {
    slot /= 2;
  }
  const size_t need = Layout::of(size, slot).totalBytes;
  if (need > freeBytes / 2) {
    *why = detail::concat(kShmDirectory, " has ", mib(freeBytes), " free, too little for ", size,
                          " ranks (needs ", mib(2 * need),
                          " free with the smallest slots); enlarge it (docker --shm-size, "
                          "or --ipc=host)");
    return 0;
  }
  return slot;
}

// Each rank's pool: the asked-for bytes in whole pages, at most half of /dev/shm's free space
// shared among the ranks (pages are reserved only when tensors use them, so this bounds what the
// pools can ever take, not what they take now). 0 when statvfs fails: no pools, nothing else lost.
size_t choosePoolBytes(int size, const Options& options) {
  struct statvfs fs{};
  if (options.poolBytes == 0 || ::statvfs(kShmDirectory, &fs) != 0) return 0;
  const size_t freeBytes = static_cast<size_t>(fs.f_bavail) * fs.f_frsize;
  const size_t cap = freeBytes / 2 / static_cast<size_t>(size);
  return std::min(options.poolBytes, cap) / kPageBytes * kPageBytes;
}

// Reserves [offset, offset + bytes) of the file now, so that running out of /dev/shm is an error
// here rather than a SIGBUS at the first touch. The caller's NUMA policy places the pages.
std::string reserve(int fd, size_t offset, size_t bytes) {
  int rc;
  do {
    rc = ::posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes));
  } while (rc == EINTR);
  if (rc == 0) return "";
  return detail::concat("could not reserve ", mib(bytes), " in ", kShmDirectory, ": ",
                        errnoText(rc));
}

// Rank 0: creates and sizes the segment and writes the header; returns the fd, or -1 and why.
int createFile(const std::string& name, int size, size_t slotBytes, size_t poolBytes,
               std::string* why) {
  const Layout layout = Layout::of(size, slotBytes, poolBytes);
  int fd = ::shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = detail::concat("shm_open(", name, ") failed: ", errnoText(errno));
    return -1;
  }
  std::string failure;
  if (::ftruncate(fd, static_cast<off_t>(layout.totalBytes)) != 0) {
    failure =
        detail::concat("ftruncate to ", layout.totalBytes, " bytes failed: ", errnoText(errno));
  } else {
    failure = reserve(fd, 0, layout.slotsOffset);
  }
  if (failure.empty()) {
    Header header{kHeaderMagic, static_cast<uint64_t>(size), slotBytes, layout.totalBytes,
                  poolBytes};
    if (::pwrite(fd, &header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header))) {
      failure = detail::concat("writing the header failed: ", errnoText(errno));
    }
  }
  if (!failure.empty()) {
    ::close(fd);
    ::shm_unlink(("/" + name).c_str());
    *why = failure;
    return -1;
  }
  return fd;
}

// The other ranks: "+<slot bytes> <pool bytes> <name>" as rank 0 published it, checked before
// anything is opened (sizes rank 0 could have chosen, a layout that does not overflow), then the
// file itself (peer_file.h). The descriptor, or -1 and why.
int openPublished(const Published& published, int size, size_t* slotBytes, size_t* poolBytes,
                  std::string* name, std::string* why) {
  const uint64_t slot = published.sizes[0], pool = published.sizes[1];
  Layout layout{};
  if (slot % kPageBytes != 0 || pool % kPageBytes != 0 ||
      !Layout::checkedOf(size, slot, pool, &layout)) {
    *why = detail::concat("rank 0 published a segment of ", slot, "-byte slots and ", pool,
                          "-byte pools: not whole pages, or too large for ", size, " ranks");
    return -1;
  }
  *slotBytes = slot;
  *poolBytes = pool;
  *name = published.name;
  return openPeerFile(*name, kNamePrefix, layout.totalBytes, why);
}

// Why the ranks of `census` cannot share one segment, looking at ranks in order: the first that
// disabled shared memory or is not on rank 0's host; "" when none.
std::string whyNotOneHost(const Census& census) {
  const Hosts& hosts = census.hosts;
  for (int r = 0; r < static_cast<int>(hosts.hostOf.size()); ++r) {
    if (r == census.firstAbsent) return detail::concat("XCCL_SHM_DISABLE is set on rank ", r);
    if (hosts.hostOf[r] != hosts.hostOf[0]) {
      return detail::concat("ranks 0 and ", r, " are on different hosts ('", hosts.identities[0],
                            "' vs '", hosts.identities[hosts.hostOf[r]], "')");
    }
  }
  return "";
}

}  // namespace

Options Options::fromEnvironment() {
  Options options;
  options.disabled = env::getBool("XCCL_SHM_DISABLE");
  options.hostIdentity = env::getString("XCCL_SHM_HOST_ID");
  // On by default: the probe lets only the ranks' common parent read this process where Yama
  // asks for a declared reader (cma.h); XCCL_SHM_CMA=0 skips the probe and PR_SET_PTRACER.
  options.cma = env::getBool("XCCL_SHM_CMA");
  if (!env::getString("XCCL_SHM_SLOT_BYTES").empty()) {
    int64_t slot = env::getInt("XCCL_SHM_SLOT_BYTES");
    XCCL_CHECK_ARG(slot >= static_cast<int64_t>(kMinSlotBytes),
                   "XCCL_SHM_SLOT_BYTES must be at least ", kMinSlotBytes, ", got ", slot);
    options.slotBytes = static_cast<size_t>(slot);
  }
  const bool poolSet = !env::getString("XCCL_SHM_POOL_BYTES").empty();
  options.poolBytes =
      poolSet ? static_cast<size_t>(env::getInt("XCCL_SHM_POOL_BYTES")) : kDefaultPoolBytes;
  return options;
}

std::string Options::identity() const {
  return hostIdentity.empty() ? topo::hostIdentity() : hostIdentity;
}

bool allOnOneHost(Store& store, int rank, int size, std::chrono::milliseconds timeout,
                  const std::string& storePrefix, const std::string& identity) {
  const Bootstrap bootstrap(store, storePrefix, rank, size, timeout);
  return Hosts::of(bootstrap.allGather("host", identity)).count() == 1;
}

std::unique_ptr<Segment> Segment::create(Store& store, int rank, int size, const Options& options,
                                         std::string* whyUnavailable) {
  XCCL_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "bad rank ", rank, " of ", size);
  const Bootstrap bootstrap(store, options.storePrefix, rank, size, options.timeout);
  // Everyone says where it is and whether it takes part; every rank decides from the same list.
  const Census census = takeCensus(bootstrap, "host", options.identity(), !options.disabled);
  return create(store, rank, size, options, census, whyUnavailable);
}

std::unique_ptr<Segment> Segment::create(Store& store, int rank, int size, const Options& options,
                                         const Census& census, std::string* whyUnavailable) {
  XCCL_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "bad rank ", rank, " of ", size);
  XCCL_CHECK_ARG(static_cast<int>(census.hosts.hostOf.size()) == size, "a census of ",
                 census.hosts.hostOf.size(), " ranks for a segment of ", size);
  const Bootstrap bootstrap(store, options.storePrefix, rank, size, options.timeout);

  // 1. Every rank decides from the same census (the same list on every rank).
  std::string why = whyNotOneHost(census);
  if (!why.empty()) {
    *whyUnavailable = why;
    return nullptr;
  }

  // 2. Rank 0 sizes and creates the segment and publishes "+<slot bytes> <pool bytes> <name>" or
  // "-<why>".
  int fd = -1;
  std::string name;
  size_t slotBytes = 0, poolBytes = 0;
  if (rank == 0) {
    slotBytes = chooseSlotBytes(size, options, &why);
    if (slotBytes != 0) {
      name = newFileName("", store);
      poolBytes = choosePoolBytes(size, options);
      fd = createFile(name, size, slotBytes, poolBytes, &why);
    }
    bootstrap.broadcast("name", 0,
                        toBytes(fd >= 0 ? formatPublished({slotBytes, poolBytes}, name)
                                        : formatRefusal(why)));
  } else {
    const std::string record = toString(bootstrap.broadcast("name", 0, {}));
    Published published;
    try {
      published = parsePublished(record, {{"slot bytes", kMinSlotBytes, kMaxRecordBytes},
                                          {"pool bytes", 0, kMaxRecordBytes}});
    } catch (const Error& e) {
      why = e.what();  // agreed below like a failed mapping, so rank 0 does not wait for us
    }
    if (why.empty() && !published.made) {
      *whyUnavailable = "rank 0: " + published.why;
      return nullptr;
    }
    if (published.made) fd = openPublished(published, size, &slotBytes, &poolBytes, &name, &why);
  }
  if (rank == 0 && fd < 0) {
    *whyUnavailable = why;
    return nullptr;
  }

  // 3. Everyone maps it, reserves the pages of its own slots, and agrees. Rank 0 unlinks the name
  // once every rank said how it went (mapped or not), on every path, so no name outlives create().
  std::unique_ptr<Segment> segment(new Segment(rank, size, slotBytes, poolBytes, name));
  if (fd >= 0) {
    try {
      segment->map(fd);
      const Layout layout = Layout::of(size, slotBytes);
      why = reserve(fd, layout.slotsOf(rank, slotBytes), 2 * slotBytes);
    } catch (const Error& e) {
      why = e.what();
    }
    ::close(fd);
  }
  Agreement mapped;
  try {
    mapped = bootstrap.agree("mapped", why);
  } catch (...) {
    if (rank == 0) ::shm_unlink(("/" + name).c_str());
    throw;
  }
  if (rank == 0) ::shm_unlink(("/" + name).c_str());
  why = mapped.first();
  if (!why.empty()) {
    *whyUnavailable = why;
    return nullptr;
  }
  // 4. Whether the ranks can read each other's memory (process_vm_readv): all pairs, or nobody.
  segment->cma_ = CmaPeers::probe(bootstrap, options.cma,
                                  options.cmaPid ? options.cmaPid : getpid(), &segment->cmaWhyNot_);
  if (rank == 0 && !segment->cma_) {
    XCCL_INFO("shm",
              "single-copy path (process_vm_readv) off, large messages go through the slots: ",
              segment->cmaWhyNot_, options.cma ? " (XCCL_SHM_CMA=0 skips the probe)" : "");
  }
  if (rank == 0) {
    XCCL_INFO("shm", "segment ", name, " for ", size, " ranks: ", size * 2, " slots of ", slotBytes,
              " bytes (", mib(segment->totalBytes()), "), pools of ", mib(poolBytes),
              " per rank (reserved as used), unlinked");
  }
  return segment;
}

Segment::Segment(int rank, int size, size_t slotBytes, size_t poolBytes, std::string name)
    : rank_(rank),
      size_(size),
      slotBytes_(slotBytes),
      poolBytes_(poolBytes),
      name_(std::move(name)),
      spin_(size) {}

Segment::~Segment() {
  if (base_ != nullptr) ::munmap(base_, totalBytes_);
}

void Segment::map(int fd) {
  const Layout layout = Layout::of(size_, slotBytes_, poolBytes_);
  struct stat st{};
  XCCL_SYSCHECK(::fstat(fd, &st), "fstat of the shared-memory segment");
  XCCL_CHECK_ARG(static_cast<size_t>(st.st_size) == layout.totalBytes, "segment ", name_, " has ",
                 st.st_size, " bytes, expected ", layout.totalBytes);
  // The header, flags and slots; the pools get their own mapping below.
  void* base = ::mmap(nullptr, layout.poolsOffset, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) detail::throwSystemError(__FILE__, __LINE__, "mmap of " + name_, errno);
  base_ = static_cast<uint8_t*>(base);
  totalBytes_ = layout.poolsOffset;
  flags_ = reinterpret_cast<RankFlag*>(base_ + layout.flagsOffset);
  slots_ = base_ + layout.slotsOffset;
  const auto* header = reinterpret_cast<const Header*>(base_);
  XCCL_CHECK_ARG(header->magic == kHeaderMagic && header->size == static_cast<uint64_t>(size_) &&
                     header->slotBytes == slotBytes_ && header->totalBytes == layout.totalBytes &&
                     header->poolBytes == poolBytes_,
                 "segment ", name_, " does not hold the header rank 0 wrote");
  // A separate mapping, owned with shared_ptr: tensors from the pool may outlive this segment.
  if (poolBytes_ > 0)
    pool_ = std::make_shared<Pool>(fd, layout.poolsOffset, poolBytes_, size_, rank_);
}

// The same ordering argument as setDirect (flags.cc): the step's publish releases the word and
// the slot-reuse invariant keeps it until every reader is past the step.
void Segment::setAddress(uint32_t step, uint64_t address) {
  flags_[rank_].address[step & 1].store(address, std::memory_order_relaxed);
}

uint64_t Segment::addressOf(int rank, uint32_t step) const {
  return flags_[rank].address[step & 1].load(std::memory_order_relaxed);
}

uint8_t* Segment::slot(int rank, uint32_t step) const {
  return slots_ + (2 * static_cast<size_t>(rank) + (step & 1)) * slotBytes_;
}

void Segment::markBroken(const std::string& reason) {
  if (!broken_.empty()) return;
  broken_ = reason;
  if (flags_ == nullptr) return;
  RankFlag& flag = flags_[rank_];
  const int blamed = blamed_ >= 0 && blamed_ < size_ ? blamed_ : rank_;
  flag.failed.store(static_cast<uint32_t>(blamed) + 1, std::memory_order_seq_cst);
  futexWakeAll(&flag.arrived);  // peers asleep on this rank look at `failed` at once
}

void Segment::checkUsable(const std::string& what) const {
  if (!broken_.empty()) {
    XCCL_THROW(ErrorKind::kAborted, what,
               ": the shared-memory segment is unusable after an "
               "earlier failure: ",
               broken_);
  }
}

}  // namespace xccl::net::shm
