// Making, checking and mapping the host's ring file through the store.
#include "net/transport/shm_rings/mailboxes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "common/error.h"
#include "net/regions/shm/layout.h"
#include "net/regions/shm/names.h"
#include "net/regions/shm/peer_file.h"
#include "net/rendezvous/bootstrap.h"

namespace xccl::net::shm_rings {
namespace {

constexpr uint64_t kRingMagic = 0x5843434c52494e47ull;  // "XCCLRING"

struct FileHeader {
  uint64_t magic;
  uint64_t size;
  uint64_t ringBytes;
};

// Ordered pairs of distinct ranks: a rank has no ring to itself.
size_t pairs(int size) { return static_cast<size_t>(size) * (size - 1); }

struct FileLayout {
  size_t boxes, indices, rings, total;
  // False when the sizes overflow (`ringBytes` may come from the store).
  static bool of(int size, size_t ringBytes, FileLayout* l) {
    const size_t n = static_cast<size_t>(size);
    size_t ringsBytes;
    if (__builtin_mul_overflow(pairs(size), ringBytes, &ringsBytes)) return false;
    l->boxes = shm::kPageBytes;
    l->indices = l->boxes + shm::roundUp(n * sizeof(Mailbox), shm::kPageBytes);
    l->rings = l->indices + shm::roundUp(pairs(size) * sizeof(RingIndices), shm::kPageBytes);
    return !__builtin_add_overflow(l->rings, ringsBytes, &l->total);
  }
  static size_t totalOf(int size, size_t ringBytes) {
    FileLayout l;
    return of(size, ringBytes, &l) ? l.total : SIZE_MAX;
  }
};

size_t chooseRingBytes(int size, std::string* why) {
  struct statvfs fs{};
  if (::statvfs("/dev/shm", &fs) != 0) {
    *why = "statvfs(/dev/shm) failed: " + errnoText(errno);
    return 0;
  }
  const size_t quarter = static_cast<size_t>(fs.f_bavail) * fs.f_frsize / 4;
  size_t ring = kRingBytes;
  while (ring > kMinRingBytes && FileLayout::totalOf(size, ring) > quarter) ring /= 2;
  if (FileLayout::totalOf(size, ring) > quarter) {
    *why = detail::concat("/dev/shm has too little free space for ", size,
                          " ranks' point-to-point rings; enlarge it (docker --shm-size)");
    return 0;
  }
  return ring;
}

// Local rank 0: the file, sized and reserved (running out of /dev/shm is an error here, not a
// SIGBUS later), with its header; -1 and why on failure. 0600: the others check that nobody
// else could have opened it.
int createFile(const std::string& name, int size, size_t ringBytes, std::string* why) {
  const int fd = ::shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = detail::concat("shm_open(", name, ") failed: ", errnoText(errno));
    return -1;
  }
  const size_t total = FileLayout::totalOf(size, ringBytes);
  const FileHeader header{kRingMagic, static_cast<uint64_t>(size), ringBytes};
  int rc = ::ftruncate(fd, static_cast<off_t>(total)) != 0 ? errno : 0;
  if (rc == 0) {
    do {
      rc = ::posix_fallocate(fd, 0, static_cast<off_t>(total));
    } while (rc == EINTR);
  }
  if (rc == 0 && ::pwrite(fd, &header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header)))
    rc = errno;
  if (rc != 0) {
    *why = detail::concat("sizing ", name, " to ", total, " bytes failed: ", errnoText(rc));
    ::close(fd);
    ::shm_unlink(("/" + name).c_str());
    return -1;
  }
  return fd;
}

// The other ranks: "+<ring bytes> <name>" as local rank 0 published it (names.h bounds the size
// to what chooseRingBytes could pick), then the file itself.
int openPublished(const shm::Published& published, int size, size_t* ringBytes, std::string* name,
                  std::string* why) {
  const uint64_t ring = published.sizes[0];
  if ((ring & (ring - 1)) != 0) {
    *why = detail::concat("local rank 0 published rings of ", ring, " bytes: not a power of two");
    return -1;
  }
  *ringBytes = ring;
  *name = published.name;
  const size_t total = FileLayout::totalOf(size, ring);
  if (total == SIZE_MAX) {
    *why = detail::concat("rings of ", ring, " bytes for ", size, " ranks overflow a file size");
    return -1;
  }
  return shm::openPeerFile(*name, kRingFilePrefix, total, why);
}

}  // namespace

std::unique_ptr<Mailboxes> Mailboxes::create(Store& store, const std::string& prefix, int rank,
                                             int size, std::chrono::milliseconds timeout,
                                             std::string* why) {
  const Bootstrap bootstrap(store, prefix, rank, size, timeout);
  std::string failure, name;
  size_t ringBytes = 0;
  int fd = -1;
  if (rank == 0) {
    ringBytes = chooseRingBytes(size, &failure);
    if (ringBytes != 0) {
      name = shm::newFileName("p2p-", store);
      fd = createFile(name, size, ringBytes, &failure);
    }
    bootstrap.broadcast("name", 0,
                        toBytes(fd >= 0 ? shm::formatPublished({ringBytes}, name)
                                        : shm::formatRefusal(failure)));
  } else {
    const std::string record = toString(bootstrap.broadcast("name", 0, {}));
    try {
      const shm::Published published =
          shm::parsePublished(record, {{"ring bytes", kMinRingBytes, kRingBytes}});
      if (!published.made) {
        failure = "local rank 0: " + published.why;
      } else {
        fd = openPublished(published, size, &ringBytes, &name, &failure);
      }
    } catch (const Error& e) {
      failure = e.what();
    }
  }
  std::unique_ptr<Mailboxes> boxes(new Mailboxes(size, ringBytes));
  if (fd >= 0) {
    FileLayout layout{};
    FileLayout::of(size, ringBytes, &layout);  // checked above (rank 0: chose it)
    void* base = ::mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (base == MAP_FAILED) {
      failure = "mmap of " + name + " failed: " + errnoText(errno);
    } else {
      boxes->base_ = static_cast<uint8_t*>(base);
      boxes->mappedBytes_ = layout.total;
      boxes->boxes_ = reinterpret_cast<Mailbox*>(boxes->base_ + layout.boxes);
      boxes->indices_ = reinterpret_cast<RingIndices*>(boxes->base_ + layout.indices);
      boxes->rings_ = boxes->base_ + layout.rings;
      const auto* header = reinterpret_cast<const FileHeader*>(base);
      if (header->magic != kRingMagic || header->size != static_cast<uint64_t>(size) ||
          header->ringBytes != ringBytes) {
        failure = name + " does not hold the header local rank 0 wrote";
      }
      boxes->boxes_[rank].pid.store(static_cast<int32_t>(::getpid()), std::memory_order_release);
    }
  }
  // Every rank says how mapping went; rank 0 unlinks the name on every path after that.
  Agreement mapped;
  try {
    mapped = bootstrap.agree("mapped", failure);
  } catch (...) {
    if (rank == 0 && !name.empty()) ::shm_unlink(("/" + name).c_str());
    throw;
  }
  if (rank == 0 && !name.empty()) ::shm_unlink(("/" + name).c_str());
  if (!mapped.ok()) {
    *why = mapped.first();
    return nullptr;
  }
  return boxes;
}

Mailboxes::~Mailboxes() {
  if (base_ != nullptr) ::munmap(base_, mappedBytes_);
}

Ring Mailboxes::ring(int from, int to) const {
  const size_t pair = static_cast<size_t>(from) * (size_ - 1) + (to < from ? to : to - 1);
  return Ring(&indices_[pair], rings_ + pair * ringBytes_, ringBytes_);
}

}  // namespace xccl::net::shm_rings
