#include "topo/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"

namespace xccl::topo {
namespace {

constexpr int kMaxDepth = 64;     // a topology nests 4 deep; deeper input is hostile or broken
constexpr size_t kInlineWidth = 96;

const char* kindName(Json::Kind kind) {
  switch (kind) {
    case Json::Kind::kNull: return "null";
    case Json::Kind::kBool: return "a boolean";
    case Json::Kind::kInt:
    case Json::Kind::kDouble: return "a number";
    case Json::Kind::kString: return "a string";
    case Json::Kind::kArray: return "an array";
    case Json::Kind::kObject: return "an object";
  }
  return "?";
}

void appendQuoted(std::string& out, const std::string& text) {
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
          out += buffer;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void appendUtf8(std::string& out, uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  Json parseDocument() {
    Json value = parseValue(0);
    skipSpace();
    if (pos_ != text_.size()) fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    XCCL_THROW(ErrorKind::kInvalidArgument, "invalid JSON at offset ", pos_, ": ", why);
  }

  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool consume(const char* word) {
    size_t length = std::char_traits<char>::length(word);
    if (text_.compare(pos_, length, word) != 0) return false;
    pos_ += length;
    return true;
  }

  void expect(char c) {
    skipSpace();
    if (pos_ >= text_.size() || text_[pos_] != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  Json parseValue(int depth) {
    if (depth > kMaxDepth) fail("nested too deeply");
    skipSpace();
    if (pos_ >= text_.size()) fail("unexpected end of text");
    char c = text_[pos_];
    if (c == '{') return parseObject(depth);
    if (c == '[') return parseArray(depth);
    if (c == '"') return Json(parseString());
    if (consume("true")) return Json(true);
    if (consume("false")) return Json(false);
    if (consume("null")) return Json();
    if (c == '-' || (c >= '0' && c <= '9')) return parseNumber();
    fail(std::string("unexpected character '") + c + "'");
  }

  Json parseObject(int depth) {
    Json object = Json::object();
    ++pos_;
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return object;
    }
    for (;;) {
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a member name");
      std::string key = parseString();
      if (object.find(key) != nullptr) fail("duplicate member \"" + key + "\"");
      expect(':');
      object.set(key, parseValue(depth + 1));
      skipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return object;
    }
  }

  Json parseArray(int depth) {
    Json array = Json::array();
    ++pos_;
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return array;
    }
    for (;;) {
      array.push(parseValue(depth + 1));
      skipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return array;
    }
  }

  uint32_t parseHex4() {
    if (pos_ + 4 > text_.size()) fail("short \\u escape");
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      code <<= 4;
      if (c >= '0' && c <= '9')
        code |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        code |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        code |= static_cast<uint32_t>(c - 'A' + 10);
      else
        fail("bad \\u escape");
    }
    return code;
  }

  std::string parseString() {
    ++pos_;  // opening quote
    std::string out;
    for (;;) {
      if (pos_ >= text_.size()) fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(text_[pos_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("control character in string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t code = parseHex4();
          if (code >= 0xD800 && code < 0xDC00) {
            if (!consume("\\u")) fail("lone surrogate");
            uint32_t low = parseHex4();
            if (low < 0xDC00 || low >= 0xE000) fail("bad surrogate pair");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          appendUtf8(out, code);
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  Json parseNumber() {
    size_t start = pos_;
    bool integral = true;
    if (text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        integral = false;
        ++pos_;
      } else {
        break;
      }
    }
    std::string token = text_.substr(start, pos_ - start);
    const char* begin = token.c_str();
    char* end = nullptr;
    errno = 0;
    if (integral) {
      long long value = std::strtoll(begin, &end, 10);
      if (end == begin || *end != '\0' || errno == ERANGE) fail("bad integer '" + token + "'");
      return Json(static_cast<int64_t>(value));
    }
    double value = std::strtod(begin, &end);
    if (end == begin || *end != '\0' || !std::isfinite(value)) fail("bad number '" + token + "'");
    return Json(value);
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace

Json Json::array() {
  Json value;
  value.kind_ = Kind::kArray;
  return value;
}

Json Json::object() {
  Json value;
  value.kind_ = Kind::kObject;
  return value;
}

bool Json::asBool(const char* what) const {
  XCCL_CHECK_ARG(kind_ == Kind::kBool, what, " must be a boolean, not ", kindName(kind_));
  return bool_;
}

int64_t Json::asInt(const char* what) const {
  if (kind_ == Kind::kDouble && std::floor(double_) == double_ && std::fabs(double_) < 9e15) {
    return static_cast<int64_t>(double_);
  }
  XCCL_CHECK_ARG(kind_ == Kind::kInt, what, " must be an integer, not ", kindName(kind_));
  return int_;
}

double Json::asDouble(const char* what) const {
  XCCL_CHECK_ARG(isNumber(), what, " must be a number, not ", kindName(kind_));
  return kind_ == Kind::kInt ? static_cast<double>(int_) : double_;
}

const std::string& Json::asString(const char* what) const {
  XCCL_CHECK_ARG(kind_ == Kind::kString, what, " must be a string, not ", kindName(kind_));
  return string_;
}

const std::vector<Json>& Json::asArray(const char* what) const {
  XCCL_CHECK_ARG(kind_ == Kind::kArray, what, " must be an array, not ", kindName(kind_));
  return items_;
}

void Json::push(Json value) {
  XCCL_CHECK(kind_ == Kind::kArray);
  items_.push_back(std::move(value));
}

void Json::set(const std::string& key, Json value) {
  XCCL_CHECK(kind_ == Kind::kObject);
  for (auto& member : members_) {
    if (member.first == key) {
      member.second = std::move(value);
      return;
    }
  }
  members_.emplace_back(key, std::move(value));
}

const Json* Json::find(const std::string& key) const {
  if (kind_ != Kind::kObject) return nullptr;
  for (const auto& member : members_) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

std::string Json::inlineText() const {
  std::string out;
  switch (kind_) {
    case Kind::kNull: return "null";
    case Kind::kBool: return bool_ ? "true" : "false";
    case Kind::kInt: return std::to_string(int_);
    case Kind::kDouble: {
      char buffer[32];
      // %.17g round-trips every double; prefer the shortest of the usual precisions that does.
      for (int precision : {6, 10, 15, 17}) {
        std::snprintf(buffer, sizeof(buffer), "%.*g", precision, double_);
        if (std::strtod(buffer, nullptr) == double_) break;
      }
      out = buffer;
      // Keep it a double on the way back in.
      if (out.find_first_of(".eEn") == std::string::npos) out += ".0";
      return out;
    }
    case Kind::kString: appendQuoted(out, string_); return out;
    case Kind::kArray:
      out = "[";
      for (size_t i = 0; i < items_.size(); ++i) {
        out += (i ? ", " : "") + items_[i].inlineText();
      }
      return out + "]";
    case Kind::kObject:
      out = "{";
      for (size_t i = 0; i < members_.size(); ++i) {
        if (i) out += ", ";
        appendQuoted(out, members_[i].first);
        out += ": " + members_[i].second.inlineText();
      }
      return out + "}";
  }
  return "";
}

void Json::dumpTo(std::string& out, int indent) const {
  std::string flat = inlineText();
  if (flat.size() + static_cast<size_t>(indent) <= kInlineWidth) {
    out += flat;
    return;
  }
  std::string pad(static_cast<size_t>(indent) + 2, ' ');
  if (kind_ == Kind::kArray) {
    out += "[\n";
    for (size_t i = 0; i < items_.size(); ++i) {
      out += pad;
      items_[i].dumpTo(out, indent + 2);
      out += i + 1 < items_.size() ? ",\n" : "\n";
    }
    out += std::string(static_cast<size_t>(indent), ' ') + "]";
    return;
  }
  if (kind_ == Kind::kObject) {
    out += "{\n";
    for (size_t i = 0; i < members_.size(); ++i) {
      out += pad;
      appendQuoted(out, members_[i].first);
      out += ": ";
      members_[i].second.dumpTo(out, indent + 2);
      out += i + 1 < members_.size() ? ",\n" : "\n";
    }
    out += std::string(static_cast<size_t>(indent), ' ') + "}";
    return;
  }
  out += flat;  // a scalar longer than the line: print it anyway
}

std::string Json::dump() const {
  std::string out;
  dumpTo(out, 0);
  out += '\n';
  return out;
}

Json Json::parse(const std::string& text) { return Parser(text).parseDocument(); }

}  // namespace xccl::topo
