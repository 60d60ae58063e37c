// The one registry of XCCL_* environment variables read by the C++ code.
//
// Every variable is declared once in env.cc's table (name, default, meaning); reading an
// undeclared name is a bug and throws. Values are read on first use and cached for the life of
// the process, so behaviour cannot change under a running communicator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xccl::env {

struct Variable {
  const char* name;
  const char* defaultValue;  // as the user would write it; "" means unset
  const char* meaning;
};

// All declared variables, in table order (used by docs checks and `python -m xccl env`).
const std::vector<Variable>& all();

// The effective string value: the environment's if set and non-empty, else the default.
std::string getString(const char* name);
int64_t getInt(const char* name);
bool getBool(const char* name);  // 1/true/yes/on vs 0/false/no/off; anything else throws

}  // namespace xccl::env
