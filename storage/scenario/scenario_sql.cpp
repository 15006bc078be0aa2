#include "storage/scenario/scenario_sql.hpp"

namespace taskmill::db::scenario_sql {

const char* const count_tasks = R"sql(
SELECT count(*) FROM taskmill.tasks
 WHERE ($1::text IS NULL OR status::text = $1)
   AND ($2::text IS NULL OR type = $2)
)sql";

const char* const list_tasks = R"sql(
SELECT id, key, status::text FROM taskmill.tasks
 WHERE $1::text IS NULL OR type = $1
)sql";

const char* const recovery_after_kill = R"sql(
SELECT count(*),
       coalesce(extract(epoch FROM max(finished_at) - $2::timestamptz), 0)
  FROM taskmill.attempts
 WHERE node = $1 AND outcome = 'lost'
   AND started_at < $2::timestamptz AND finished_at >= $2::timestamptz
)sql";

const char* const count_alerts = R"sql(
SELECT count(*) FROM taskmill.alerts WHERE $1::text IS NULL OR kind = $1
)sql";

const char* const due_times = R"sql(
SELECT id, attempt, (extract(epoch FROM execute_at) * 1000000)::bigint FROM taskmill.tasks
)sql";

}  // namespace taskmill::db::scenario_sql
