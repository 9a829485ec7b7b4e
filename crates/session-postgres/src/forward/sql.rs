//! The forwarding tables and statements.

/// `dsh_live`: the live events of a session its owner publishes for servers that watch it from
/// another host (steers queued, delivered or withdrawn; questions asked and answered), with the
/// lease owner and epoch that published them (rows of an older lease are not shown and go) and
/// the last committed seq when they happened (watchers place them after that event).
/// `dsh_ops`: ops a host forwards to the owner of a session (`target`, the lease owner it was
/// routed by, at lease `epoch`); `state` goes `pending` → `running` (claimed by the owner) →
/// `done` (with `reply`), and the forwarding host deletes the row when it takes the reply or
/// gives the op up. `dsh_peers`: the owners whose server takes forwarded ops, with a heartbeat
/// expiry (a `dsh exec` or a worker holds leases but forwards nothing: it is not listed).
pub(crate) const SCHEMA: &str = "
BEGIN;
SELECT pg_advisory_xact_lock(3939002);
CREATE TABLE IF NOT EXISTS dsh_ops (
    id bigserial PRIMARY KEY,
    session_id text NOT NULL,
    target text NOT NULL,
    epoch bigint NOT NULL,
    sender text NOT NULL,
    request text NOT NULL,
    state text NOT NULL DEFAULT 'pending',
    reply text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS dsh_ops_pending ON dsh_ops (target) WHERE state = 'pending';
CREATE TABLE IF NOT EXISTS dsh_peers (
    owner text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS dsh_live (
    id bigserial PRIMARY KEY,
    session_id text NOT NULL,
    owner text NOT NULL,
    epoch bigint NOT NULL,
    seq bigint NOT NULL,
    event text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS dsh_live_session ON dsh_live (session_id, id);
COMMIT;
";

/// The channels: an op for an owner (payload: the owner), an op answered (payload: its id), a
/// commit batch or a released lease of a session (payload: its id; sent by the store's
/// statements).
pub(crate) const LISTEN: &str = "LISTEN dsh_ops; LISTEN dsh_op_done; LISTEN dsh_commits";

/// Where a session's ops go: `(owner, epoch, lease live, owner takes forwarded ops, next_seq)`;
/// no row when the session is not stored or registered.
pub(crate) const ROUTE: &str = "
SELECT s.owner, s.epoch, COALESCE(s.expires_at > now(), false),
       EXISTS (SELECT 1 FROM dsh_peers p WHERE p.owner = s.owner AND p.expires_at > now()),
       s.next_seq
  FROM dsh_sessions s WHERE s.id = $1
";

/// The sessions whose lease another live owner holds: `(id, owner)`. `$1` this host's owner.
pub(crate) const HELD_ELSEWHERE: &str = "
SELECT id FROM dsh_sessions
 WHERE owner IS NOT NULL AND owner <> $1 AND expires_at > now() AND id = ANY($2::text[])
";

/// Queues an op for `target` and tells it. `$1` session, `$2` target, `$3` epoch, `$4` sender,
/// `$5` the request (JSON). Returns the op's id.
pub(crate) const SUBMIT: &str = "
WITH ins AS (
    INSERT INTO dsh_ops (session_id, target, epoch, sender, request)
    VALUES ($1, $2, $3, $4, $5)
    RETURNING id
)
SELECT id, pg_notify('dsh_ops', $2)::text FROM ins
";

/// The owner claims the ops queued for it. `$1` owner. Returns `(id, session, epoch, request)`.
pub(crate) const CLAIM: &str = "
UPDATE dsh_ops SET state = 'running'
 WHERE target = $1 AND state = 'pending'
RETURNING id, session_id, epoch, request
";

/// The owner records an op's reply and tells the sender. `$1` id, `$2` reply (JSON).
pub(crate) const FINISH: &str = "
WITH u AS (
    UPDATE dsh_ops SET state = 'done', reply = $2 WHERE id = $1 AND state = 'running'
    RETURNING id
)
SELECT pg_notify('dsh_op_done', id::text)::text FROM u
";

/// An op as it stands: `(state, reply)`.
pub(crate) const OP_STATE: &str = "SELECT state, reply FROM dsh_ops WHERE id = $1";

/// The sender takes a reply (the row goes).
pub(crate) const TAKE: &str =
    "DELETE FROM dsh_ops WHERE id = $1 AND state = 'done' RETURNING reply";

/// The sender withdraws an op nobody claimed yet.
pub(crate) const WITHDRAW: &str =
    "DELETE FROM dsh_ops WHERE id = $1 AND state = 'pending' RETURNING 1";

/// The sender gives an op up whatever its state.
pub(crate) const DROP: &str = "DELETE FROM dsh_ops WHERE id = $1";

/// This server takes forwarded ops for `$1` until `$2` seconds from now; rows of peers and ops
/// abandoned for an hour go, and the live events of leases that are gone.
pub(crate) const HEARTBEAT: &str = "
WITH up AS (
    INSERT INTO dsh_peers (owner, expires_at) VALUES ($1, now() + make_interval(secs => $2))
    ON CONFLICT (owner) DO UPDATE SET expires_at = excluded.expires_at
    RETURNING 1
), old_peers AS (
    DELETE FROM dsh_peers WHERE expires_at < now() - interval '1 hour' RETURNING 1
), old_ops AS (
    DELETE FROM dsh_ops WHERE created_at < now() - interval '1 hour' RETURNING 1
), old_live AS (
    DELETE FROM dsh_live l WHERE NOT EXISTS (
        SELECT 1 FROM dsh_sessions s
         WHERE s.id = l.session_id AND s.owner = l.owner AND s.epoch = l.epoch
           AND s.expires_at > now())
    RETURNING 1
)
SELECT (SELECT count(*) FROM up), (SELECT count(*) FROM old_peers), (SELECT count(*) FROM old_ops),
       (SELECT count(*) FROM old_live)
";

/// This server stops taking forwarded ops.
pub(crate) const LEAVE: &str = "DELETE FROM dsh_peers WHERE owner = $1";

/// The stored session's header line.
pub(crate) const HEADER: &str = "SELECT header FROM dsh_sessions WHERE id = $1";

/// What a watcher has not read yet, in one round trip: the committed events after seq `$2` (at
/// most `$3`, in seq order; `src` 0, `n` the seq, the stored line, the seq) and the live events
/// after id `$4` that the session's current lease published (`src` 1, `n` the row id, the event
/// as JSON, the seq it follows). `$1` the session.
pub(crate) const TAIL: &str = "
(SELECT 0 AS src, seq AS n, line, seq AS at FROM dsh_events
  WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3)
UNION ALL
(SELECT 1, l.id, l.event, l.seq FROM dsh_live l
   JOIN dsh_sessions s ON s.id = l.session_id AND s.owner = l.owner AND s.epoch = l.epoch
  WHERE l.session_id = $1 AND l.id > $4 ORDER BY l.id)
ORDER BY src, n
";

/// The owner publishes a live event of a session it holds and tells the watchers (the commit
/// channel: they read both). `$1` session, `$2` owner, `$3` epoch, `$4` the event (JSON), `$5`
/// the last committed seq when it happened.
pub(crate) const PUBLISH: &str = "
WITH ins AS (
    INSERT INTO dsh_live (session_id, owner, epoch, event, seq) VALUES ($1, $2, $3, $4, $5)
    RETURNING id
)
SELECT id, pg_notify('dsh_commits', $1)::text FROM ins
";

/// The owner closed the session: its live events go. `$1` session, `$2` owner.
pub(crate) const UNPUBLISH: &str = "DELETE FROM dsh_live WHERE session_id = $1 AND owner = $2";
