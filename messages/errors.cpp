#include "messages/errors.hpp"

#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace taskmill {

caf::error make_error(errc code, std::string message) {
  return caf::error{static_cast<uint8_t>(code), error_category,
                    caf::make_message(std::move(message))};
}

caf::error make_error(errc code) {
  return make_error(code, to_string(code));
}

const char* to_string(errc code) {
  switch (code) {
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::not_found:
      return "not_found";
    case errc::conflict:
      return "conflict";
    case errc::payload_too_large:
      return "payload_too_large";
    case errc::unauthorized:
      return "unauthorized";
    case errc::storage_unavailable:
      return "storage_unavailable";
    case errc::storage_error:
      return "storage_error";
    case errc::retryable:
      return "retryable";
    case errc::unavailable:
      return "unavailable";
    case errc::internal:
      return "internal";
    case errc::method_not_allowed:
      return "method_not_allowed";
    case errc::forbidden:
      return "forbidden";
    case errc::misdirected:
      return "misdirected";
    case errc::unsupported_media_type:
      return "unsupported_media_type";
  }
  return "unknown";
}

bool is(const caf::error& err, errc code) {
  return err && err.category() == error_category && err.code() == static_cast<uint8_t>(code);
}

std::string error_message(const caf::error& err) {
  if (!err) return "no error";
  const auto& ctx = err.context();
  if (err.category() == error_category && ctx.match_elements<std::string>())
    return ctx.get_as<std::string>(0);
  return caf::to_string(err);
}

}  // namespace taskmill
