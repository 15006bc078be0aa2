#include "config/effective_toml.hpp"

#include "messages/text.hpp"
#include "messages/url.hpp"

#include <sstream>

namespace taskmill {

std::string effective_toml(toml::table& shown, const config& cfg, bool masked) {
  auto section = [&](const char* name) { return shown.get_as<toml::table>(name); };
  if (auto node = section("node")) node->insert_or_assign("name", cfg.node.name);
  if (masked) {
    if (auto database = section("database"))
      database->insert_or_assign("url", redact_conninfo(cfg.database.url));
    if (auto api = section("api"); api && !cfg.api.token.empty())
      api->insert_or_assign("token", "***");
    if (auto cluster = section("cluster"); cluster && !cfg.cluster.secret.empty())
      cluster->insert_or_assign("secret", "***");
    auto mask_urls = [](toml::table& type) {
      for (const char* key : {"url", "cancel_url"})
        if (auto url = type.get_as<std::string>(key)) *url = redact_conninfo(url->get());
    };
    if (auto defaults = section("defaults")) mask_urls(*defaults);
    if (auto types = section("types"))
      for (auto&& [name, type] : *types)
        if (auto table = type.as_table()) mask_urls(*table);
    // A webhook's path is often its credential (Slack's, Teams').
    if (auto alerts = section("alerts"))
      if (auto hooks = alerts->get_as<toml::array>("webhooks"))
        for (auto& hook : *hooks)
          if (auto url = hook.as_string())
            if (auto parsed = parse_http_url(url->get()))
              *url = "http://" + parsed->authority + "/***";
  }
  std::ostringstream out;
  out << shown << "\n";
  return out.str();
}

}  // namespace taskmill
