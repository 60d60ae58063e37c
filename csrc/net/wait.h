// The body of Transport::wait for transports whose progress threads complete requests under one
// mutex and notify one condition variable (tcp/, ofi/): sleeps until every request is done or
// the deadline passes, then throws the first failure or kTimeout naming the missing peers.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "net/transport.h"

namespace xccl::net {

void waitForRequests(std::mutex& mutex, std::condition_variable& completed,
                     const std::vector<RequestPtr>& requests, Deadline deadline,
                     const std::string& what);

}  // namespace xccl::net
