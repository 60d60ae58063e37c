// NUMA placement of devices and CPU pinning of the threads that serve them.
//
// Progress threads copy and reduce data that arrives from a GPU or a NIC; running them on the
// device's NUMA node keeps that traffic off the CPU interconnect (Gloo docs/latency.md, and
// reference/cpu_transport.md section 5: "pin progress threads to the same node").
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

// The CPUs the calling thread may run on (its affinity mask, shaped by cgroups and taskset).
std::vector<int> allowedCpus();

// Restricts the calling thread to `cpus` intersected with allowedCpus(). Pinning is an
// optimisation: when the intersection is empty (a container limited to other cores) or the
// kernel refuses, the thread is left as it was and false is returned; it never throws.
bool pinCurrentThreadToCpus(const std::vector<int>& cpus);

}  // namespace xccl::topo
