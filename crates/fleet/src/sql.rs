//! The statements of the queue.

/// The schema, created when missing (under an advisory lock: workers start at once). The
/// column and index added after the first release are looked up first: `ALTER TABLE … ADD
/// COLUMN IF NOT EXISTS` and `CREATE INDEX IF NOT EXISTS` lock the table before they find
/// there is nothing to do (the first exclusively), so every connect, a worker's or `dsh tasks
/// status`'s, waited for any transaction holding a task's row.
pub(crate) const SCHEMA: &str = "
BEGIN;
SELECT pg_advisory_xact_lock(3939002);
CREATE TABLE IF NOT EXISTS dsh_tasks (
    id bigserial PRIMARY KEY,
    prompt text NOT NULL,
    repo text NOT NULL,
    ref text,
    model text,
    effort text,
    state text NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'done', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    claimed_by text,
    visible_until timestamptz,
    session_id text,
    exit_code integer,
    turn_end text,
    error text,
    input_tokens bigint,
    output_tokens bigint,
    requests bigint,
    diff text,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz
);
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_attribute
        WHERE attrelid = 'dsh_tasks'::regclass AND attname = 'timeout_seconds' AND NOT attisdropped
    ) THEN
        ALTER TABLE dsh_tasks ADD COLUMN timeout_seconds integer;
    END IF;
    IF to_regclass('dsh_tasks_claimable') IS NULL THEN
        CREATE INDEX dsh_tasks_claimable ON dsh_tasks (state, visible_until, id);
    END IF;
END
$$;
COMMIT;
";

/// All of a file's tasks in one statement (atomic: all or none).
pub(crate) const SUBMIT: &str = "
INSERT INTO dsh_tasks (prompt, repo, ref, model, effort, timeout_seconds)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::integer[])
RETURNING id";

/// Claims the oldest queued task, or a running one whose claim expired (its worker died or was
/// cut off): locks it skipping rows others hold, marks it running by `$1` until now + `$2`
/// seconds and counts the attempt. The task's session is named at its first claim and kept: a
/// later attempt takes that session over.
pub(crate) const CLAIM: &str = "
UPDATE dsh_tasks SET
    state = 'running',
    attempts = attempts + 1,
    claimed_by = $1,
    visible_until = now() + make_interval(secs => $2),
    started_at = coalesce(started_at, now()),
    session_id = coalesce(session_id, 'task-' || id || '-' || substr(md5(random()::text), 1, 8))
WHERE id = (
    SELECT id FROM dsh_tasks
    WHERE state = 'queued' OR (state = 'running' AND visible_until < now())
    ORDER BY id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING id, attempts, session_id, prompt, repo, ref, model, effort, timeout_seconds";

/// Extends a claim, only while it is still this attempt's.
pub(crate) const RENEW: &str = "
UPDATE dsh_tasks SET visible_until = now() + make_interval(secs => $3)
WHERE id = $1 AND attempts = $2 AND state = 'running'
RETURNING id";

/// Records the result, only while the claim is still this attempt's.
pub(crate) const FINISH: &str = "
UPDATE dsh_tasks SET
    state = $3, exit_code = $4, turn_end = $5, error = $6,
    input_tokens = $7, output_tokens = $8, requests = $9, diff = $10,
    claimed_by = NULL, visible_until = NULL, finished_at = now()
WHERE id = $1 AND attempts = $2 AND state = 'running'
RETURNING id";

/// Gives a claimed task back to the queue (a worker stopping before it ran it to the end).
pub(crate) const RELEASE: &str = "
UPDATE dsh_tasks SET state = 'queued', claimed_by = NULL, visible_until = NULL
WHERE id = $1 AND attempts = $2 AND state = 'running'
RETURNING id";

/// Leaves a claimed task unclaimed but invisible until now + `$3` seconds (its session is still
/// held by an earlier attempt's writer): claimable again after that, as a new attempt.
pub(crate) const DEFER: &str = "
UPDATE dsh_tasks SET claimed_by = NULL, visible_until = now() + make_interval(secs => $3)
WHERE id = $1 AND attempts = $2 AND state = 'running'
RETURNING id";

/// Every task, oldest first.
pub(crate) const TASKS: &str = "
SELECT id, prompt, repo, ref, model, effort, state, attempts, claimed_by,
       (extract(epoch FROM visible_until) * 1000)::bigint,
       session_id, exit_code, turn_end, error, input_tokens, output_tokens, requests, diff,
       (extract(epoch FROM created_at) * 1000)::bigint,
       (extract(epoch FROM started_at) * 1000)::bigint,
       (extract(epoch FROM finished_at) * 1000)::bigint,
       timeout_seconds
FROM dsh_tasks ORDER BY id";
