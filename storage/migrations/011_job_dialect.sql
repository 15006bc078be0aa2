-- How a job's day-of-week field counts: unix (0 and 7 are Sunday, 5 is
-- Friday) or quartz (1 is Sunday, 6 is Friday, as Quartz and XXL-JOB count,
-- whose expressions people paste). Jobs stored before are unix.
ALTER TABLE taskmill.jobs
  ADD COLUMN dialect text NOT NULL DEFAULT 'unix' CHECK (dialect IN ('unix', 'quartz'));
ALTER TABLE taskmill.jobs ALTER COLUMN dialect DROP DEFAULT;
