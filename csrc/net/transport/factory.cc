// The per-peer choice: from the group's layout (group_layout.h), shared memory among each host's
// ranks, the network engine (XCCL_NET) among all ranks when the group spans hosts, and
// RoutedTransport joining them.
#include "net/transport/factory.h"

#include <atomic>

#include "common/env.h"
#include "common/logging.h"
#include "net/rendezvous/bootstrap.h"
#include "net/rendezvous/group_layout.h"
#include "net/transport/ofi/transport.h"
#include "net/transport/routed_transport.h"
#include "net/transport/shm_rings/transport.h"
#include "net/transport/tcp/transport.h"

namespace xccl::net {
namespace {

std::unique_ptr<Transport> createEngine(Engine engine, Store& store, int rank, int size,
                                        const NetOptions& options) {
  if (engine == Engine::kOfi) {
    NetOptions ofi = options;
    ofi.storePrefix = options.storePrefix + "/ofi";
    return ofi::createTransport(store, rank, size, ofi);
  }
  tcp::TcpOptions tcp;
  tcp.storeHost = options.storeHost;
  tcp.timeout = options.timeout;
  tcp.storePrefix = options.storePrefix + "/tcp";
  tcp.progressCpus = options.progressCpus;
  tcp.ifnames = options.ifnames;
  return std::make_unique<tcp::TcpTransport>(store, rank, size, tcp);
}

// This host's shared-memory transport, or null (shared memory disabled on some rank, this host
// has one rank, or some host could not make its file: then no host uses shared memory, so the
// whole group decides alike). Collective over the store.
std::unique_ptr<shm_rings::ShmTransport> createHostTransport(Store& store, int rank, int size,
                                                             const NetOptions& options,
                                                             const Hosts& hosts, std::string* why) {
  const int host = hosts.hostOf[rank];
  const std::vector<int> local = hosts.ranksOn(host);
  std::unique_ptr<shm_rings::ShmTransport> shm;
  std::string failure;
  if (local.size() > 1) {
    shm_rings::TransportOptions shmOptions;
    shmOptions.timeout = options.timeout;
    shmOptions.storePrefix = detail::concat(options.storePrefix, "/shm/host", host);
    shmOptions.progressCpus = options.progressCpus;
    shm = shm_rings::ShmTransport::create(store, rank, size, local, shmOptions, &failure);
    if (!shm) failure = "host '" + hosts.identities[host] + "': " + failure;
  }
  const Bootstrap bootstrap(store, options.storePrefix, rank, size, options.timeout);
  const Agreement built = bootstrap.agree("shm", failure);
  if (!built.ok()) {
    *why = built.first();
    return nullptr;
  }
  return shm;
}

}  // namespace

Engine chooseEngine(const std::string& setting) {
  if (setting == "tcp") return Engine::kTcp;
  if (setting == "ofi") {
    // A build or machine without libfabric fails here, at group creation, saying why.
    std::string why;
    XCCL_CHECK_ARG(ofi::available(&why), "XCCL_NET=ofi: ", why);
    return Engine::kOfi;
  }
  XCCL_CHECK_ARG(setting == "auto" || setting.empty(), "XCCL_NET must be auto, ofi or tcp, not '",
                 setting, "'");
  // Only RDMA hardware beats xccl's own TCP; libfabric's tcp provider is no reason to switch.
  std::string why;
  bool keyRefused = false;
  if (ofi::available(&why, /*rdmaOnly=*/true, &keyRefused)) return Engine::kOfi;
  if (keyRefused) {
    // RDMA is here but cannot be used safely with the key file: say so (once), it costs
    // bandwidth.
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) XCCL_WARN("net", "XCCL_NET=auto: tcp, not ofi: ", why);
  } else {
    XCCL_DEBUG("net", "XCCL_NET=auto: tcp (", why, ")");
  }
  return Engine::kTcp;
}

const char* engineName(Engine engine) { return engine == Engine::kOfi ? "ofi" : "tcp"; }

std::unique_ptr<Transport> createTransport(Store& store, const GroupLayout& layout,
                                           const NetOptions& options) {
  const int rank = layout.rank, size = layout.size;
  const Engine engine = chooseEngine(env::getString("XCCL_NET"));
  if (size == 1) return createEngine(engine, store, rank, size, options);

  // Where every rank is, and whether it allows shared memory (one rank's XCCL_SHM_DISABLE turns
  // it off for the group, as for the collective segment): the group's layout says.
  const Hosts& hosts = layout.census.hosts;
  std::string why;
  std::unique_ptr<shm_rings::ShmTransport> host;
  if (layout.shmDisabled()) {
    why = detail::concat("XCCL_SHM_DISABLE is set on rank ", layout.census.firstAbsent);
  } else if (hosts.count() == size) {
    why = "every host has one rank of the group";
  } else {
    host = createHostTransport(store, rank, size, options, hosts, &why);
  }
  if (host && hosts.count() == 1) return host;  // no network mesh: nobody needs one
  if (!host && rank == 0) {
    XCCL_INFO("net", "no shared memory between ranks (", why, "); every peer over ",
              engineName(engine));
  }
  std::unique_ptr<Transport> network = createEngine(engine, store, rank, size, options);
  if (!host) return network;
  std::vector<bool> onHost(size);
  for (int r = 0; r < size; ++r) onHost[r] = hosts.hostOf[r] == hosts.hostOf[rank];
  return std::make_unique<RoutedTransport>(std::move(network), std::move(host), std::move(onHost));
}

}  // namespace xccl::net
