//! The schema and the statements. Each statement is one round trip (prepared once per
//! connection) and its own transaction.

/// The tables, created when missing (under an advisory lock, so that hosts starting together do
/// not race on the catalog).
///
/// `dsh_sessions`: one row per session: the header line verbatim, the listing facts, how many
/// events are stored (`next_seq`), and the write lease (`owner`, `epoch`, `expires_at`).
/// `materialized` turns true at the first flush (a created session that never flushed is not
/// listed, like a JSONL session with nothing on disk). `dsh_events`: one row per event keyed by
/// `(session_id, seq)`, its stored line verbatim (`line`), its type, `body`, the searchable text
/// (user prompts, assistant text, titles, a tool call's name and argument values, a tool
/// result's head: shown around a search hit) and `doc`, its words as a `tsvector` made by dsh
/// (`crate::search`; GIN-indexed; empty for a searchable event without words, NULL for other
/// events and for rows stored before `doc` existed, which a search indexes first).
pub(crate) const SCHEMA: &str = "
BEGIN;
SELECT pg_advisory_xact_lock(3939001);
CREATE TABLE IF NOT EXISTS dsh_sessions (
    id text PRIMARY KEY,
    header text NOT NULL,
    version bigint NOT NULL,
    created_at bigint NOT NULL,
    cwd text,
    parent_session text,
    title text,
    materialized boolean NOT NULL DEFAULT false,
    next_seq bigint NOT NULL DEFAULT 0,
    owner text,
    epoch bigint NOT NULL DEFAULT 0,
    expires_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS dsh_events (
    session_id text NOT NULL REFERENCES dsh_sessions (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    kind text NOT NULL,
    line text NOT NULL,
    body text,
    doc tsvector,
    PRIMARY KEY (session_id, seq)
);
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = 'dsh_events'::regclass AND attname = 'doc'
                      AND NOT attisdropped) THEN
        ALTER TABLE dsh_events ADD COLUMN doc tsvector;
    END IF;
END $$;
-- A stored line as jsonb for the catalog's queries: jsonb cannot hold the escape \\u0000 (a
-- NUL in a prompt or a tool's output), which a plain cast refuses, failing the whole listing.
CREATE OR REPLACE FUNCTION dsh_json(line text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
    SELECT (CASE WHEN strpos(line, '\\u0000') > 0
                 THEN regexp_replace(line, '(?<!\\\\)\\\\u0000', '', 'g')
                 ELSE line END)::jsonb
$f$;
-- Indexes looked up first: CREATE INDEX IF NOT EXISTS takes the table's SHARE lock before it
-- finds the index there, so every connect waited for the writers' inserts (and held theirs).
DO $$ BEGIN
    IF to_regclass('dsh_events_body_fts') IS NOT NULL THEN
        DROP INDEX dsh_events_body_fts;
    END IF;
    IF to_regclass('dsh_events_doc') IS NULL THEN
        CREATE INDEX dsh_events_doc ON dsh_events USING gin (doc) WHERE doc IS NOT NULL;
    END IF;
    IF to_regclass('dsh_events_unindexed') IS NULL THEN
        CREATE INDEX dsh_events_unindexed ON dsh_events (session_id, seq)
            WHERE doc IS NULL AND kind IN ('user/message', 'assistant/message', 'session/title',
                                           'tool/call', 'tool/result');
    END IF;
END $$;
COMMIT;
";

/// One commit batch: checks the lease (owner, epoch, not expired) and the committed count, and
/// inserts the batch's rows, all in one statement (one transaction, one round trip). Renews the
/// lease. Returns `(leased, inserted)`: `leased = 0` refused the whole batch. A batch that
/// commits sends `NOTIFY dsh_commits, id` (delivered at its commit): the hint servers that
/// follow the session from another host wait for (`crate::forward`).
///
/// `$1` id, `$2` owner, `$3` epoch, `$4` first seq of the batch (the committed count), `$5`
/// lines, `$6` kinds, `$7` bodies, `$8` lease seconds, `$9` latest title of the batch, `$10`
/// `synchronous_commit` of this transaction (`on`, or `off` for a write-through), `$11` the
/// searchable words (`tsvector` literals).
pub(crate) const APPEND: &str = "
WITH sync AS (
    SELECT set_config('synchronous_commit', $10, true) AS v
), lease AS (
    UPDATE dsh_sessions
       SET next_seq = $4 + cardinality($5::text[]),
           expires_at = now() + make_interval(secs => $8),
           materialized = true,
           updated_at = now(),
           title = COALESCE($9, title)
     WHERE id = $1 AND owner = $2 AND epoch = $3 AND expires_at > now() AND next_seq = $4
    RETURNING 1
), ins AS (
    INSERT INTO dsh_events (session_id, seq, line, kind, body, doc)
    SELECT $1, $4 + t.o - 1, t.l, t.k, t.b, t.d::tsvector
      FROM unnest($5::text[], $6::text[], $7::text[], $11::text[])
           WITH ORDINALITY AS t(l, k, b, d, o)
     WHERE EXISTS (SELECT 1 FROM lease)
    RETURNING 1
)
SELECT (SELECT count(*) FROM lease), (SELECT count(*) FROM ins), (SELECT v FROM sync),
       (SELECT max(pg_notify('dsh_commits', $1)::text) FROM lease)
";

/// Registers a new session and takes its lease (epoch 1). An id that exists is refused, unless
/// its row is a never-flushed registration whose lease expired (a crashed creator), which is
/// taken over. Returns the epoch, or no row when the id is taken.
///
/// `$1` id, `$2` header line, `$3` version, `$4` createdAt, `$5` cwd, `$6` parent, `$7` owner,
/// `$8` lease seconds.
pub(crate) const CREATE: &str = "
INSERT INTO dsh_sessions (id, header, version, created_at, cwd, parent_session, owner, epoch, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, 1, now() + make_interval(secs => $8))
ON CONFLICT (id) DO UPDATE
   SET header = excluded.header, version = excluded.version, created_at = excluded.created_at,
       cwd = excluded.cwd, parent_session = excluded.parent_session, owner = excluded.owner,
       epoch = dsh_sessions.epoch + 1, expires_at = excluded.expires_at, next_seq = 0,
       updated_at = now()
 WHERE NOT dsh_sessions.materialized
   AND (dsh_sessions.expires_at IS NULL OR dsh_sessions.expires_at <= now())
RETURNING epoch
";

/// Takes the lease of a stored session whose lease is free (released or expired): a new epoch.
/// Returns `(epoch, next_seq)`, or no row.
///
/// `$1` id, `$2` owner, `$3` lease seconds.
pub(crate) const ACQUIRE: &str = "
UPDATE dsh_sessions
   SET owner = $2, epoch = epoch + 1, expires_at = now() + make_interval(secs => $3)
 WHERE id = $1 AND materialized
   AND (owner IS NULL OR expires_at IS NULL OR expires_at <= now())
RETURNING epoch, next_seq
";

/// The lease of a session as it stands: `(owner, epoch, ms until expiry, materialized,
/// next_seq)`.
pub(crate) const LEASE_STATE: &str = "
SELECT owner, epoch,
       (extract(epoch FROM (expires_at - now())) * 1000)::bigint,
       materialized, next_seq
  FROM dsh_sessions WHERE id = $1
";

/// Renews the leases this writer still holds. Returns the ids renewed.
///
/// `$1` ids, `$2` epochs, `$3` owner, `$4` lease seconds.
pub(crate) const RENEW: &str = "
UPDATE dsh_sessions s
   SET expires_at = now() + make_interval(secs => $4)
  FROM unnest($1::text[], $2::bigint[]) AS t(id, epoch)
 WHERE s.id = t.id AND s.epoch = t.epoch AND s.owner = $3 AND s.expires_at > now()
RETURNING s.id
";

/// Releases a lease (close): the row of a never-flushed session goes, a stored one keeps no
/// owner (and `NOTIFY dsh_commits, id` tells the servers following it that it closed).
///
/// `$1` id, `$2` owner, `$3` epoch.
pub(crate) const RELEASE: &str = "
WITH gone AS (
    DELETE FROM dsh_sessions
     WHERE id = $1 AND owner = $2 AND epoch = $3 AND NOT materialized
    RETURNING 1
), released AS (
    UPDATE dsh_sessions SET owner = NULL, expires_at = NULL
     WHERE id = $1 AND owner = $2 AND epoch = $3 AND materialized
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT max(pg_notify('dsh_commits', $1)::text) FROM released)
";

/// The stored lines of a session, in seq order, up to a count.
pub(crate) const EVENTS: &str = "
SELECT line FROM dsh_events WHERE session_id = $1 AND seq < $2 ORDER BY seq
";

/// A stored session's header line and committed count (`None` row: not stored).
pub(crate) const SESSION: &str = "
SELECT header, next_seq FROM dsh_sessions WHERE id = $1 AND materialized
";

/// Every stored session, oldest first.
pub(crate) const LIST: &str = "
SELECT id, created_at, cwd, parent_session, version, title
  FROM dsh_sessions WHERE materialized ORDER BY created_at, id
";

/// Whether a session is stored or registered for write.
pub(crate) const EXISTS: &str = "SELECT 1 FROM dsh_sessions WHERE id = $1";

/// Deletes a session whose lease is free (its events go with it).
pub(crate) const DELETE: &str = "
DELETE FROM dsh_sessions
 WHERE id = $1 AND (owner IS NULL OR expires_at IS NULL OR expires_at <= now())
RETURNING 1
";

/// Imports a whole log as a stored session (no lease held afterwards). `$1` id, `$2` header,
/// `$3` version, `$4` createdAt, `$5` cwd, `$6` parent, `$7` title, `$8` lines, `$9` kinds,
/// `$10` bodies, `$11` searchable words. Returns the number of rows inserted (none when the id
/// exists).
pub(crate) const IMPORT: &str = "
WITH s AS (
    INSERT INTO dsh_sessions (id, header, version, created_at, cwd, parent_session, title,
                              materialized, next_seq)
    VALUES ($1, $2, $3, $4, $5, $6, $7, true, cardinality($8::text[]))
    ON CONFLICT (id) DO NOTHING
    RETURNING id
), ins AS (
    INSERT INTO dsh_events (session_id, seq, line, kind, body, doc)
    SELECT $1, t.o - 1, t.l, t.k, t.b, t.d::tsvector
      FROM unnest($8::text[], $9::text[], $10::text[], $11::text[])
           WITH ORDINALITY AS t(l, k, b, d, o)
     WHERE EXISTS (SELECT 1 FROM s)
    RETURNING 1
)
SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM ins)
";
