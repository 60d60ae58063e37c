// NUMA placement of devices and CPU pinning of the threads that serve them.
//
// Progress threads copy and reduce data that arrives from a GPU or a NIC; running them on the
// device's NUMA node keeps that traffic off the CPU interconnect (Gloo docs/latency.md).
#pragma once

#include <string>
#include <vector>

#include "topo/topology.h"

namespace xccl::topo {

// -1 when unknown. Throw kInvalidArgument for an index that does not exist.
int numaNodeOfGpu(const Topology& topology, int gpu);
int numaNodeOfNic(const Topology& topology, int nic);

// The CPUs of a NUMA node (by id); empty when the node is not listed.
std::vector<int> cpusOfNumaNode(const Topology& topology, int numaNode);

// The CPUs closest to a device: its PCI function's local CPU list, else its NUMA node's CPUs,
// else every CPU (nothing is known, so no CPU is preferred).
std::vector<int> cpusNearGpu(const Topology& topology, int gpu);
std::vector<int> cpusNearNic(const Topology& topology, int nic);

// Index of the GPU with this PCI bus id (any common spelling) or of the NIC with this name or
// netdev; -1 when absent.
int gpuIndexByPciBusId(const Topology& topology, const std::string& busId);
int nicIndexByName(const Topology& topology, const std::string& name);
// Index of the NIC that holds `address` ("10.0.0.5", "fe80::1"; a ":port" suffix and IPv6
// brackets, as in "10.0.0.5:29500" or "[fe80::1]:0", are ignored); -1 when none does.
int nicIndexByAddress(const Topology& topology, const std::string& address);

// The CPUs a progress thread should run on: those near the NIC that carries its traffic (`nic`:
// a name, netdev or address as above; "" when unknown), else those near the rank's GPU (`gpu`:
// an index, -1 when the rank has none or it is unknown). The NIC comes first because a transport
// thread touches socket and DMA buffers, which the NIC fills on its own NUMA node. Empty (leave
// the thread alone) when neither is known or the answer would be every online CPU (one NUMA node,
// or nothing known about placement). Never throws for unknown names or indices.
std::vector<int> progressCpusFor(const Topology& topology, int gpu, const std::string& nic);

// The CPUs the calling thread may run on; the same as affinity::allowedCpus (common/).
std::vector<int> allowedCpus();

// Restricts the calling thread to `cpus` intersected with allowedCpus(). Pinning is an
// optimisation: when the intersection is empty (a container limited to other cores) or the
// kernel refuses, the thread is left as it was and false is returned; it never throws.
// (affinity::pinCurrentThread, which the transports call without depending on topo.)
bool pinCurrentThreadToCpus(const std::vector<int>& cpus);

}  // namespace xccl::topo
