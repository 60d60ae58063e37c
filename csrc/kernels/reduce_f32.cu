// The float instantiations of the reducing kernels (see reduce_dispatch.cuh).
#include "kernels/reduce_dispatch.cuh"

namespace xccl::kernels {

template void launchReduceTyped<float>(const ReduceLaunch&, ReduceKind, int);

}  // namespace xccl::kernels
