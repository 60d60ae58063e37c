// Integer lists written as sorted, de-duplicated ranges ("0-3,8,10-11"; "" for none): the
// kernel's cpulist syntax, which is also how messages name a set of ranks in a large group.
#pragma once

#include <string>
#include <vector>

namespace xccl {

std::string formatRanges(std::vector<int> values);

}  // namespace xccl
