// The clock every bound of the net layer is measured on (a steady clock: wall-clock steps never
// shorten or stretch a wait), for the rendezvous' exchanges and the transports' waits alike.
#pragma once

#include <chrono>

namespace xccl::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

}  // namespace xccl::net
