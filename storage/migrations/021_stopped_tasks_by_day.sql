-- Stopped tasks (successes past the success retention, and skipped steps)
-- are kept apart from the live ones (SPEC §11): taskmill.tasks is
-- partitioned by status, and its stopped tasks by the day they stopped, so
-- that a purge drops whole days (storage/sql/stopped_days.sql) and neither
-- the live tasks' indexes nor their vacuums carry a week of history. A
-- statement that names the statuses it reads is planned against the live
-- tasks alone.
ALTER TABLE taskmill.tasks RENAME TO live_tasks;

CREATE TABLE taskmill.tasks (LIKE taskmill.live_tasks INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
  PARTITION BY LIST (status);

-- The ids go on from where the live tasks' own sequence stood.
DO $$
DECLARE
  v_next bigint;
BEGIN
  EXECUTE format('SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM %s',
                 pg_get_serial_sequence('taskmill.live_tasks', 'id'))
     INTO v_next;
  ALTER TABLE taskmill.live_tasks ALTER COLUMN id DROP IDENTITY;
  EXECUTE format('ALTER TABLE taskmill.tasks ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY '
                 '(START WITH %s)', v_next);
END
$$;

-- A day's partition holds the tasks stopped that day (UTC); those stopped
-- on a day without one (a purge retention under two days, or before the
-- watcher made it) wait in the undated one and are purged row by row.
CREATE TABLE taskmill.stopped_tasks PARTITION OF taskmill.tasks FOR VALUES IN ('stopped')
  PARTITION BY RANGE (updated_at);
CREATE TABLE taskmill.stopped_tasks_undated PARTITION OF taskmill.stopped_tasks DEFAULT;

-- What reads stopped tasks: by id (a task, its page of the list), by type
-- (the list by type), by batch, and the row purge by age.
CREATE INDEX stopped_tasks_by_id ON taskmill.stopped_tasks (id);
CREATE INDEX stopped_tasks_by_type ON taskmill.stopped_tasks (type, id);
CREATE INDEX stopped_tasks_by_batch ON taskmill.stopped_tasks (batch) WHERE batch IS NOT NULL;
CREATE INDEX stopped_tasks_by_age ON taskmill.stopped_tasks (updated_at);

-- A partition for each of the last two months' days that has stopped tasks,
-- for today and for tomorrow (as storage/sql/stopped_days.sql makes them).
DO $$
DECLARE
  v_day date;
BEGIN
  FOR v_day IN
    SELECT DISTINCT (t.updated_at AT TIME ZONE 'UTC')::date FROM taskmill.live_tasks t
     WHERE t.status = 'stopped' AND t.updated_at > now() - interval '62 days'
    UNION SELECT (now() AT TIME ZONE 'UTC')::date
    UNION SELECT (now() AT TIME ZONE 'UTC')::date + 1 LOOP
    EXECUTE format('CREATE TABLE taskmill.%I PARTITION OF taskmill.stopped_tasks '
                   'FOR VALUES FROM (%L) TO (%L)',
                   'stopped_tasks_' || to_char(v_day, 'YYYYMMDD'),
                   v_day::timestamp AT TIME ZONE 'UTC', (v_day + 1)::timestamp AT TIME ZONE 'UTC');
  END LOOP;
END
$$;

-- Moved, not deleted: the triggers of the definitions before these (which
-- would drop the tasks' keys) stay out of it.
INSERT INTO taskmill.stopped_tasks SELECT * FROM taskmill.live_tasks WHERE status = 'stopped';
ALTER TABLE taskmill.live_tasks DISABLE TRIGGER USER;
DELETE FROM taskmill.live_tasks WHERE status = 'stopped';
ALTER TABLE taskmill.live_tasks ENABLE TRIGGER USER;
ALTER TABLE taskmill.tasks ATTACH PARTITION taskmill.live_tasks
  FOR VALUES IN ('pending', 'running', 'succeeded', 'failed', 'dead', 'cancelled');

-- A day whose dependent rows (attempts, logs, keys, ...) a purge is
-- deleting, batch by batch in id order, before it drops the day.
CREATE TABLE taskmill.stopped_day_purges (
  day     date PRIMARY KEY,
  done_to bigint NOT NULL DEFAULT 0
);
