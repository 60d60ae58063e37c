#include "backend/gpu/gpu_placement.h"
#include "common/gpu_runtime.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "backend/core/machine.h"
#include "backend/gpu/gpu_rules.h"
#include "backend/gpu/gpu_work.h"
#include "kernels/launch_checks.h"
#include "net/rendezvous/bootstrap.h"

namespace xccl::backend {
namespace {

// "0000:18:00.0", lower case, as topology files write it.
std::string busIdOf(int device) {
  char id[32] = {};
  XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(DeviceGetPCIBusId)(id, sizeof(id), device));
  std::string text(id);
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

int attribute(gpuDeviceAttr_t what, int device) {
  int value = 0;
  XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(DeviceGetAttribute)(&value, what, device));
  return value;
}

}  // namespace

Placement exchangePlacement(net::Store& store, const net::GroupLayout& layout, int device,
                            std::chrono::milliseconds timeout) {
  const std::string bus = busIdOf(device);
  const int sms = attribute(gpuDevAttrMultiProcessorCount, device);
  const int perSm =
      algo::residentBlocksPerSm(kernels::kThreadsPerBlock,
                                attribute(gpuDevAttrMaxThreadsPerMultiProcessor, device),
                                attribute(gpuDevAttrMaxRegistersPerMultiprocessor, device),
                                attribute(gpuDevAttrMaxRegistersPerBlock, device));
  // One record per rank: bus id, SM count, blocks per SM. Which host each rank is on is the
  // group's layout (its census at creation), not asked again.
  const std::vector<std::string> all =
      net::Bootstrap(store, "", layout.rank, layout.size, timeout)
          .allGather("gpu_place", bus + "\n" + std::to_string(sms) + "\n" + std::to_string(perSm));
  const net::Hosts& hosts = layout.census.hosts;
  Placement placement;
  placement.smCount = sms;
  placement.blocksPerSm = perSm;
  std::map<std::pair<int, std::string>, int> perGpu;  // (host, bus id) -> ranks on that GPU
  std::set<std::string> localBuses;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    std::istringstream lines(all[r]);
    std::string peerBus, peerSms, peerPerSm;
    std::getline(lines, peerBus);
    std::getline(lines, peerSms);
    std::getline(lines, peerPerSm);
    const int peerHost = hosts.hostOf[r];
    placement.ranksPerGpu = std::max(placement.ranksPerGpu, ++perGpu[{peerHost, peerBus}]);
    placement.smCount = std::min(placement.smCount, std::stoi(peerSms));
    placement.blocksPerSm = std::min(placement.blocksPerSm, std::stoi(peerPerSm));
    if (peerHost == layout.host()) localBuses.insert(peerBus);
  }
  placement.hosts = layout.hosts();
  placement.sameHost = placement.hosts == 1;
  const topo::Topology& topology = thisMachine();
  for (const std::string& localBus : localBuses) {
    auto it = std::find_if(topology.gpus.begin(), topology.gpus.end(),
                           [&](const topo::Gpu& gpu) { return gpu.pciBusId == localBus; });
    if (it == topology.gpus.end()) {
      placement.gpus.clear();  // the topology does not list them all: let the plan decide
      break;
    }
    placement.gpus.push_back(it->index);
  }
  return placement;
}

}  // namespace xccl::backend
