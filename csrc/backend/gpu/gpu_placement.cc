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
#include "net/bootstrap.h"
#include "net/hosts.h"
#include "net/shm/segment.h"

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

Placement exchangePlacement(net::Store& store, int rank, int size, int device,
                            std::chrono::milliseconds timeout) {
  const std::string host = net::shm::Options::fromEnvironment().identity();
  const std::string bus = busIdOf(device);
  const int sms = attribute(gpuDevAttrMultiProcessorCount, device);
  const int perSm =
      algo::residentBlocksPerSm(kernels::kThreadsPerBlock,
                                attribute(gpuDevAttrMaxThreadsPerMultiProcessor, device),
                                attribute(gpuDevAttrMaxRegistersPerMultiprocessor, device),
                                attribute(gpuDevAttrMaxRegistersPerBlock, device));
  // One record per rank: host, bus id, SM count, blocks per SM (host names hold no newline).
  const std::vector<std::string> all =
      net::Bootstrap(store, "", rank, size, timeout)
          .allGather("gpu_place",
                     host + "\n" + bus + "\n" + std::to_string(sms) + "\n" + std::to_string(perSm));
  Placement placement;
  placement.smCount = sms;
  placement.blocksPerSm = perSm;
  std::vector<std::string> hostByRank;
  std::map<std::string, int> perGpu;
  std::set<std::string> localBuses;
  for (const std::string& record : all) {
    std::istringstream lines(record);
    std::string peerHost, peerBus, peerSms, peerPerSm;
    std::getline(lines, peerHost);
    std::getline(lines, peerBus);
    std::getline(lines, peerSms);
    std::getline(lines, peerPerSm);
    hostByRank.push_back(peerHost);
    placement.ranksPerGpu = std::max(placement.ranksPerGpu, ++perGpu[peerHost + "/" + peerBus]);
    placement.smCount = std::min(placement.smCount, std::stoi(peerSms));
    placement.blocksPerSm = std::min(placement.blocksPerSm, std::stoi(peerPerSm));
    if (peerHost == host) localBuses.insert(peerBus);
  }
  placement.hosts = net::Hosts::of(hostByRank).count();
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
