// The one registry of XCCL_* environment variables read by the C++ code.
//
// Every variable is declared once in env.cc's table (name, default, meaning, and what values it
// accepts); reading an undeclared name is a bug and throws. Values are read and checked on first
// use and cached for the life of the process, so behaviour cannot change under a running
// communicator. A value outside its variable's range throws xccl::Error(kInvalidArgument) naming
// the variable, the value and what is accepted (the backend turns that into a Python ValueError),
// on every read, never a silent fallback.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/vocabulary.h"

namespace xccl::env {

enum class Kind {
  kText,     // any string (paths, interface names, host identities)
  kInteger,  // decimal, or 0x-prefixed hex, in [min, max] and a multiple of multipleOf
  kBoolean,  // 1/true/yes/on or 0/false/no/off (any case); unset reads as false
  kChoice,   // one of `choices`, in any case; getString() returns it as declared (lowercase)
  // A byte count per collective of `collectives`: one integer in [min, max] (as kInteger reads
  // it) or "never" for all of them, or a comma-separated list of collective=bytes|never naming
  // each at most once (the others keep their defaults): "all_reduce=1048576,broadcast=never".
  kBytesPerCollective,
};

// "never" in a kBytesPerCollective value.
inline constexpr uint64_t kNever = UINT64_MAX;

struct Variable {
  const char* name;
  const char* defaultValue;  // as the user would write it; "" means unset
  const char* meaning;
  Kind kind = Kind::kText;
  int64_t min = 0, max = 0, multipleOf = 1;  // kInteger only
  // kChoice only: each entry is one meaning, its synonyms separated by '|' with the canonical
  // spelling first (e.g. "nccl|rccl|vendor").
  std::vector<std::string> choices;
  std::vector<vocab::Collective> collectives;  // kBytesPerCollective only, in the order printed
  // Decides a route or an algorithm: every rank of a group must have the same effective value,
  // or ranks would take different paths through one collective and deadlock. The backend checks
  // these at group creation (groupWideSettings() with net::agreeOnSettings).
  bool groupWide = false;
};

// All declared variables, in table order (used by docs checks and `python -m xccl env`).
const std::vector<Variable>& all();

// The declaration of `name`; throws kInternal when it is not declared.
const Variable& find(const char* name);

// What `var` accepts, in the words docs/environment.md's "Accepted" column uses verbatim
// (tests/cpp/common/test_env.cc checks it), e.g. "integer 4096 to 1099511627776, multiple of 256".
std::string describeAccepted(const Variable& var);

// Checks `value` (non-empty) against `var`; throws kInvalidArgument naming both and what is
// accepted. Returns the canonical spelling: decimal for integers, "1"/"0" for booleans, the
// first synonym for choices, the value itself for text; for bytes per collective one decimal
// number or "never" when the value sets every collective alike, else the list in the
// variable's order with decimal numbers. Pure: this is what getX() run on a value.
std::string checkValue(const Variable& var, const std::string& value);

// The effective string value: the environment's if set and non-empty, else the default; checked
// against the variable's kind and range (throws kInvalidArgument when outside). Returned as the
// user wrote it, except that a choice comes back as declared (lowercase; synonyms are kept:
// "VENDOR" reads as "vendor", not as the canonical "nccl").
std::string getString(const char* name);
int64_t getInt(const char* name);  // throws kInternal unless `name` is a kInteger variable
bool getBool(const char* name);    // throws kInternal unless `name` is a kBoolean variable
// (collective, bytes or kNever) for each collective `value` (non-empty) sets, in the order of
// var.collectives; throws kInvalidArgument as checkValue for a bad value. Pure.
std::vector<std::pair<vocab::Collective, uint64_t>> bytesPerCollective(const Variable& var,
                                                                       const std::string& value);
// The same for the effective value of `name`; empty when unset. Throws kInternal unless `name`
// is a kBytesPerCollective variable.
std::vector<std::pair<vocab::Collective, uint64_t>> getBytesPerCollective(const char* name);

// Reads and checks every declared variable; throws one kInvalidArgument naming every variable
// whose value is outside its range. For the backend to call at group creation, so that a typo in
// any XCCL_* variable is a ValueError there rather than a failure at first use.
void checkAll();

// (name, canonical effective value) of every groupWide variable, "" for unset, in table order:
// what ranks must agree on (net::agreeOnSettings). Throws like getString for a bad value.
std::vector<std::pair<std::string, std::string>> groupWideSettings();

}  // namespace xccl::env
