// Fault injection for tests, never a user feature. It exists only in builds configured with
// XCCL_TEST_HOOKS=ON (CMake's option; setup.py passes the environment variable of that name,
// scripts/test.sh sets it): runner.cc defines it there and nowhere else, so a call from a
// build without the hooks fails to link, and a user's wheel carries no way to damage results.
#pragma once

#include "algo/tunables.h"  // algo::Algorithm

namespace xccl::algo {

// From now on every collective run through a Runner whose plan's algorithm is `algorithm` adds 1
// to the first element of its output where that output is final on this rank (the first byte
// where the collective carries no dtype): a wrong answer that exact verification must catch.
// kAuto turns it off. Costs one relaxed atomic load per call in the builds that have it.
void injectWrongResult(Algorithm algorithm);

}  // namespace xccl::algo
