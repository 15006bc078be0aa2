#include "storage/lock_table.hpp"

#include "messages/validate.hpp"

namespace taskmill::db {

std::optional<std::string> lock_table_shortfall(int64_t locks_per_transaction, int64_t sessions) {
  auto holds = locks_per_transaction * sessions;
  auto wanted = lock_table_batches * max_batch_size;
  if (holds >= wanted) return std::nullopt;
  auto per_session = (wanted + sessions - 1) / sessions;
  return "PostgreSQL's lock table holds " + std::to_string(holds) +
         " locks (max_locks_per_transaction " + std::to_string(locks_per_transaction) + " x " +
         std::to_string(sessions) +
         " sessions): a submit holds a lock a task until it commits, so a few batches of " +
         std::to_string(max_batch_size) +
         " tasks at once (from several nodes or clients) can fill it, and then every statement "
         "that needs a lock fails until they end (the node answers 503, retryable). Set "
         "max_locks_per_transaction to " +
         std::to_string(per_session) + " or more (a server restart) to take " +
         std::to_string(lock_table_batches) + " at once";
}

caf::expected<std::optional<std::string>> lock_table_shortfall(connection& conn) {
  auto settings = conn.exec(
      "SELECT current_setting('max_locks_per_transaction')::bigint, "
      "current_setting('max_connections')::bigint "
      "+ current_setting('max_prepared_transactions')::bigint");
  if (!settings) return settings.error();
  return lock_table_shortfall(settings->int64(0, 0), settings->int64(0, 1));
}

}  // namespace taskmill::db
