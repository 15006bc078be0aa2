#include "storage/statements.hpp"

namespace taskmill::db::sql {

const statement submit_many{
    "submit_many",
    "SELECT s.ordinal, s.outcome, (s.task).* FROM taskmill.submit_many($1::text[], $2::text[], "
    "$3::bigint[], $4::jsonb[], $5::timestamptz[], $6::int[], $7::int[], $8::int[], $9::text[], "
    "$10::int[], $11::int[], $12::real[], $13::text[], $14::text[], $15::int[], $16::int[]) s"};

const statement reschedule{
    "reschedule",
    "SELECT r.outcome, (r.task).* FROM taskmill.reschedule($1::text, $2::text, $3::timestamptz, "
    "$4::jsonb) r"};

const statement cancel_by_id{"cancel_by_id",
                             "SELECT c.outcome, (c.task).* FROM taskmill.cancel($1::bigint) c"};

const statement cancel_by_key{
    "cancel_by_key", "SELECT c.outcome, (c.task).* FROM taskmill.cancel($1::text, $2::text) c"};

const statement claim{
    "claim",
    "SELECT * FROM taskmill.claim($1::text, $2::int, $3::int[], $4::text[], $5::int[], $6::int, "
    "$7::text[])"};

const statement next_due{"next_due",
                         "SELECT next_due_at, db_now FROM taskmill.next_due($1::text[])"};

const statement complete_many{
    "complete_many",
    "SELECT * FROM taskmill.complete_many($1::bigint[], $2::int[], $3::text[], $4::jsonb[], "
    "$5::text[], $6::text)"};

const statement get_task{"get_task", "SELECT * FROM taskmill.tasks WHERE id = $1::bigint"};

const statement put_type_settings{
    "put_type_settings",
    "SELECT taskmill.put_type_settings($1::text[], $2::int[], $3::int[], $4::text[], $5::int[], "
    "$6::int[], $7::real[], $8::bigint[], $9::int[])"};

const std::vector<const statement*>& all() {
  static const std::vector<const statement*> list{
      &submit_many, &reschedule,    &cancel_by_id, &cancel_by_key,     &claim,
      &next_due,    &complete_many, &get_task,     &put_type_settings,
  };
  return list;
}

}  // namespace taskmill::db::sql
