// AMD GPU product names through amdsmi, loaded with dlopen when present.
//
// Links and placement come from KFD sysfs (kfd.h), which needs no library and whose numbering
// is stable; amdsmi's link-type enum (amdsmi_link_type_t) has changed between releases,
// so it is used only for what sysfs lacks: the marketing name ("AMD Instinct MI300X").
#pragma once

#include <map>
#include <string>

namespace xccl::topo {

// Bus id ("0000:0c:00.0") -> product name; empty when amdsmi is absent or fails.
std::map<std::string, std::string> amdGpuNames();

}  // namespace xccl::topo
