#include "messages/text.hpp"

#include <regex>

namespace taskmill {

namespace {

/// The length of the well-formed UTF-8 sequence at the start of `text`, or 0.
std::size_t utf8_sequence(std::string_view text) {
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  auto c0 = byte(0);
  if (c0 < 0x80) return 1;
  std::size_t n = c0 >= 0xf0 ? 4 : c0 >= 0xe0 ? 3 : c0 >= 0xc2 ? 2 : 0;
  if (n == 0 || c0 > 0xf4 || text.size() < n) return 0;
  for (std::size_t i = 1; i < n; ++i)
    if ((byte(i) & 0xc0) != 0x80) return 0;
  auto c1 = byte(1);
  if (c0 == 0xe0 && c1 < 0xa0) return 0;  // overlong
  if (c0 == 0xed && c1 > 0x9f) return 0;  // surrogate
  if (c0 == 0xf0 && c1 < 0x90) return 0;  // overlong
  if (c0 == 0xf4 && c1 > 0x8f) return 0;  // above U+10FFFF
  return n;
}

}  // namespace

bool is_utf8(std::string_view text) {
  while (!text.empty()) {
    auto n = utf8_sequence(text);
    if (n == 0) return false;
    text.remove_prefix(n);
  }
  return true;
}

const char* text_problem(std::string_view text) {
  if (!is_utf8(text)) return "must be valid UTF-8";
  if (text.find('\0') != std::string_view::npos) return "must not contain the NUL character";
  return nullptr;
}

std::string quote_input(std::string_view text, std::size_t max_bytes) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "\"";
  std::size_t used = 0;
  while (!text.empty()) {
    if (used >= max_bytes) {
      out += "...";
      break;
    }
    auto n = utf8_sequence(text);
    auto c = static_cast<unsigned char>(text[0]);
    if (n == 0 || c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
      n = 1;
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else {
      out.append(text.substr(0, n));
    }
    used += n;
    text.remove_prefix(n);
  }
  out += '"';
  return out;
}

std::string redact_conninfo(const std::string& conninfo) {
  static const std::regex url_password{R"((://[^:/@]*):[^@]*@)"};
  static const std::regex kv_password{R"(password\s*=\s*('[^']*'|\S+))"};
  auto s = std::regex_replace(conninfo, url_password, "$1:***@");
  return std::regex_replace(s, kv_password, "password=***");
}

}  // namespace taskmill
