-- Rates of keys (SPEC §4 Keyed limits; table taskmill.key_starts in
-- storage/migrations/020_concurrency_keys.sql). A key space with a rate lets
-- each key start at most `rate` units in any window of its period: a key
-- has `rate` slots, each holding the time of the last start that took it,
-- and a start (of a type costing u units: u slots) takes only slots whose
-- last start is a period old or more. So one slot's starts are a period
-- apart whatever order claims commit in, and no window of a period holds
-- more than `rate` units of starts. Counted under the limits' lock, in the
-- claim that starts them (taskmill.lock_keyed); a retry is a start again.
-- The purge sweep drops the slots of keys idle for a period.

-- The units key p_key of space p_space started in the period now ending. A
-- table function: a claim's walk reads it inline for each key it passes.
CREATE FUNCTION taskmill.key_units_started(p_space taskmill.key_spaces, p_key text)
RETURNS TABLE (units integer)
LANGUAGE sql STABLE AS $$
  SELECT (count(*) FILTER (WHERE s > now() - p_space.rate_period_ms
                                             * interval '1 millisecond'))::integer
    FROM taskmill.key_starts k, unnest(k.starts) s
   WHERE k.space = p_space.name AND k.key = p_key COLLATE "C"
$$;

-- The units key p_key of space p_space may start now (a large number when
-- the space has no rate).
CREATE FUNCTION taskmill.key_rate_room(p_space taskmill.key_spaces, p_key text) RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN p_space.rate IS NULL THEN 1000000000
              ELSE p_space.rate - (SELECT u.units
                                     FROM taskmill.key_units_started(p_space, p_key) u) END
$$;

-- When key p_key of space p_space may start one unit again.
CREATE FUNCTION taskmill.key_rate_opens_at(p_space taskmill.key_spaces, p_key text)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
  SELECT min(s) + p_space.rate_period_ms * interval '1 millisecond'
    FROM taskmill.key_starts k, unnest(k.starts) s
   WHERE k.space = p_space.name AND k.key = p_key COLLATE "C"
     AND s > now() - p_space.rate_period_ms * interval '1 millisecond'
$$;

-- The most a start of a task of space p_space costs (its types' rate_units,
-- at most the rate, which may have been lowered since a type's were
-- checked): a key's room in tasks is its room in units over that.
CREATE FUNCTION taskmill.key_rate_units(p_space taskmill.key_spaces) RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT least(coalesce(max(s.rate_units), 1), coalesce(p_space.rate, 1))
    FROM taskmill.task_types s WHERE s.key_space = p_space.name
$$;

-- Starts of tasks of p_types (one each) for keys p_keys of space p_space,
-- now: each takes its type's units of its key's oldest slots.
CREATE FUNCTION taskmill.note_key_starts(p_space taskmill.key_spaces, p_keys text[],
                                         p_types text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_space.rate IS NULL OR cardinality(p_keys) = 0 THEN
    RETURN;
  END IF;
  INSERT INTO taskmill.key_starts AS k (space, key, starts)
  SELECT p_space.name, u.key, array_fill(now(), ARRAY[least(u.units, p_space.rate)])
    FROM (SELECT t.key, sum(coalesce(s.rate_units, 1))::integer AS units
            FROM unnest(p_keys, p_types) AS t(key, type)
            LEFT JOIN taskmill.task_types s ON s.type = t.type
           GROUP BY t.key) u
  ON CONFLICT (space, key) DO UPDATE
     -- The newest slots stay; the oldest, free by the room counted, are
     -- the ones taken.
     SET starts = ARRAY(SELECT s FROM unnest(k.starts) s ORDER BY s DESC
                         LIMIT greatest(p_space.rate - cardinality(excluded.starts), 0))
                  || excluded.starts;
END
$$;
