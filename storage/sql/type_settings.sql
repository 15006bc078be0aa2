-- Settings per task type (SPEC §3): defaults of the tasks submitted without
-- them, kept in taskmill.task_types, which the nodes write from their
-- configuration, the one home of defaults.

-- The priority of a task submitted without one.
CREATE FUNCTION taskmill.default_priority() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT 3
$$;

CREATE FUNCTION taskmill.type_settings(p_type text) RETURNS taskmill.task_types
LANGUAGE plpgsql STABLE AS $$
DECLARE
  s taskmill.task_types;
BEGIN
  SELECT * INTO s FROM taskmill.task_types t
   WHERE t.type IN (p_type, '') ORDER BY t.type = p_type DESC LIMIT 1;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no task type settings yet: a taskmill node writes them as it starts'
      USING ERRCODE = '55000';
  END IF;
  RETURN s;
END
$$;

-- Per-type settings from a node's configuration (the empty type: defaults),
-- held to the same rules as a task's own; the running tasks of the scopes it
-- limits (its types with a running limit, and all tasks under a global
-- limit, p_global_limit > 0) are tallied from then on.
CREATE FUNCTION taskmill.put_type_settings(p_types text[], p_timeouts integer[],
                                           p_max_retries integer[], p_backoff_kinds text[],
                                           p_backoff_bases integer[], p_backoff_caps integer[],
                                           p_backoff_jitters real[], p_deadlines bigint[],
                                           p_limits integer[],
                                           p_heartbeat_timeouts bigint[] DEFAULT NULL,
                                           p_max_timeouts integer[] DEFAULT NULL,
                                           p_global_limit integer DEFAULT NULL,
                                           p_key_spaces jsonb DEFAULT NULL,
                                           p_type_key_spaces text[] DEFAULT NULL,
                                           p_key_paths text[] DEFAULT NULL,
                                           p_key_separators text[] DEFAULT NULL,
                                           p_rate_units integer[] DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_problem text;
  -- The types whose tasks are keyed otherwise from now on.
  v_rekeyed text[];
BEGIN
  PERFORM taskmill.put_key_spaces(p_key_spaces);
  -- The spaces its types are keyed in stay while it commits: a delete of
  -- one (taskmill.delete_key_space) waits, then finds them keyed.
  PERFORM 1 FROM taskmill.key_spaces k WHERE k.name = ANY (p_type_key_spaces)
   ORDER BY k.name FOR KEY SHARE;
  IF p_type_key_spaces IS NOT NULL THEN
    SELECT p INTO v_problem
      FROM unnest(p_types, p_type_key_spaces, p_key_paths, p_key_separators)
             AS u(type, space, path, separator),
           taskmill.type_key_problem(coalesce(nullif(u.type, ''), 'defaults'), u.space, u.path,
                                     u.separator) p
     WHERE p IS NOT NULL OR (u.type = '' AND u.space IS NOT NULL)
     LIMIT 1;
    IF FOUND THEN
      PERFORM taskmill.bad_argument(coalesce(v_problem,
                                             'defaults: key_space is a setting of each type'));
    END IF;
    v_rekeyed := ARRAY(
      SELECT u.type FROM unnest(p_types, p_type_key_spaces, p_key_paths, p_key_separators)
                           AS u(type, space, path, separator)
        LEFT JOIN taskmill.task_types s ON s.type = u.type
       WHERE (u.space, u.path, u.separator)
             IS DISTINCT FROM (s.key_space, s.key_path, s.key_separator));
  END IF;
  SELECT format('task type "%s": %s', u.type, p) INTO v_problem
    FROM unnest(p_types, p_timeouts, p_max_retries, p_backoff_kinds, p_backoff_bases,
                p_backoff_caps, p_backoff_jitters)
           AS u(type, timeout_ms, max_retries, kind, base, cap, jitter),
         taskmill.task_problem(coalesce(nullif(u.type, ''), 'any'), 'any', NULL, NULL, NULL,
                               u.max_retries, u.timeout_ms, u.kind, u.base, u.cap, u.jitter,
                               NULL, NULL, NULL, NULL) AS p
   WHERE p IS NOT NULL LIMIT 1;
  IF v_problem IS NULL THEN
    SELECT format('task type "%s": %s', u.type, x.p) INTO v_problem
      FROM unnest(p_types, p_timeouts, p_heartbeat_timeouts, p_max_timeouts, p_type_key_spaces,
                  p_rate_units)
             AS u(type, timeout_ms, heartbeat_ms, max_ms, space, units)
      LEFT JOIN taskmill.key_spaces k ON k.name = u.space,
           LATERAL (SELECT CASE
                      WHEN u.heartbeat_ms <= 0 THEN 'heartbeat_timeout must be positive'
                      WHEN u.max_ms < u.timeout_ms
                        THEN format('max_timeout must be at least the timeout (%s ms)',
                                    u.timeout_ms)
                      WHEN u.units < 1 OR u.units > coalesce(k.rate, 10000)
                        THEN format('rate_units must be from 1 to the rate of key space %s (%s)',
                                    k.name, coalesce(k.rate, 10000))
                    END) AS x(p)
     WHERE x.p IS NOT NULL LIMIT 1;
  END IF;
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION '%', v_problem USING ERRCODE = '22023';
  END IF;
  INSERT INTO taskmill.task_types AS s (type, timeout_ms, max_retries, backoff_kind,
                                        backoff_base_ms, backoff_cap_ms, backoff_jitter,
                                        pending_deadline_ms, running_limit,
                                        heartbeat_timeout_ms, max_timeout_ms, key_space,
                                        key_path, key_separator, rate_units, updated_at)
  SELECT u.type, u.timeout_ms, u.max_retries, u.kind, u.base, u.cap, u.jitter, u.deadline,
         u.running_limit, u.heartbeat_ms, u.max_ms, u.space, u.path, u.separator,
         coalesce(u.units, 1), now()
    FROM unnest(p_types, p_timeouts, p_max_retries, p_backoff_kinds, p_backoff_bases,
                p_backoff_caps, p_backoff_jitters, p_deadlines, p_limits, p_heartbeat_timeouts,
                p_max_timeouts, p_type_key_spaces, p_key_paths, p_key_separators, p_rate_units)
           AS u(type, timeout_ms, max_retries, kind, base, cap, jitter, deadline, running_limit,
                heartbeat_ms, max_ms, space, path, separator, units)
  ON CONFLICT (type) DO UPDATE
     SET timeout_ms = excluded.timeout_ms, max_retries = excluded.max_retries,
         backoff_kind = excluded.backoff_kind, backoff_base_ms = excluded.backoff_base_ms,
         backoff_cap_ms = excluded.backoff_cap_ms, backoff_jitter = excluded.backoff_jitter,
         pending_deadline_ms = excluded.pending_deadline_ms,
         running_limit = excluded.running_limit,
         -- Kept when a node of the release before them writes the others.
         heartbeat_timeout_ms = CASE WHEN p_heartbeat_timeouts IS NULL THEN s.heartbeat_timeout_ms
                                     ELSE excluded.heartbeat_timeout_ms END,
         max_timeout_ms = CASE WHEN p_max_timeouts IS NULL THEN s.max_timeout_ms
                               ELSE excluded.max_timeout_ms END,
         key_space = CASE WHEN p_type_key_spaces IS NULL THEN s.key_space
                          ELSE excluded.key_space END,
         key_path = CASE WHEN p_type_key_spaces IS NULL THEN s.key_path
                         ELSE excluded.key_path END,
         key_separator = CASE WHEN p_type_key_spaces IS NULL THEN s.key_separator
                              ELSE excluded.key_separator END,
         rate_units = CASE WHEN p_rate_units IS NULL THEN s.rate_units
                           ELSE excluded.rate_units END,
         updated_at = now();
  IF cardinality(v_rekeyed) > 0 THEN
    PERFORM taskmill.rekey_tasks(ARRAY(SELECT t.id FROM taskmill.tasks t
                                        WHERE t.type = ANY (v_rekeyed)
                                          AND t.status IN ('pending', 'failed', 'running')));
  END IF;
  PERFORM taskmill.track_running(ARRAY(SELECT u.type FROM unnest(p_types, p_limits) AS u(type, n)
                                        WHERE u.n > 0 AND u.type <> ''),
                                 coalesce(p_global_limit, 0) > 0);
END
$$;

CREATE FUNCTION taskmill.deadline_after(p_execute_at timestamptz, p_type text) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
  SELECT p_execute_at + s.pending_deadline_ms * interval '1 millisecond'
    FROM taskmill.type_settings(p_type) s
$$;
