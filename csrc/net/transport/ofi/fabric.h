// The libfabric objects one transport owns (fabric, domain, address vector, completion queue,
// endpoint) and the provider choice: fi_getinfo filtered by XCCL_OFI_PROVIDER and by the
// interface the rank uses, so that ranks in other network namespaces or on other hosts open the
// endpoint on the interface that reaches their peers.
#pragma once

#include <rdma/fabric.h>

#include <string>
#include <vector>

#include "net/transport/net_options.h"

namespace xccl::net::ofi {

// Throws kSystem naming `what` and fi_strerror when `ret` is a negative libfabric error.
void check(long ret, const char* what);

// The providers tried, in order, when XCCL_OFI_PROVIDER is empty: RDMA hardware first.
extern const char* const kDefaultProviders[3];
// Whether a provider name is one with RDMA hardware (verbs, efa; layered names included).
bool isRdmaProvider(const std::string& name);
// Distinct provider names fi_getinfo offers for reliable-datagram endpoints, in its order.
std::vector<std::string> offeredProviders();

// fi_getinfo's answers for one provider, freed on destruction.
class InfoList {
 public:
  InfoList() = default;
  explicit InfoList(fi_info* head) : head_(head) {}
  ~InfoList();
  InfoList(InfoList&& other) noexcept : head_(other.head_) { other.head_ = nullptr; }
  InfoList& operator=(InfoList&& other) noexcept;
  InfoList(const InfoList&) = delete;
  InfoList& operator=(const InfoList&) = delete;
  fi_info* head() const { return head_; }

 private:
  fi_info* head_ = nullptr;
};

// Endpoints of `provider` with what the transport needs (tagged messages, RMA writes with remote
// CQ data, the memory registration modes it honours); empty when none.
InfoList query(const std::string& provider);

// The provider to use and the one fi_info entry (interface) of it. `wanted` (XCCL_OFI_PROVIDER)
// empty: the first of kDefaultProviders present; unknown here: kInvalidArgument listing those
// offered.
struct Choice {
  InfoList list;
  const fi_info* info = nullptr;  // points into list
};
Choice chooseProvider(const std::string& wanted, const NetOptions& options);
// available() for an explicit XCCL_OFI_PROVIDER value.
bool providerAvailable(const std::string& wanted, std::string* why, bool rdmaOnly,
                       bool* keyRefused = nullptr);
// Why `info` must not be used: `keyed` (XCCL_NET_KEY_FILE is set) and the provider lacks FI_SOURCE
// (a keyed group must check every message's source endpoint); "" when it may.
std::string sourceRefusal(const fi_info* info, bool keyed);

// fabric -> domain -> (av, cq) -> endpoint, closed in reverse order.
class Fabric {
 public:
  explicit Fabric(const fi_info* info);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  fi_info* info() const { return info_; }
  fid_domain* domain() const { return domain_; }
  fid_ep* ep() const { return ep_; }
  fid_av* av() const { return av_; }
  fid_cq* cq() const { return cq_; }
  const char* providerName() const { return info_->fabric_attr->prov_name; }
  // Closes the endpoint early (abort, destruction): outstanding operations are dropped and
  // no completion for them is reported afterwards.
  void closeEndpoint();

 private:
  void release();  // closes whatever is open, in reverse order

  fi_info* info_ = nullptr;  // our copy (fi_dupinfo)
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
};

}  // namespace xccl::net::ofi
