#include "net/transport/ofi/fabric.h"

#include <arpa/inet.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>

#include "common/env.h"
#include "common/logging.h"
#include "net/rendezvous/net_key.h"
#include "net/transport/address.h"
#include "net/transport/ofi/wire.h"

namespace xccl::net::ofi {
namespace {

constexpr uint32_t kApiVersion = FI_VERSION(1, 9);  // fi_context2 and FI_MR_* mode bits
// A header with up to 16 KiB - 64 bytes of inline payload (ofi_rxm's buffer size, its most).
constexpr size_t kInjectBytes = 16384;

// What every transport endpoint needs. The MR modes listed are those this transport honours
// (memory.cc): a provider asking for others is not offered.
fi_info* makeHints(const std::string& provider) {
  fi_info* hints = fi_allocinfo();
  XCCL_CHECK(hints != nullptr, "fi_allocinfo failed");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_SEND | FI_RECV | FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  // The progress thread reads the CQ while callers post sends and receives.
  hints->domain_attr->threading = FI_THREAD_SAFE;
  hints->domain_attr->av_type = FI_AV_TABLE;
  if (!provider.empty()) hints->fabric_attr->prov_name = ::strdup(provider.c_str());
  return hints;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

// Whether `info` is bound to the interface address `local` (same IP, any port).
bool sameAddress(const fi_info* info, const Address& local) {
  if (info->src_addr == nullptr) return false;
  const auto* a = static_cast<const sockaddr*>(info->src_addr);
  const auto* b = reinterpret_cast<const sockaddr*>(&local.storage);
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, 16) == 0;
  }
  return false;
}

// The entry for the interface this rank reaches its peers through: one named in
// options.ifnames, else the one bound to the address that routes to the store host (as the TCP
// transport listens), else the provider's first (RDMA providers name devices, not IPs).
const fi_info* pickInterface(const InfoList& list, const NetOptions& options) {
  for (const fi_info* i = list.head(); i != nullptr; i = i->next) {
    const char* domain = i->domain_attr->name;
    for (const auto& name : options.ifnames) {
      if (domain != nullptr && name == domain) return i;
    }
  }
  try {
    const Address local = chooseListenAddress(options.storeHost);
    for (const fi_info* i = list.head(); i != nullptr; i = i->next) {
      if (sameAddress(i, local)) return i;
    }
  } catch (const Error& e) {
    XCCL_DEBUG("ofi", "no interface address to match: ", e.what());
  }
  return list.head();
}

}  // namespace

const char* const kDefaultProviders[3] = {"verbs;ofi_rxm", "efa", "tcp;ofi_rxm"};

void check(long ret, const char* what) {
  if (ret < 0) {
    XCCL_THROW(ErrorKind::kSystem, what, " failed: ", fi_strerror(static_cast<int>(-ret)), " (",
               ret, ")");
  }
}

bool isRdmaProvider(const std::string& name) {
  return name.rfind("verbs", 0) == 0 || name.rfind("efa", 0) == 0;
}

InfoList::~InfoList() {
  if (head_ != nullptr) fi_freeinfo(head_);
}

InfoList& InfoList::operator=(InfoList&& other) noexcept {
  if (this != &other) {
    if (head_ != nullptr) fi_freeinfo(head_);
    head_ = other.head_;
    other.head_ = nullptr;
  }
  return *this;
}

// ofi_rxm sends messages above its eager limit (16 KiB unless FI_OFI_RXM_EAGER_LIMIT says
// otherwise) in segments that each wait for the sender's progress thread, which put 32 KiB
// all_to_all messages at 0.3-0.5x of the TCP engine. A header slot's worth (kHeaderSlotBytes)
// goes as one message instead; over tcp the receiver takes it straight into the posted slot.
// Only where rxm can run over tcp alone: XCCL_OFI_PROVIDER names tcp, or it is unset and the
// host has no RDMA device (over verbs rxm wants the eager limit equal to its buffer size).
// rxm reads the variable when libfabric loads its providers, at the first fi_getinfo, so this
// runs before any; a value the user set is kept.
void tuneProvidersOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string wanted = env::getString("XCCL_OFI_PROVIDER");
    bool overTcp = wanted.rfind("tcp", 0) == 0;
    if (wanted.empty()) {
      std::error_code ignored;
      const std::filesystem::path devices("/sys/class/infiniband");
      overTcp =
          !std::filesystem::exists(devices, ignored) || std::filesystem::is_empty(devices, ignored);
    }
    if (overTcp) {
      ::setenv("FI_OFI_RXM_EAGER_LIMIT", std::to_string(kHeaderSlotBytes).c_str(), 0);
    }
  });
}

InfoList query(const std::string& provider) {
  tuneProvidersOnce();
  // With directed receives where the provider has them (payload receives then accept only their
  // sender), else without: a provider lacking them still works, matching payloads on tags alone.
  // Asked for kInjectBytes of inject size first, where the provider can (ofi_rxm offers 64 bytes
  // unless asked, up to its 16 KiB buffers): small sends then need no completion (transport.h).
  // FI_SOURCE first of all (completions name the endpoint a message came from, so a header's
  // claimed sender can be checked); a provider without it is still offered, and refused only
  // where a key file is set (sourceRefusal).
  for (const uint64_t source : {uint64_t{FI_SOURCE}, uint64_t{0}}) {
    for (const uint64_t extra : {uint64_t{FI_DIRECTED_RECV}, uint64_t{0}}) {
      for (const size_t inject : {kInjectBytes, size_t{0}}) {
        fi_info* hints = makeHints(provider);
        hints->caps |= source | extra;
        hints->tx_attr->inject_size = inject;
        fi_info* found = nullptr;
        int ret = fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints, &found);
        fi_freeinfo(hints);
        if (ret == 0 && found != nullptr) return InfoList(found);
      }
    }
  }
  return InfoList();
}

std::vector<std::string> offeredProviders() {
  InfoList all = query("");
  std::vector<std::string> names;
  for (const fi_info* i = all.head(); i != nullptr; i = i->next) {
    std::string name = i->fabric_attr->prov_name;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

Choice chooseProvider(const std::string& wanted, const NetOptions& options) {
  Choice choice;
  if (!wanted.empty()) {
    choice.list = query(wanted);
    if (choice.list.head() == nullptr) {
      XCCL_THROW(ErrorKind::kInvalidArgument, "XCCL_OFI_PROVIDER=", wanted,
                 ": no such libfabric provider here (or it lacks reliable-datagram endpoints "
                 "with tagged messages and RMA writes); fi_getinfo offers: ",
                 joined(offeredProviders()));
    }
  } else {
    for (const char* name : kDefaultProviders) {
      choice.list = query(name);
      if (choice.list.head() != nullptr) break;
    }
    if (choice.list.head() == nullptr) {
      XCCL_THROW(ErrorKind::kSystem,
                 "no libfabric provider among verbs;ofi_rxm, efa, "
                 "tcp;ofi_rxm is usable here; fi_getinfo offers: ",
                 joined(offeredProviders()));
    }
  }
  choice.info = pickInterface(choice.list, options);
  return choice;
}

std::string sourceRefusal(const fi_info* info, bool keyed) {
  if ((info->caps & FI_SOURCE) != 0 || !keyed) return {};
  return detail::concat(
      "XCCL_NET_KEY_FILE is set, and libfabric provider ", info->fabric_attr->prov_name,
      " cannot name the endpoint a message came from (FI_SOURCE), so the ofi engine could not "
      "tell a member's messages from forged ones; use XCCL_NET=tcp (which proves the key on "
      "every link) or a provider with FI_SOURCE");
}

bool providerAvailable(const std::string& wanted, std::string* why, bool rdmaOnly,
                       bool* keyRefused) {
  if (keyRefused != nullptr) *keyRefused = false;
  try {
    Choice choice = chooseProvider(wanted, NetOptions{});
    const std::string name = choice.info->fabric_attr->prov_name;
    if (rdmaOnly && !isRdmaProvider(name)) {
      if (why != nullptr) *why = "libfabric offers no RDMA provider (verbs, efa), only " + name;
      return false;
    }
    if (std::string refused = sourceRefusal(choice.info, keyFileSet()); !refused.empty()) {
      if (why != nullptr) *why = refused;
      if (keyRefused != nullptr) *keyRefused = true;
      return false;
    }
    return true;
  } catch (const Error& e) {
    if (why != nullptr) *why = e.what();
    return false;
  }
}

Fabric::Fabric(const fi_info* info) : info_(fi_dupinfo(info)) {
  XCCL_CHECK(info_ != nullptr, "fi_dupinfo failed");
  try {
    check(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
    check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
    fi_av_attr avAttr{};
    avAttr.type = FI_AV_TABLE;
    check(fi_av_open(domain_, &avAttr, &av_, nullptr), "fi_av_open");
    fi_cq_attr cqAttr{};
    cqAttr.format = FI_CQ_FORMAT_TAGGED;
    // A wait object lets the progress thread sleep in fi_cq_sread instead of polling.
    cqAttr.wait_obj = FI_WAIT_UNSPEC;
    check(fi_cq_open(domain_, &cqAttr, &cq_, nullptr), "fi_cq_open");
    check(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint");
    check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
    check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    check(fi_enable(ep_), "fi_enable");
  } catch (...) {
    release();
    throw;
  }
}

void Fabric::closeEndpoint() {
  if (ep_ != nullptr) fi_close(&ep_->fid);
  ep_ = nullptr;
}

Fabric::~Fabric() { release(); }

void Fabric::release() {
  closeEndpoint();
  if (cq_ != nullptr) fi_close(&cq_->fid);
  if (av_ != nullptr) fi_close(&av_->fid);
  if (domain_ != nullptr) fi_close(&domain_->fid);
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  if (info_ != nullptr) fi_freeinfo(info_);
  cq_ = nullptr, av_ = nullptr, domain_ = nullptr, fabric_ = nullptr, info_ = nullptr;
}

}  // namespace xccl::net::ofi
