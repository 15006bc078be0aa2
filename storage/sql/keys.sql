-- Concurrency keys (SPEC §4 Keyed limits; tables in
-- storage/migrations/020_concurrency_keys.sql). A type that names a key
-- space has each task's key taken as it is submitted, from a payload path or
-- from its key up to a separator, and its class from the space's class path.
-- A claim serves the keys of a space in turns, in key order from where its
-- last claim stopped, each key at most its room: its limit (its own, its
-- class's, or the space's) less its running tasks, counted under the limits'
-- lock (taskmill.claim_rooms). A key's backlog costs a claim one index entry,
-- not a read through it.

-- What is wrong with a key space given as JSON ({"name", "limit", "keys",
-- "class_path", "classes", "rate", "period_ms"}), in the words of the
-- config, or NULL.
CREATE FUNCTION taskmill.key_space_problem(p_space jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_name text := p_space ->> 'name';
  v_bad text;
BEGIN
  IF coalesce(v_name, '') = '' OR length(v_name) > 200 THEN
    RETURN 'key_spaces: a name must be 1 to 200 characters';
  END IF;
  IF jsonb_typeof(p_space -> 'limit') IS DISTINCT FROM 'number'
     OR (p_space ->> 'limit')::numeric NOT BETWEEN 1 AND 1000000
     OR (p_space ->> 'limit')::numeric <> trunc((p_space ->> 'limit')::numeric) THEN
    RETURN format('key_spaces.%s.limit must be a whole number from 1 to 1000000', v_name);
  END IF;
  FOREACH v_bad IN ARRAY ARRAY['keys', 'classes'] LOOP
    IF p_space ? v_bad AND jsonb_typeof(p_space -> v_bad) <> 'object' THEN
      RETURN format('key_spaces.%s.%s must be a table of limits', v_name, v_bad);
    END IF;
  END LOOP;
  SELECT format('key_spaces.%s.%s.%s must be a whole number from 1 to 1000000',
                v_name, l.field, l.name) INTO v_bad
    FROM (SELECT 'keys' AS field, e.key AS name, e.value
            FROM jsonb_each(coalesce(p_space -> 'keys', '{}')) e
          UNION ALL
          SELECT 'classes', e.key, e.value
            FROM jsonb_each(coalesce(p_space -> 'classes', '{}')) e) l
   WHERE jsonb_typeof(l.value) <> 'number' OR l.value::numeric NOT BETWEEN 1 AND 1000000
      OR l.value::numeric <> trunc(l.value::numeric)
   LIMIT 1;
  IF v_bad IS NOT NULL THEN
    RETURN v_bad;
  END IF;
  IF p_space ? 'rate' AND (jsonb_typeof(p_space -> 'rate') IS DISTINCT FROM 'number'
                           OR (p_space ->> 'rate')::numeric NOT BETWEEN 1 AND 10000
                           OR (p_space ->> 'rate')::numeric <> trunc((p_space ->> 'rate')::numeric)) THEN
    RETURN format('key_spaces.%s.rate must be a whole number from 1 to 10000 (starts a period; '
                  'a higher rate is one over a shorter period)', v_name);
  END IF;
  IF (p_space ? 'rate') <> (p_space ? 'period_ms') THEN
    RETURN format('key_spaces.%s: rate and period (period_ms) go together', v_name);
  END IF;
  IF p_space ? 'period_ms' AND (jsonb_typeof(p_space -> 'period_ms') IS DISTINCT FROM 'number'
                                OR (p_space ->> 'period_ms')::numeric NOT BETWEEN 1 AND 86400000) THEN
    RETURN format('key_spaces.%s.period (period_ms) must be from 1 ms to 1 day', v_name);
  END IF;
  IF p_space ? 'classes' AND p_space -> 'classes' <> '{}' AND NOT p_space ? 'class_path' THEN
    RETURN format('key_spaces.%s.classes needs a class_path', v_name);
  END IF;
  RETURN taskmill.path_problem(format('key_spaces.%s.class_path', v_name),
                               p_space ->> 'class_path');
END
$$;

-- What is wrong with a payload path given as field p_field, or NULL.
CREATE FUNCTION taskmill.path_problem(p_field text, p_path text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_path IS NOT NULL THEN
    PERFORM p_path::jsonpath;
  END IF;
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  RETURN format('%s must be a JSON path such as $.tenant (got "%s")', p_field, p_path);
END
$$;

-- Limits given as JSON numbers (5 or 5.0), as whole ones.
CREATE FUNCTION taskmill.whole_limits(p_limits jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(jsonb_object_agg(e.key, (e.value #>> '{}')::numeric::integer), '{}')
    FROM jsonb_each(coalesce(p_limits, '{}')) e
$$;

-- The key spaces of a node's configuration (a JSON array of the objects
-- above), each refused naming the field at fault. Spaces it does not name
-- are another node's and stay.
CREATE FUNCTION taskmill.put_key_spaces(p_spaces jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_problem text;
BEGIN
  SELECT p INTO v_problem
    FROM jsonb_array_elements(coalesce(p_spaces, '[]')) s(space),
         taskmill.key_space_problem(s.space) p
   WHERE p IS NOT NULL LIMIT 1;
  IF v_problem IS NOT NULL THEN
    PERFORM taskmill.bad_argument(v_problem);
  END IF;
  INSERT INTO taskmill.key_spaces AS k (name, key_limit, key_limits, class_path, class_limits,
                                         rate, rate_period_ms)
  SELECT s.space ->> 'name', (s.space ->> 'limit')::numeric::integer,
         taskmill.whole_limits(s.space -> 'keys'), s.space ->> 'class_path',
         taskmill.whole_limits(s.space -> 'classes'), (s.space ->> 'rate')::numeric::integer,
         (s.space ->> 'period_ms')::numeric::integer
    FROM jsonb_array_elements(coalesce(p_spaces, '[]')) s(space)
  ON CONFLICT (name) DO UPDATE
     SET key_limit = excluded.key_limit, key_limits = excluded.key_limits,
         class_path = excluded.class_path, class_limits = excluded.class_limits,
         rate = excluded.rate, rate_period_ms = excluded.rate_period_ms, updated_at = now()
   WHERE (k.key_limit, k.key_limits, k.class_path, k.class_limits, k.rate, k.rate_period_ms)
         IS DISTINCT FROM (excluded.key_limit, excluded.key_limits, excluded.class_path,
                           excluded.class_limits, excluded.rate, excluded.rate_period_ms);
END
$$;

-- What is wrong with a type's key settings, or NULL.
CREATE FUNCTION taskmill.type_key_problem(p_type text, p_space text, p_path text,
                                          p_separator text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF p_space IS NULL THEN
    RETURN CASE WHEN p_path IS NOT NULL OR p_separator IS NOT NULL
                THEN format('types.%s: key_path and key_separator go with key_space', p_type) END;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM taskmill.key_spaces k WHERE k.name = p_space) THEN
    RETURN format('types.%s.key_space: no key space "%s" (key_spaces.%s)', p_type, p_space,
                  p_space);
  END IF;
  IF p_path IS NOT NULL AND p_separator IS NOT NULL THEN
    RETURN format('types.%s: key_path and key_separator are two ways to take a key; give one',
                  p_type);
  END IF;
  IF p_separator = '' THEN
    RETURN format('types.%s.key_separator must not be empty', p_type);
  END IF;
  RETURN taskmill.path_problem(format('types.%s.key_path', p_type), p_path);
END
$$;

-- A task's concurrency key: the value at p_path in its payload (a string or
-- a number), or its key up to the first p_separator (all of it without
-- one); NULL when the payload has no such value. A path in strict mode
-- that finds nothing finds nothing here too (silent), rather than failing.
-- Without either, the key given at submit (p_given), or '' for every task
-- given none: the space's limits then hold for the types that name it
-- together.
CREATE FUNCTION taskmill.concurrency_key_of(p_path text, p_separator text, p_key text,
                                            p_payload jsonb, p_given text DEFAULT NULL)
RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN p_separator IS NOT NULL THEN split_part(p_key, p_separator, 1)
              WHEN p_path IS NULL THEN coalesce(p_given, '')
              ELSE (SELECT v #>> '{}'
                      FROM jsonb_path_query_first(p_payload, p_path::jsonpath, '{}', true) v
                     WHERE jsonb_typeof(v) IN ('string', 'number')) END
$$;

-- What is wrong with a task of a keyed type for its key, or NULL. A key is
-- at most 500 characters, as a task's own.
CREATE FUNCTION taskmill.task_key_problem(p_type text, p_path text, p_separator text,
                                          p_key text, p_payload jsonb) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN k.key IS NULL
              THEN format('payload: %s, the concurrency key of type %s, must be a string or a '
                          'number', p_path, p_type)
              WHEN length(k.key) > 500
              THEN format('payload: %s, the concurrency key of type %s, must be at most 500 '
                          'characters', p_path, p_type) END
    FROM (SELECT taskmill.concurrency_key_of(p_path, p_separator, p_key, p_payload) AS key) k
$$;

-- What is wrong with a concurrency key p_given given at submit for a task
-- of type p_type (its key settings s), or NULL: only a type keyed without a
-- key_path or a key_separator takes its keys so.
CREATE FUNCTION taskmill.given_key_problem(p_type text, s taskmill.task_types, p_given text)
RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN p_given IS NULL THEN NULL
              WHEN s.key_space IS NULL
              THEN format('concurrency_key: type %s has no key space (types.%s.key_space)', p_type,
                          p_type)
              WHEN s.key_path IS NOT NULL OR s.key_separator IS NOT NULL
              THEN format('concurrency_key: type %s takes its key from %s', p_type,
                          coalesce('payload ' || s.key_path,
                                   format('its key up to "%s"', s.key_separator)))
              WHEN length(p_given) > 500
              THEN 'concurrency_key must be at most 500 characters' END
$$;

-- The class of a task of key space p_space: the value at the space's class
-- path in its payload, if any, as it is submitted.
CREATE FUNCTION taskmill.key_class_of(p_space text, p_payload jsonb) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT (SELECT left(v #>> '{}', 500)
            FROM jsonb_path_query_first(p_payload, k.class_path::jsonpath, '{}', true) v)
    FROM taskmill.key_spaces k WHERE k.name = p_space AND k.class_path IS NOT NULL
$$;

-- Where a task of type p_type, key p_key and payload p_payload is keyed now:
-- its type's key space, its key and its class. One whose payload lacks its
-- key takes the key '' (a submit is refused it); of a type whose keys are
-- given at submit, p_given (its key so far), else ''.
CREATE FUNCTION taskmill.keys_now(p_type text, p_key text, p_payload jsonb, p_given text,
                                  OUT key_space text, OUT concurrency_key text,
                                  OUT key_class text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  s taskmill.task_types := taskmill.type_settings(p_type);
BEGIN
  IF s.key_space IS NULL THEN
    RETURN;
  END IF;
  key_space := s.key_space;
  concurrency_key := left(coalesce(taskmill.concurrency_key_of(s.key_path, s.key_separator,
                                                               p_key, p_payload, p_given),
                                   ''), 500);
  key_class := taskmill.key_class_of(s.key_space, p_payload);
END
$$;

-- Tasks p_ids keyed as their types say now (taskmill.keys_now): after their
-- key settings changed, or a reschedule gave a task another payload or
-- copied it from a task of before.
CREATE FUNCTION taskmill.rekey_tasks(p_ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE taskmill.tasks t
     SET (key_space, concurrency_key, key_class) = (SELECT * FROM taskmill.keys_now(
                                                      t.type, t.key, t.payload, t.concurrency_key))
   WHERE t.id = ANY (p_ids);
END
$$;

-- Task p_task keyed as its type says now (taskmill.rekey_tasks).
CREATE FUNCTION taskmill.keyed_as_typed(p_task taskmill.tasks) RETURNS taskmill.tasks
LANGUAGE plpgsql AS $$
DECLARE
  v_task taskmill.tasks;
BEGIN
  IF p_task.key_space IS NULL AND (taskmill.type_settings(p_task.type)).key_space IS NULL THEN
    RETURN p_task;
  END IF;
  PERFORM taskmill.rekey_tasks(ARRAY[p_task.id]);
  SELECT * INTO v_task FROM taskmill.tasks t WHERE t.id = p_task.id;
  RETURN v_task;
END
$$;

-- A finished task that waits again (a retry, a re-run) is keyed as its type
-- says now: the type may have been keyed, or moved to another space, since.
CREATE FUNCTION taskmill.key_task_again() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  SELECT k.key_space, k.concurrency_key, k.key_class
    INTO NEW.key_space, NEW.concurrency_key, NEW.key_class
    FROM taskmill.keys_now(NEW.type, NEW.key, NEW.payload, NEW.concurrency_key) k;
  RETURN NEW;
END
$$;

CREATE TRIGGER tasks_keyed_again BEFORE UPDATE OF status ON taskmill.tasks
  FOR EACH ROW
  WHEN (OLD.status IN ('succeeded', 'dead', 'stopped', 'cancelled')
        AND NEW.status IN ('pending', 'failed'))
  EXECUTE FUNCTION taskmill.key_task_again();

-- The types of p_types (NULL: any) whose tasks are keyed, and their spaces.
CREATE FUNCTION taskmill.keyed_types(p_types text[], OUT types text[], OUT spaces text[])
LANGUAGE plpgsql STABLE AS $$
BEGIN
  -- Asked at every claim: without keyed types, a probe is all it costs.
  IF NOT EXISTS (SELECT 1 FROM taskmill.task_types s WHERE s.key_space IS NOT NULL) THEN
    types := '{}';
    spaces := '{}';
    RETURN;
  END IF;
  SELECT coalesce(array_agg(s.type ORDER BY s.type), '{}'),
         coalesce(array_agg(s.key_space ORDER BY s.type), '{}')
    INTO types, spaces
    FROM taskmill.task_types s
   WHERE s.key_space IS NOT NULL AND (p_types IS NULL OR s.type = ANY (p_types));
END
$$;

-- The running limit of key p_key (of class p_class) of space p_space: its
-- own, its class's, or the space's.
CREATE FUNCTION taskmill.key_limit(p_space taskmill.key_spaces, p_key text, p_class text)
RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce((p_space.key_limits ->> p_key)::integer,
                  (p_space.class_limits ->> p_class)::integer, p_space.key_limit)
$$;

-- Where key_limit's answer comes from, in its order: the key's own limit,
-- its class's, or the space's.
CREATE FUNCTION taskmill.key_limit_source(p_space taskmill.key_spaces, p_key text, p_class text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_space.key_limits ? p_key THEN 'key'
              WHEN p_class IS NOT NULL AND p_space.class_limits ? p_class THEN 'class'
              ELSE 'space' END
$$;

-- The keys of space p_space with waiting tasks at level p_level in key
-- order from p_from, around to where it began, each with its room (0 when
-- none of its tasks is due; within its rate, at p_units a start: see
-- storage/sql/key_rates.sql), how many it can give (its room, or fewer when
-- its first p_turn tasks show all it has that p_node may take: of p_types,
-- NULL: any, not pinned elsewhere), where its oldest task's row is and
-- whether p_node may take that task; until the keys can give p_want, up to
-- p_turn each, or p_visits were walked. p_held of each of p_held_keys are
-- locked for the caller's claim and not running yet. Two index descents a
-- key: the next key's first entry (in bytes, the first text after a key is
-- the key followed by chr(1)), and its first p_turn.
CREATE FUNCTION taskmill.walk_keys(p_space taskmill.key_spaces, p_level integer, p_from text,
                                   p_want integer, p_visits integer, p_turn integer,
                                   p_held_keys text[], p_held integer[], p_types text[],
                                   p_node text, p_units integer, OUT keys text[],
                                   OUT rooms integer[], OUT gives integer[], OUT rows_at tid[],
                                   OUT heads_taken boolean[])
LANGUAGE plpgsql STABLE AS $$
BEGIN
  WITH RECURSIVE walk(n, given, wrapped, key, room, gives, row_at, head_taken) AS (
    SELECT 0, 0, false, NULL::text COLLATE "C", 0, 0, NULL::tid, false
    UNION ALL
    SELECT w.n + 1, w.given + least(g.gives, p_turn), f.wrapped, f.key, f.room, g.gives,
           f.row_at, f.head_taken
      FROM walk w
     CROSS JOIN LATERAL (
       -- A key's rate is read only where the space has one and the key room
       -- to run more (the tasks held are counted by the rate already).
       SELECT y.wrapped, y.key, y.row_at, y.head_taken,
              CASE WHEN p_space.rate IS NULL OR y.room <= 0 THEN y.room
                   ELSE least(y.room,
                              greatest(p_space.rate
                                       - (SELECT u.units
                                            FROM taskmill.key_units_started(p_space, y.key) u),
                                       0) / p_units)
              END AS room
         FROM (
              SELECT x.wrapped, x.key, x.row_at,
                     (p_types IS NULL OR x.type = ANY (p_types))
                       AND (x.pinned_node IS NULL OR x.pinned_node = p_node) AS head_taken,
                     CASE WHEN x.execute_at > now() THEN 0
                          ELSE taskmill.key_limit(p_space, x.key, x.key_class)
                               - (SELECT count(*) FROM taskmill.tasks r
                                   WHERE r.key_space = p_space.name AND r.concurrency_key = x.key
                                     AND r.status = 'running')::integer
                               - coalesce(p_held[array_position(p_held_keys, x.key)], 0)
                     END AS room
                FROM ((SELECT w.wrapped, d.concurrency_key AS key, d.ctid AS row_at, d.execute_at,
                              d.key_class, d.type, d.pinned_node
                         FROM taskmill.tasks d
                        WHERE d.key_space = p_space.name AND d.status IN ('pending', 'failed')
                          AND d.priority = p_level
                          AND d.concurrency_key >= coalesce(w.key || chr(1), p_from COLLATE "C")
                        ORDER BY d.key_space, d.priority, d.concurrency_key, d.execute_at, d.id
                        LIMIT 1)
                      UNION ALL
                      (SELECT true, d.concurrency_key, d.ctid, d.execute_at, d.key_class, d.type,
                              d.pinned_node
                         FROM taskmill.tasks d
                        WHERE NOT w.wrapped AND p_from <> ''
                          AND d.key_space = p_space.name AND d.status IN ('pending', 'failed')
                          AND d.priority = p_level
                        ORDER BY d.key_space, d.priority, d.concurrency_key, d.execute_at, d.id
                        LIMIT 1)
                      LIMIT 1) x
               -- Kept apart, so that the room is counted once, not for each use.
               OFFSET 0) y
        OFFSET 0) f
     -- Its first p_turn tasks tell all it has when they are fewer or end in
     -- tasks due later; past them, it may have more for this node.
     CROSS JOIN LATERAL (
       SELECT CASE WHEN f.room <= 0 THEN 0
                   WHEN count(*) < p_turn OR bool_or(t.execute_at > now())
                     THEN least(f.room, count(*) FILTER (
                                  WHERE t.execute_at <= now()
                                    AND (p_types IS NULL OR t.type = ANY (p_types))
                                    AND (t.pinned_node IS NULL OR t.pinned_node = p_node)))::integer
                   ELSE f.room
              END AS gives
         FROM (SELECT d.execute_at, d.type, d.pinned_node FROM taskmill.tasks d
                WHERE f.room > 0 AND d.key_space = p_space.name
                  AND d.status IN ('pending', 'failed') AND d.priority = p_level
                  AND d.concurrency_key = f.key
                ORDER BY d.key_space, d.priority, d.concurrency_key, d.execute_at, d.id
                LIMIT p_turn) t) g
     WHERE w.n < p_visits AND w.given < p_want
       AND NOT (f.wrapped AND f.key >= p_from COLLATE "C")
  )
  SELECT coalesce(array_agg(w.key ORDER BY w.n), '{}'), coalesce(array_agg(w.room ORDER BY w.n), '{}'),
         coalesce(array_agg(w.gives ORDER BY w.n), '{}'),
         coalesce(array_agg(w.row_at ORDER BY w.n), '{}'),
         coalesce(array_agg(w.head_taken ORDER BY w.n), '{}')
    INTO keys, rooms, gives, rows_at, heads_taken
    FROM walk w WHERE w.n > 0;
END
$$;

-- Up to p_want due tasks of key space p_space at level p_level, of p_types
-- (NULL: any) that p_node may run, locked: the keys with room in turn from
-- the one after the space's last served, each up to its room and a turn of
-- 5 tasks (more when the keys with due tasks cannot fill the claim so),
-- oldest first; p_held of each of p_held_keys are locked for the claim
-- already (at another level). Answers their ids, types and keys, and
-- whether more may be due (it found all it wanted, or stopped walking keys
-- early). Runs under the limits' lock: the rooms counted hold until the
-- claim commits.
CREATE FUNCTION taskmill.lock_keyed(p_space text, p_types text[], p_level integer, p_node text,
                                    p_want integer, p_held_keys text[], p_held integer[],
                                    OUT ids bigint[], OUT types text[], OUT keys text[],
                                    OUT more boolean)
LANGUAGE plpgsql AS $$
DECLARE
  v_space taskmill.key_spaces;
  v_last text;
  -- A key's turn: a backlog delays another key's task by at most this many
  -- of its own a claim, and a claim walks a fifth as many keys as it takes
  -- tasks where keys have that many due.
  v_turn constant integer := 5;
  -- Keys walked past without room are walked again at the next claim: a
  -- bound on them bounds a claim's cost whatever the number of keys.
  v_visits integer := 2 * p_want + 32;
  v_walk record;
  v_giving integer;
  v_share integer;
  v_asked integer[] := '{}';
  v_left integer;
  v_filled boolean;
  -- When the first key the walk found at its rate may start again.
  v_opens_at timestamptz;
BEGIN
  ids := '{}';
  types := '{}';
  keys := '{}';
  more := false;
  SELECT * INTO v_space FROM taskmill.key_spaces k WHERE k.name = p_space;
  IF v_space.name IS NULL OR p_want <= 0 THEN
    RETURN;
  END IF;
  SELECT k.last_key INTO v_last FROM taskmill.key_turns k
   WHERE k.space = p_space AND k.priority = p_level;
  v_walk := taskmill.walk_keys(v_space, p_level, coalesce(v_last || chr(1), ''), p_want,
                               v_visits, v_turn, p_held_keys, p_held, p_types, p_node,
                               CASE WHEN v_space.rate IS NULL THEN 1
                                    ELSE taskmill.key_rate_units(v_space) END);
  IF cardinality(v_walk.keys) = 0 THEN
    RETURN;
  END IF;
  more := cardinality(v_walk.keys) >= v_visits;
  v_giving := (SELECT count(*) FROM unnest(v_walk.gives) g WHERE g > 0);
  -- What each key is asked for: what it can give, at most a turn, or an
  -- even share when the keys giving cannot fill the claim with turns; until
  -- the claim has all it wants, the keys cut off taking the next turns.
  v_share := greatest(v_turn, ceil(p_want::numeric / greatest(v_giving, 1))::integer);
  v_left := p_want;
  v_last := v_walk.keys[cardinality(v_walk.keys)];
  FOR i IN 1..cardinality(v_walk.keys) LOOP
    v_asked[i] := greatest(0, least(v_walk.gives[i], v_share, v_left));
    v_left := v_left - v_asked[i];
    IF v_left = 0 THEN
      v_last := v_walk.keys[i];
      EXIT;
    END IF;
  END LOOP;
  IF v_space.rate IS NOT NULL THEN
    v_opens_at := (SELECT min(taskmill.key_rate_opens_at(v_space, w.key))
                     FROM unnest(v_walk.keys, v_walk.rooms) AS w(key, room) WHERE w.room = 0);
  END IF;
  INSERT INTO taskmill.key_turns AS k (space, priority, last_key, rate_opens_at)
  VALUES (p_space, p_level, v_last, v_opens_at)
  ON CONFLICT (space, priority) DO UPDATE
     SET last_key = excluded.last_key, rate_opens_at = excluded.rate_opens_at;
  IF v_giving = 0 THEN
    RETURN;
  END IF;
  -- A key asked for one task gives the oldest the walk saw, if this node may
  -- take it, locked where it lies (a row changed since is passed over); one
  -- asked for more, or whose oldest is not for this node, its oldest that
  -- are, in the index.
  WITH asked AS (
    SELECT k.n, k.key, k.room, k.asked, k.row_at, k.asked = 1 AND k.head_taken AS head_only
      FROM unnest(v_walk.keys, v_walk.rooms, v_asked, v_walk.rows_at, v_walk.heads_taken)
           WITH ORDINALITY AS k(key, room, asked, row_at, head_taken, n)
     WHERE k.asked > 0
  ),
  -- Each row by its own key (a row whose place another key's task took
  -- since is passed over): one lookup a row, not a search of every key.
  locked AS (
    SELECT x.id, x.type, a.key FROM asked a
     CROSS JOIN LATERAL (
       SELECT d.id, d.type FROM taskmill.tasks d
        WHERE d.ctid = a.row_at AND d.concurrency_key = a.key
          AND d.key_space = p_space AND d.status IN ('pending', 'failed')
          AND d.priority = p_level AND d.execute_at <= now()
          AND (p_types IS NULL OR d.type = ANY (p_types))
          AND (d.pinned_node IS NULL OR d.pinned_node = p_node)
          FOR UPDATE SKIP LOCKED) x
     WHERE a.head_only
  ),
  locked_more AS (
    SELECT x.id, x.type, a.key, a.asked, a.room FROM asked a
     CROSS JOIN LATERAL (
       SELECT d.id, d.type FROM taskmill.tasks d
        WHERE d.key_space = p_space AND d.status IN ('pending', 'failed')
          AND d.priority = p_level AND d.concurrency_key = a.key COLLATE "C"
          AND d.execute_at <= now()
          AND (p_types IS NULL OR d.type = ANY (p_types))
          AND (d.pinned_node IS NULL OR d.pinned_node = p_node)
        ORDER BY d.key_space, d.priority, d.concurrency_key, d.execute_at, d.id
        LIMIT a.asked
        FOR UPDATE SKIP LOCKED) x
     WHERE NOT a.head_only
  ),
  taken AS (
    SELECT l.id, l.type, l.key, false AS filled FROM locked l
    UNION ALL
    SELECT m.id, m.type, m.key,
           -- A key that gave all it was asked with room to spare may have more.
           count(*) OVER (PARTITION BY m.key) = m.asked AND m.asked < m.room
      FROM locked_more m
  )
  SELECT coalesce(array_agg(t.id), '{}'), coalesce(array_agg(t.type), '{}'),
         coalesce(array_agg(t.key), '{}'), coalesce(bool_or(t.filled), false)
    INTO ids, types, keys, v_filled
    FROM taken t;
  PERFORM taskmill.note_key_starts(v_space, keys, types);
  more := more OR v_filled OR cardinality(ids) >= p_want;
END
$$;
