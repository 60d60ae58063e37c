// A small JSON value with a reader and a writer: just what the topology file format needs.
//
// Objects keep their members in insertion order so a dumped topology reads in a stable, logical
// order and diffs cleanly. Integers are kept apart from doubles so that byte counts and ids round
// trip exactly. parse() throws kInvalidArgument with the offending offset on malformed text.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace xccl::topo {

class Json {
 public:
  enum class Kind { kNull, kBool, kInt, kDouble, kString, kArray, kObject };

  Json() = default;
  Json(bool value) : kind_(Kind::kBool), bool_(value) {}
  Json(int value) : kind_(Kind::kInt), int_(value) {}
  Json(int64_t value) : kind_(Kind::kInt), int_(value) {}
  Json(double value) : kind_(Kind::kDouble), double_(value) {}
  Json(std::string value) : kind_(Kind::kString), string_(std::move(value)) {}
  Json(const char* value) : kind_(Kind::kString), string_(value) {}

  static Json array();
  static Json object();

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::kNull; }
  bool isNumber() const { return kind_ == Kind::kInt || kind_ == Kind::kDouble; }

  // Typed access; `what` names the value in the error thrown on a kind mismatch.
  bool asBool(const char* what) const;
  int64_t asInt(const char* what) const;  // accepts a double only if it is integral
  double asDouble(const char* what) const;
  const std::string& asString(const char* what) const;
  const std::vector<Json>& asArray(const char* what) const;

  // Arrays.
  void push(Json value);
  // Objects: insertion-ordered; set() replaces an existing member.
  void set(const std::string& key, Json value);
  const Json* find(const std::string& key) const;
  const std::vector<std::pair<std::string, Json>>& members() const { return members_; }

  // Pretty text, two-space indents; containers that fit on one short line are kept inline.
  std::string dump() const;
  static Json parse(const std::string& text);

 private:
  void dumpTo(std::string& out, int indent) const;
  std::string inlineText() const;  // the whole value on one line

  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  int64_t int_ = 0;
  double double_ = 0;
  std::string string_;
  std::vector<Json> items_;
  std::vector<std::pair<std::string, Json>> members_;
};

}  // namespace xccl::topo
