#include "messages/json_parse.hpp"

#include "messages/errors.hpp"
#include "messages/text.hpp"
#include "messages/validate.hpp"

#include <string>
#include <vector>

namespace taskmill::json {

namespace {

using nlohmann::json;

/// Where the parser is inside the document, for error messages, and the
/// checks json itself does not make.
class document_tracker {
 public:
  document_tracker(const std::string& field, int max_depth)
      : field_(field), max_depth_(max_depth) {}

  /// An error to report, set by the checks below; the parse stops at it.
  caf::error problem;

  bool start_container(bool array) {
    next_element();
    if (static_cast<int>(frames_.size()) >= max_depth_)
      return fail(path() + " is nested deeper than " +
                  std::to_string(field_.empty() ? max_json_depth : max_depth_) + " levels");
    frames_.push_back(frame{array, {}, -1});
    return true;
  }

  void end_container() {
    if (!frames_.empty()) frames_.pop_back();
  }

  bool key(const std::string& name) {
    if (frames_.empty()) return true;
    if (name.find('\0') == std::string::npos) {
      frames_.back().key = name;
      return true;
    }
    frames_.back().key.clear();
    return fail(path() + " has a key with the NUL character");
  }

  bool scalar() {
    next_element();
    return true;
  }

  bool string(const std::string& value) {
    next_element();
    if (value.find('\0') != std::string::npos)
      return fail(path() + " must not contain the NUL character");
    return true;
  }

  /// The error for a failure of the parser itself at `byte`.
  caf::error parse_failure(const json::exception& e, std::size_t byte) {
    if (problem) return problem;
    // The element that failed has not started yet when its container is an
    // array: it is the next one.
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    std::string what = e.what();
    if (e.id == 406) return bad(path() + " is a number out of range");
    if (what.find("UTF-8") != std::string::npos)
      return bad(path() + " is not valid UTF-8 (at byte " + std::to_string(byte) + ")");
    return bad((field_.empty() ? std::string{"the body"} : field_) +
               " is not valid JSON (at byte " + std::to_string(byte) + ")");
  }

 private:
  struct frame {
    bool array;
    std::string key;
    long index;
  };

  static caf::error bad(std::string what) {
    return make_error(errc::invalid_argument, std::move(what));
  }

  bool fail(std::string what) {
    if (!problem) problem = bad(std::move(what));
    return false;
  }

  void next_element() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }

  /// "tasks[3].payload.a" (keys shown as they are when plain, quoted
  /// otherwise); cut short when deep.
  std::string path() const {
    std::string out = field_;
    std::size_t shown = 0;
    for (const auto& f : frames_) {
      if (++shown > 12) {
        out += "...";
        break;
      }
      if (f.array) {
        if (f.index >= 0) out += "[" + std::to_string(f.index) + "]";
        continue;
      }
      if (f.key.empty() && &f == &frames_.back()) break;
      if (!out.empty()) out += '.';
      out += plain(f.key) ? f.key : quote_input(f.key, 40);
    }
    if (out.empty()) return "the body";
    return out.front() == '[' ? "the body" + out : out;
  }

  static bool plain(const std::string& key) {
    if (key.empty() || key.size() > 40) return false;
    for (char c : key)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '_' || c == '-'))
        return false;
    return true;
  }

  const std::string& field_;
  int max_depth_;
  std::vector<frame> frames_;
};

/// Checks only: a SAX handler that builds nothing.
class checking_handler {
 public:
  explicit checking_handler(document_tracker& t) : t_(t) {}

  bool null() { return t_.scalar(); }
  bool boolean(bool) { return t_.scalar(); }
  bool number_integer(json::number_integer_t) { return t_.scalar(); }
  bool number_unsigned(json::number_unsigned_t) { return t_.scalar(); }
  bool number_float(json::number_float_t, const json::string_t&) { return t_.scalar(); }
  bool string(json::string_t& s) { return t_.string(s); }
  bool binary(json::binary_t&) { return t_.scalar(); }
  bool start_object(std::size_t) { return t_.start_container(false); }
  bool end_object() {
    t_.end_container();
    return true;
  }
  bool start_array(std::size_t) { return t_.start_container(true); }
  bool end_array() {
    t_.end_container();
    return true;
  }
  bool key(json::string_t& k) { return t_.key(k); }
  bool parse_error(std::size_t byte, const std::string&, const nlohmann::detail::exception& e) {
    if (!t_.problem) t_.problem = t_.parse_failure(e, byte);
    return false;
  }

 private:
  document_tracker& t_;
};

}  // namespace

caf::error check_bounded(std::string_view text, const std::string& field, int max_depth) {
  document_tracker tracker{field, max_depth};
  checking_handler handler{tracker};
  try {
    if (json::sax_parse(text, &handler)) return caf::none;
  } catch (const json::exception& e) {
    return tracker.parse_failure(e, 0);
  }
  if (tracker.problem) return std::move(tracker.problem);
  return make_error(errc::invalid_argument,
                    (field.empty() ? std::string{"the body"} : field) + " is not valid JSON");
}

caf::expected<json> parse_bounded(std::string_view text, const std::string& field, int max_depth) {
  document_tracker tracker{field, max_depth};
  struct stop {};
  auto track = [&tracker](int, json::parse_event_t event, json& parsed) {
    bool ok = true;
    switch (event) {
      case json::parse_event_t::object_start:
        ok = tracker.start_container(false);
        break;
      case json::parse_event_t::array_start:
        ok = tracker.start_container(true);
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        tracker.end_container();
        break;
      case json::parse_event_t::key:
        ok = tracker.key(parsed.get_ref<const std::string&>());
        break;
      case json::parse_event_t::value:
        ok = parsed.is_string() ? tracker.string(parsed.get_ref<const std::string&>())
                                : tracker.scalar();
        break;
    }
    if (!ok) throw stop{};
    return true;
  };
  try {
    return json::parse(text, track);
  } catch (const stop&) {
    return std::move(tracker.problem);
  } catch (const json::parse_error& e) {
    return tracker.parse_failure(e, e.byte);
  } catch (const json::exception& e) {
    return tracker.parse_failure(e, 0);
  }
}

std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace taskmill::json
