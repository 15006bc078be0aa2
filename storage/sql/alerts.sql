-- Alerts (SPEC §6). Where something goes wrong, a row goes into the inbox
-- (note_dead_tasks; fire_job for missed and skipped firings); the leader's
-- alerter calls raise_alerts, which applies the rules of its configuration,
-- raises each alert once per (kind, subject) and queues its deliveries, then
-- takes the deliveries due and records how they went.
--
-- The rules (p_rules) are JSON, written by the node from its [alerts]:
--   {"default": {"dead_task": true, "failure_rate": 0.05,
--                "record_failure_rate": 0.05, "missed_firings": true,
--                "pending_after_ms": 3600000},
--    "types": {"<type>": {...}}, "jobs": {"<job>": {...}}}
-- A job's rule wins over its type's, which wins over the default.

-- Tasks that just went dead, for the next alert pass.
CREATE FUNCTION taskmill.note_dead_tasks(p_ids bigint[]) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO taskmill.alert_inbox (kind, task_id, attempt, type, key, batch, error, created_at)
  SELECT 'dead_task', t.id, t.attempt, t.type, t.key, t.batch, t.error, now()
    FROM taskmill.tasks t WHERE t.id = ANY (p_ids)
$$;

-- The setting p_name of the rule for a task of p_type (of job p_job, if any).
CREATE FUNCTION taskmill.alert_rule(p_rules jsonb, p_job text, p_type text, p_name text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(p_rules -> 'jobs' -> p_job -> p_name, p_rules -> 'types' -> p_type -> p_name,
                  p_rules -> 'default' -> p_name)
$$;

-- The job whose firing made batch p_batch, or NULL.
CREATE FUNCTION taskmill.firing_job(p_batch text) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT f.job FROM taskmill.job_firings f WHERE f.batch = p_batch LIMIT 1
$$;

-- Dead tasks and missed or skipped firings from the inbox, at most p_limit;
-- batches with a dead task are watched until they finish. Answers the ids
-- of the alerts raised.
CREATE FUNCTION taskmill.raise_inbox_alerts(p_rules jsonb, p_limit integer) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[];
BEGIN
  WITH taken AS (
    DELETE FROM taskmill.alert_inbox i
     WHERE i.id IN (SELECT x.id FROM taskmill.alert_inbox x ORDER BY x.id LIMIT p_limit
                       FOR UPDATE SKIP LOCKED)
    RETURNING i.*
  ),
  judged AS (
    SELECT t.*, coalesce(t.job, taskmill.firing_job(t.batch)) AS of_job FROM taken t
  ),
  watched AS (
    INSERT INTO taskmill.alert_batches (batch, type, created_at)
    SELECT DISTINCT ON (j.batch) j.batch, j.type, now() FROM judged j
     WHERE j.kind = 'dead_task' AND j.batch IS NOT NULL
    ON CONFLICT (batch) DO NOTHING
  ),
  raised AS (
    INSERT INTO taskmill.alerts AS a (kind, subject, type, job, batch, task_id, message, details,
                                      raised_at)
    SELECT j.kind,
           CASE WHEN j.kind = 'dead_task' THEN format('task %s attempt %s', j.task_id, j.attempt)
                ELSE 'firing ' || j.batch END,
           j.type, j.of_job, j.batch, j.task_id,
           CASE WHEN j.kind = 'dead_task'
                  THEN format('task %s (%s %s) is dead after attempt %s: %s', j.task_id, j.type,
                              j.key, j.attempt, coalesce(j.error, 'no error given'))
                WHEN j.kind = 'firing_missed'
                  THEN format('job %s: the firing of %s was missed (no leader ran then)',
                              j.job, to_char(j.fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS UTC'))
                ELSE format('job %s: the firing of %s was skipped (its previous firing was '
                            'still running)', j.job,
                            to_char(j.fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS UTC'))
           END,
           jsonb_strip_nulls(jsonb_build_object('task_id', j.task_id, 'attempt', j.attempt,
                                                'key', j.key, 'error', j.error,
                                                'fire_at', j.fire_at)),
           now()
      FROM judged j
     WHERE CASE WHEN j.kind = 'dead_task'
                  THEN taskmill.alert_rule(p_rules, j.of_job, j.type, 'dead_task') = 'true'
                ELSE taskmill.alert_rule(p_rules, j.of_job, j.type, 'missed_firings') = 'true' END
    ON CONFLICT (kind, subject) DO NOTHING
    RETURNING a.id
  )
  SELECT array_agg(r.id) INTO v_ids FROM raised r;
  RETURN coalesce(v_ids, '{}');
END
$$;

-- Watched batches (one of their tasks went dead, or reported failed
-- records) that have finished, at most p_limit: those whose share of dead
-- tasks (among those that ended succeeded, stopped or dead) is above the
-- rule's failure_rate, and those whose share of failed records (summed over
-- their tasks' progress reports) is above its record_failure_rate, are
-- alerted, once per batch and kind. Answers the ids of the alerts raised.
CREATE FUNCTION taskmill.raise_failure_rate_alerts(p_rules jsonb, p_limit integer)
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[];
BEGIN
  WITH watched AS (
    SELECT w.batch, w.type, taskmill.firing_job(w.batch) AS job, c.*
      FROM (SELECT * FROM taskmill.alert_batches x ORDER BY x.created_at LIMIT p_limit
               FOR UPDATE SKIP LOCKED) w
      CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE t.status IN ('pending', 'running', 'failed')) AS unfinished,
               count(*) FILTER (WHERE t.status = 'dead') AS dead,
               count(*) FILTER (WHERE t.status IN ('succeeded', 'stopped', 'dead')) AS ended,
               coalesce(sum(p.processed), 0) AS processed, coalesce(sum(p.failed), 0) AS failed
          FROM taskmill.tasks t LEFT JOIN taskmill.task_progress p ON p.task_id = t.id
         WHERE t.batch = w.batch) c
  ),
  finished AS (
    DELETE FROM taskmill.alert_batches b USING watched w
     WHERE b.batch = w.batch AND w.unfinished = 0
    RETURNING b.batch
  ),
  raised AS (
    INSERT INTO taskmill.alerts AS a (kind, subject, type, job, batch, message, details, raised_at)
    SELECT 'failure_rate', CASE WHEN w.job IS NULL THEN 'batch ' ELSE 'firing ' END || w.batch,
           w.type, w.job, w.batch,
           format('%s %s finished with %s of %s tasks dead (%s%%, above %s%%)',
                  CASE WHEN w.job IS NULL THEN 'batch' ELSE 'firing' END, w.batch, w.dead,
                  w.ended, round(100.0 * w.dead / w.ended, 1),
                  round(100 * taskmill.alert_rule(p_rules, w.job, w.type, 'failure_rate')::numeric, 1)),
           jsonb_build_object('dead', w.dead, 'ended', w.ended,
                              'failure_rate', round(w.dead::numeric / w.ended, 4),
                              'threshold', taskmill.alert_rule(p_rules, w.job, w.type, 'failure_rate')),
           now()
      FROM watched w JOIN finished f ON f.batch = w.batch
     WHERE w.ended > 0
       AND w.dead::float8 / w.ended
           > (taskmill.alert_rule(p_rules, w.job, w.type, 'failure_rate'))::float8
    UNION ALL
    SELECT 'record_failure_rate',
           CASE WHEN w.job IS NULL THEN 'batch ' ELSE 'firing ' END || w.batch,
           w.type, w.job, w.batch,
           format('%s %s finished with %s of %s records failed (%s%%, above %s%%)',
                  CASE WHEN w.job IS NULL THEN 'batch' ELSE 'firing' END, w.batch, w.failed,
                  w.processed, round(100.0 * w.failed / w.processed, 1),
                  round(100 * taskmill.alert_rule(p_rules, w.job, w.type,
                                                  'record_failure_rate')::numeric, 1)),
           jsonb_build_object('failed', w.failed, 'processed', w.processed,
                              'failure_rate', round(w.failed::numeric / w.processed, 4),
                              'threshold', taskmill.alert_rule(p_rules, w.job, w.type,
                                                               'record_failure_rate')),
           now()
      FROM watched w JOIN finished f ON f.batch = w.batch
     WHERE w.processed > 0
       AND w.failed::float8 / w.processed
           > (taskmill.alert_rule(p_rules, w.job, w.type, 'record_failure_rate'))::float8
    ON CONFLICT (kind, subject) DO NOTHING
    RETURNING a.id
  )
  SELECT array_agg(r.id) INTO v_ids FROM raised r;
  RETURN coalesce(v_ids, '{}');
END
$$;

-- Types whose oldest due task has waited longer than the rule's
-- pending_after_ms, alerted once while it lasts. The oldest p_scan due tasks
-- of each priority level are looked at (a bounded read however large the
-- backlog); a type is let go only when a look saw every overdue task.
-- Answers the ids of the alerts raised.
CREATE FUNCTION taskmill.raise_overdue_alerts(p_rules jsonb, p_scan integer) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  v_min_ms bigint;
  v_oldest jsonb;
  v_complete boolean;
  v_types text[];
  v_oldest_at timestamptz[];
  v_bounds bigint[];
  v_ids bigint[];
BEGIN
  SELECT min(b.ms) INTO v_min_ms
    FROM (SELECT (p_rules -> 'default' ->> 'pending_after_ms')::bigint AS ms
          UNION ALL
          SELECT (r.value ->> 'pending_after_ms')::bigint
            FROM jsonb_each(coalesce(p_rules -> 'types', '{}')) r) b
   WHERE b.ms > 0;
  IF v_min_ms IS NULL THEN
    DELETE FROM taskmill.overdue_types;
    RETURN '{}';
  END IF;
  WITH scan AS (
    SELECT o.type, o.execute_at, count(*) OVER (PARTITION BY p.level) AS level_n
      FROM generate_series(1, 5) AS p(level)
      CROSS JOIN LATERAL (
        SELECT t.type, t.execute_at FROM taskmill.tasks t
         WHERE t.status IN ('pending', 'failed') AND t.priority = p.level
           AND t.execute_at < now() - v_min_ms * interval '1 ms'
         ORDER BY t.execute_at LIMIT p_scan) o
  )
  SELECT coalesce(bool_and(g.complete), true), coalesce(jsonb_object_agg(g.type, g.oldest), '{}')
    INTO v_complete, v_oldest
    FROM (SELECT s.type, min(s.execute_at) AS oldest, bool_and(s.level_n < p_scan) AS complete
            FROM scan s GROUP BY s.type) g;

  SELECT coalesce(array_agg(e.key), '{}'), coalesce(array_agg((e.value #>> '{}')::timestamptz), '{}'),
         coalesce(array_agg(b.ms), '{}')
    INTO v_types, v_oldest_at, v_bounds
    FROM jsonb_each(v_oldest) e,
         LATERAL (SELECT (taskmill.alert_rule(p_rules, NULL, e.key, 'pending_after_ms'))::bigint
                           AS ms) b
   WHERE b.ms > 0 AND (e.value #>> '{}')::timestamptz < now() - b.ms * interval '1 ms';

  IF v_complete THEN
    DELETE FROM taskmill.overdue_types o WHERE NOT o.type = ANY (v_types);
  END IF;
  WITH overdue AS (
    SELECT * FROM unnest(v_types, v_oldest_at, v_bounds) AS n(type, oldest, bound_ms)
  ),
  fresh AS (
    INSERT INTO taskmill.overdue_types AS o (type, since)
    SELECT n.type, now() FROM overdue n
    ON CONFLICT (type) DO NOTHING
    RETURNING o.type, o.since
  ),
  raised AS (
    INSERT INTO taskmill.alerts AS a (kind, subject, type, message, details, raised_at)
    SELECT 'pending_too_old',
           format('type %s since %s', f.type,
                  to_char(f.since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')),
           f.type,
           format('type %s: a task has waited %s s past its time (bound %s s)', f.type,
                  round(extract(epoch FROM now() - n.oldest)), round(n.bound_ms / 1000.0, 1)),
           jsonb_build_object('oldest_execute_at', n.oldest, 'bound_ms', n.bound_ms),
           now()
      FROM fresh f JOIN overdue n ON n.type = f.type
    ON CONFLICT (kind, subject) DO NOTHING
    RETURNING a.id
  )
  SELECT array_agg(r.id) INTO v_ids FROM raised r;
  RETURN coalesce(v_ids, '{}');
END
$$;

-- One alert pass of the leader: raises what the rules call for, queues a
-- delivery of each new alert to each of p_webhooks, and answers the alerts
-- raised.
CREATE FUNCTION taskmill.raise_alerts(p_rules jsonb, p_webhooks text[], p_limit integer,
                                      p_check_overdue boolean, p_term bigint DEFAULT NULL)
RETURNS SETOF taskmill.alerts
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[];
BEGIN
  PERFORM taskmill.fence(p_term);
  v_ids := taskmill.raise_inbox_alerts(p_rules, p_limit)
           || taskmill.raise_failure_rate_alerts(p_rules, p_limit);
  IF p_check_overdue THEN
    v_ids := v_ids || taskmill.raise_overdue_alerts(p_rules, p_limit);
  END IF;
  INSERT INTO taskmill.alert_deliveries (alert_id, url, attempts, next_at)
  SELECT i.id, u.url, 0, now()
    FROM unnest(v_ids) AS i(id) CROSS JOIN unnest(p_webhooks) AS u(url);
  RETURN QUERY SELECT * FROM taskmill.alerts a WHERE a.id = ANY (v_ids) ORDER BY a.id;
END
$$;

-- Deliveries due now, at most p_limit, each taken for p_lease_ms: should
-- its deliverer die, it is due again after that.
CREATE FUNCTION taskmill.take_alert_deliveries(p_limit integer, p_lease_ms bigint,
                                               p_term bigint DEFAULT NULL)
RETURNS TABLE (url text, attempts integer, alert taskmill.alerts)
LANGUAGE sql AS $$
  SELECT taskmill.fence(p_term);
  WITH taken AS (
    UPDATE taskmill.alert_deliveries d
       SET attempts = d.attempts + 1, next_at = now() + p_lease_ms * interval '1 ms'
     WHERE (d.alert_id, d.url) IN (SELECT x.alert_id, x.url FROM taskmill.alert_deliveries x
                                    WHERE x.next_at <= now()
                                    ORDER BY x.next_at LIMIT p_limit FOR UPDATE SKIP LOCKED)
    RETURNING d.alert_id, d.url, d.attempts
  )
  SELECT t.url, t.attempts, a FROM taken t JOIN taskmill.alerts a ON a.id = t.alert_id
   ORDER BY a.id, t.url
$$;

-- How deliveries went: p_errors[i] NULL is delivered; otherwise it is tried
-- again after a backoff doubling from p_base_ms up to p_cap_ms, until
-- p_max_attempts were made. Answers how many were delivered.
CREATE FUNCTION taskmill.record_alert_deliveries(p_alert_ids bigint[], p_urls text[],
                                                 p_errors text[], p_max_attempts integer,
                                                 p_base_ms bigint, p_cap_ms bigint)
RETURNS integer
LANGUAGE sql AS $$
  WITH recorded AS (
    UPDATE taskmill.alert_deliveries d
       SET delivered_at = CASE WHEN r.error IS NULL THEN now() END,
           last_error = r.error,
           next_at = CASE WHEN r.error IS NULL OR d.attempts >= p_max_attempts THEN NULL
                          ELSE now() + least(p_cap_ms, p_base_ms * power(2, least(d.attempts - 1, 30)))
                                       * interval '1 ms' END
      FROM unnest(p_alert_ids, p_urls, p_errors) AS r(alert_id, url, error)
     WHERE d.alert_id = r.alert_id AND d.url = r.url AND d.delivered_at IS NULL
    RETURNING r.error IS NULL AS delivered
  )
  SELECT count(*) FILTER (WHERE delivered)::integer FROM recorded
$$;

-- GET /v1/alerts: alerts after id p_after_id, or raised after p_since, the
-- oldest p_limit of them; with neither, the newest p_limit. One row per
-- alert and webhook (url NULL: no deliveries), in the order of the alerts.
CREATE FUNCTION taskmill.list_alerts(p_after_id bigint, p_since timestamptz, p_limit integer)
RETURNS TABLE (alert taskmill.alerts, url text, attempts integer, next_at timestamptz,
               delivered_at timestamptz, last_error text)
LANGUAGE sql STABLE AS $$
  WITH chosen AS (
    (SELECT a FROM taskmill.alerts a
      WHERE (p_after_id IS NOT NULL OR p_since IS NOT NULL)
        AND a.id > coalesce(p_after_id, 0) AND a.raised_at > coalesce(p_since, '-infinity')
      ORDER BY a.id LIMIT p_limit)
    UNION ALL
    (SELECT a FROM taskmill.alerts a
      WHERE p_after_id IS NULL AND p_since IS NULL
      ORDER BY a.id DESC LIMIT p_limit)
  )
  SELECT c.a, d.url, d.attempts, d.next_at, d.delivered_at, d.last_error
    FROM chosen c LEFT JOIN taskmill.alert_deliveries d ON d.alert_id = (c.a).id
   ORDER BY (c.a).id, d.url
$$;

-- For /metrics: alerts by kind, and deliveries by state (pending, delivered,
-- failed: given up).
CREATE FUNCTION taskmill.alert_metrics() RETURNS TABLE (what text, name text, n bigint)
LANGUAGE sql STABLE AS $$
  SELECT 'alerts', a.kind, count(*) FROM taskmill.alerts a GROUP BY a.kind
  UNION ALL
  SELECT 'deliveries',
         CASE WHEN d.delivered_at IS NOT NULL THEN 'delivered'
              WHEN d.next_at IS NOT NULL THEN 'pending' ELSE 'failed' END,
         count(*)
    FROM taskmill.alert_deliveries d GROUP BY 2
$$;
