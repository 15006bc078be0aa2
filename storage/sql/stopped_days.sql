-- Days of stopped tasks (storage/migrations/021_stopped_tasks_by_day.sql).
-- The watcher makes each day's partition before the day begins; once a day
-- is wholly past the purge retention it is detached (its tasks are gone from
-- taskmill.tasks at once), what refers to its tasks is deleted a batch at a
-- time, and the day's table is dropped whole: no row of it is deleted, so
-- its rows cost the purge no WAL and leave nothing to vacuum.

CREATE FUNCTION taskmill.stopped_day_table(p_day date) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT 'stopped_tasks_' || to_char(p_day, 'YYYYMMDD')
$$;

-- The days that have a table, whether still a partition (attached) or
-- being purged, oldest first.
CREATE FUNCTION taskmill.stopped_days(OUT day date, OUT attached boolean) RETURNS SETOF record
LANGUAGE sql STABLE AS $$
  SELECT to_date(substr(c.relname, 15), 'YYYYMMDD'),
         EXISTS (SELECT 1 FROM pg_inherits i
                  WHERE i.inhrelid = c.oid AND i.inhparent = 'taskmill.stopped_tasks'::regclass)
    FROM pg_class c
   WHERE c.relnamespace = 'taskmill'::regnamespace AND c.relkind = 'r'
     AND c.relname ~ '^stopped_tasks_[0-9]{8}$'
   ORDER BY 1
$$;

-- Whether a day's stopped tasks wait for the whole day to be past the purge
-- retention and go together: where it is two days or more, a task then
-- stays at most half as long again. Under it, they go one by one.
CREATE FUNCTION taskmill.stopped_days_go_whole(p_retention_ms bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT p_retention_ms >= 2 * 86400000
$$;

-- Where a day begins: days are UTC's, whatever the server's time zone.
CREATE FUNCTION taskmill.stopped_day_start(p_day date) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
  SELECT p_day::timestamp AT TIME ZONE 'UTC'
$$;

-- Runs p_ddl unless a lock it needs is not free within a moment: statements
-- that read every partition (a task by id) would queue behind it. Answers
-- whether it ran; one that a row in the undated partition refuses (a day
-- made after a task stopped in it) does not run either.
CREATE FUNCTION taskmill.try_stopped_days_ddl(p_ddl text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_timeout text := current_setting('lock_timeout');
BEGIN
  PERFORM set_config('lock_timeout', '200ms', true);
  BEGIN
    EXECUTE p_ddl;
  EXCEPTION WHEN lock_not_available OR check_violation THEN
    PERFORM set_config('lock_timeout', v_timeout, true);
    RETURN false;
  END;
  PERFORM set_config('lock_timeout', v_timeout, true);
  RETURN true;
END
$$;

-- The partitions of the days from p_from to p_to that have none. Answers
-- how many were made.
CREATE FUNCTION taskmill.make_stopped_days(p_from date, p_to date) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_day date;
  v_made integer := 0;
BEGIN
  FOR v_day IN SELECT generate_series(p_from, p_to, interval '1 day')::date LOOP
    CONTINUE WHEN to_regclass('taskmill.' || taskmill.stopped_day_table(v_day)) IS NOT NULL;
    IF taskmill.try_stopped_days_ddl(format(
         'CREATE TABLE taskmill.%I PARTITION OF taskmill.stopped_tasks FOR VALUES FROM (%L) TO (%L)',
         taskmill.stopped_day_table(v_day), taskmill.stopped_day_start(v_day),
         taskmill.stopped_day_start(v_day + 1))) THEN
      v_made := v_made + 1;
    END IF;
  END LOOP;
  RETURN v_made;
END
$$;

-- Watcher: the next two days are made; a day being purged whose tasks'
-- references are all gone is dropped; the days wholly past the purge
-- retention are detached. Answers how many days were detached or dropped.
CREATE FUNCTION taskmill.turn_stopped_days(p_retention_ms bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_today date := (now() AT TIME ZONE 'UTC')::date;
  v_day date;
  v_done bigint;
  v_left boolean;
  v_turned integer := 0;
BEGIN
  PERFORM taskmill.make_stopped_days(v_today + 1, v_today + 2);
  FOR v_day IN SELECT d.day FROM taskmill.stopped_days() d WHERE NOT d.attached LOOP
    v_done := coalesce((SELECT p.done_to FROM taskmill.stopped_day_purges p WHERE p.day = v_day), 0);
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM taskmill.%I t WHERE t.id > $1)',
                   taskmill.stopped_day_table(v_day))
       INTO v_left USING v_done;
    CONTINUE WHEN v_left;
    EXECUTE format('DROP TABLE taskmill.%I', taskmill.stopped_day_table(v_day));
    DELETE FROM taskmill.stopped_day_purges p WHERE p.day = v_day;
    v_turned := v_turned + 1;
  END LOOP;
  FOR v_day IN SELECT d.day FROM taskmill.stopped_days() d
                WHERE d.attached
                  AND taskmill.stopped_day_start(d.day + 1)
                      <= now() - p_retention_ms * interval '1 ms' LOOP
    IF taskmill.try_stopped_days_ddl(format('ALTER TABLE taskmill.stopped_tasks DETACH PARTITION taskmill.%I',
                                            taskmill.stopped_day_table(v_day))) THEN
      INSERT INTO taskmill.stopped_day_purges (day) VALUES (v_day) ON CONFLICT DO NOTHING;
      v_turned := v_turned + 1;
    END IF;
  END LOOP;
  RETURN v_turned;
END
$$;

-- The next p_limit tasks, in id order, of the oldest day being purged, with
-- what names their keys; the day's purge moves past them (the caller
-- deletes what refers to them).
CREATE FUNCTION taskmill.stopped_day_batch(p_limit integer, OUT id bigint, OUT type text,
                                           OUT key text, OUT version bigint)
RETURNS SETOF record
LANGUAGE plpgsql AS $$
DECLARE
  v_day date := (SELECT min(d.day) FROM taskmill.stopped_days() d WHERE NOT d.attached);
  v_done bigint;
  v_ids bigint[];
  v_types text[];
  v_keys text[];
  v_versions bigint[];
BEGIN
  IF v_day IS NULL THEN
    RETURN;
  END IF;
  INSERT INTO taskmill.stopped_day_purges (day) VALUES (v_day) ON CONFLICT DO NOTHING;
  SELECT p.done_to INTO v_done FROM taskmill.stopped_day_purges p WHERE p.day = v_day;
  EXECUTE format('SELECT array_agg(b.id ORDER BY b.id), array_agg(b.type ORDER BY b.id), '
                 'array_agg(b.key ORDER BY b.id), array_agg(b.version ORDER BY b.id) '
                 'FROM (SELECT t.id, t.type, t.key, t.version FROM taskmill.%I t '
                 'WHERE t.id > $1 ORDER BY t.id LIMIT $2) b',
                 taskmill.stopped_day_table(v_day))
     INTO v_ids, v_types, v_keys, v_versions USING v_done, p_limit;
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  UPDATE taskmill.stopped_day_purges p SET done_to = v_ids[cardinality(v_ids)] WHERE p.day = v_day;
  RETURN QUERY SELECT * FROM unnest(v_ids, v_types, v_keys, v_versions);
END
$$;
