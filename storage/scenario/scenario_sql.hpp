#pragma once

// The statements `taskmill scenario` runs itself to wait and assert on what
// the nodes did; a scenario's own SQL (business tables, taskmill.submit in a
// transaction) comes from its file.

namespace taskmill::db::scenario_sql {

/// $1: status or NULL, $2: type or NULL. Answers the count.
extern const char* const count_tasks;
/// $1: type or NULL. Answers id, key, status of every such task.
extern const char* const list_tasks;
/// $1: node name, $2: when it was killed (RFC 3339). Answers how many
/// attempts it held then were recovered as lost, and the seconds from the
/// kill to the last recovery.
extern const char* const recovery_after_kill;
/// $1: kind or NULL. Answers the count of alerts raised.
extern const char* const count_alerts;
/// Answers id, attempt and execute_at (microseconds since the epoch) of
/// every task: when its latest attempt was due.
extern const char* const due_times;

}  // namespace taskmill::db::scenario_sql
