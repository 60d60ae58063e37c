#include "net/rendezvous/group_layout.h"

#include "common/error.h"
#include "net/rendezvous/bootstrap.h"

namespace xccl::net {

GroupLayout GroupLayout::take(Store& store, int rank, int size, const std::string& storePrefix,
                              std::chrono::milliseconds timeout) {
  XCCL_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "bad rank ", rank, " of ", size);
  // The one reading of XCCL_SHM_*: every consumer of the layout sees the same values.
  const shm::Options shm = shm::Options::fromEnvironment();
  if (size == 1) {
    Census alone;
    alone.hosts = Hosts::of({shm.identity()});
    alone.firstAbsent = shm.disabled ? 0 : -1;
    return of(rank, shm, std::move(alone));
  }
  const Bootstrap bootstrap(store, storePrefix, rank, size, timeout);
  return of(rank, shm, takeCensus(bootstrap, "hosts", shm.identity(), !shm.disabled));
}

GroupLayout GroupLayout::of(int rank, const shm::Options& shm, Census census) {
  const int size = static_cast<int>(census.hosts.hostOf.size());
  XCCL_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "bad rank ", rank, " of ", size);
  GroupLayout layout;
  layout.rank = rank;
  layout.size = size;
  layout.shm = shm;
  layout.census = std::move(census);
  return layout;
}

}  // namespace xccl::net
