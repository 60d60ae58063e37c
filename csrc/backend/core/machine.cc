#include "backend/core/machine.h"

namespace xccl::backend {

const topo::Topology& thisMachine() {
  static const topo::Topology machine = topo::discover();
  return machine;
}

}  // namespace xccl::backend
