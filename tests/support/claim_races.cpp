#include "tests/support/claim_races.hpp"

#include "messages/errors.hpp"
#include "storage/pg.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <thread>

namespace taskmill::test::races {

void race_claimers(const task_database& db, int workers, int attempt_column, race_record& record,
                   const std::function<std::string(int worker, std::mt19937& rng)>& claim_of,
                   const race_finish& finish) {
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      auto conn = db.connect();
      std::mt19937 rng(w);
      int idle = 0;
      while (idle < 50) {
        auto claimed = conn.exec(claim_of(w, rng));
        // A claim that fails counts as one that found nothing: a statement
        // that always fails ends the race (and fails it) instead of
        // spinning.
        if (!claimed) {
          std::fprintf(stderr, "race: a claim failed: %s\n",
                       error_message(claimed.error()).c_str());
          ++record.errors;
          ++idle;
          continue;
        }
        if (claimed->rows() == 0) {
          ++idle;
          std::this_thread::sleep_for(std::chrono::milliseconds{1});
          continue;
        }
        idle = 0;
        std::vector<int64_t> ids, attempts;
        for (int i = 0; i < claimed->rows(); ++i) {
          ids.push_back(claimed->int64(i, 0));
          attempts.push_back(claimed->int64(i, attempt_column));
          std::lock_guard<std::mutex> guard{record.mtx};
          ++record.runs[{ids.back(), static_cast<int>(attempts.back())}];
        }
        finish(conn, rng, ids, attempts);
      }
    });
  }
  for (auto& t : threads) t.join();
}

std::string claim_by_random_turns(int worker, std::mt19937& rng, int beyond,
                                  const std::string& limits) {
  std::vector<int64_t> turns(1 + rng() % 8);
  for (auto& level : turns) level = 1 + rng() % 5;
  return "SELECT id, attempt FROM taskmill.claim_by_turns('w" + std::to_string(worker) + "', " +
         std::to_string(turns.size() + rng() % beyond) + ", '" + integers(turns) + "', " + limits +
         ", NULL, NULL, NULL)";
}

std::string integers(const std::vector<int64_t>& values) {
  return db::number_array_literal(values, [](int64_t v) { return v; });
}

race_finish finish_a_third_retried(race_record& record, std::atomic<int>& stale) {
  return [&record, &stale](db::connection& conn, std::mt19937& rng, const std::vector<int64_t>& ids,
                           const std::vector<int64_t>& attempts) {
    std::vector<std::string> outcomes;
    for (size_t i = 0; i < ids.size(); ++i)
      outcomes.push_back(rng() % 3 == 0 ? "retry" : "succeeded");
    auto done =
        conn.exec("SELECT count(*) FILTER (WHERE NOT applied) FROM taskmill.complete_many('" +
                  integers(ids) + "', '" + integers(attempts) + "', '" +
                  db::array_literal({outcomes.begin(), outcomes.end()}) + "', NULL, NULL, 'w')");
    if (!done) {
      std::fprintf(stderr, "race: outcomes failed: %s\n", error_message(done.error()).c_str());
      ++record.errors;
    } else {
      stale += std::stoi(done->string(0, 0));
    }
  };
}

void check_every_task_ran_once_an_attempt(const task_database& db, race_record& record,
                                          const std::atomic<int>& stale, int tasks) {
  BOOST_CHECK_EQUAL(record.errors.load(), 0);
  BOOST_CHECK_EQUAL(stale.load(), 0);
  BOOST_CHECK_EQUAL(record.claimed_twice(), 0);
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status NOT IN ('succeeded', 'dead')"),
      "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT sum(attempt) FROM taskmill.tasks"),
                    std::to_string(record.runs.size()));
  BOOST_CHECK_GT(record.runs.size(), static_cast<size_t>(tasks));
}

void check_key_limits_at_commit(const task_database& db) {
  db.exec(R"sql(
    CREATE TABLE key_limit_passed (key text, running bigint, key_limit integer);
    CREATE FUNCTION check_key_limit() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      v_running bigint;
      v_limit integer;
    BEGIN
      SELECT count(*) INTO v_running FROM taskmill.tasks t
       WHERE t.key_space = NEW.key_space AND t.concurrency_key = NEW.concurrency_key
         AND t.status = 'running';
      SELECT coalesce((s.key_limits ->> NEW.concurrency_key)::integer,
                      (s.class_limits ->> NEW.key_class)::integer, s.key_limit)
        INTO v_limit FROM taskmill.key_spaces s WHERE s.name = NEW.key_space;
      IF v_running > v_limit THEN
        INSERT INTO key_limit_passed VALUES (NEW.concurrency_key, v_running, v_limit);
      END IF;
      RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER key_limit_checked AFTER UPDATE OF status ON taskmill.tasks
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
      WHEN (NEW.status = 'running' AND NEW.key_space IS NOT NULL)
      EXECUTE FUNCTION check_key_limit();
  )sql");
}

int64_t key_limits_passed(const task_database& db) {
  return std::stoll(db.scalar("SELECT count(*) FROM key_limit_passed"));
}

}  // namespace taskmill::test::races
