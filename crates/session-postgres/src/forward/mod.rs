//! Forwarding between servers that share one store (issue 39, item 4).
//!
//! [`Forwarder`] is a [`dsh_protocol::Client`] over the server's own (local) client. An op for
//! a session whose lease another live owner holds, and whose owner is a server that takes
//! forwarded ops (a row in `dsh_peers`, renewed by a heartbeat), is written to `dsh_ops` and
//! the owner is told with `NOTIFY dsh_ops`; the owner's forwarder claims it, applies it to its
//! local client, records the reply and tells the sender with `NOTIFY dsh_op_done`. The sender
//! returns the reply as its own. Notifications are hints: both sides also look every poll
//! interval, so a lost notification (a reconnect, a proxy without LISTEN) costs latency only.
//! No host-to-host connection is needed: the database is the only thing the hosts share.
//!
//! A session with no live owner is served locally (the local host resumes it, taking the
//! lease, as without forwarding); one whose owner takes no forwarded ops (a `dsh exec`, a
//! worker) is too, which answers `SESSION_LOCKED` naming the holder. The events of a session
//! another host owns are read from the store ([`tail`]): the committed events as they commit
//! (`NOTIFY dsh_commits` sent by every commit batch as a hint, polling as the fallback), only
//! those after the last seq read, projected by the host's projector kept across batches
//! ([`StoredProjection`]), with the seqs of the log, each once; and the owner's steers and
//! questions, which its server publishes to `dsh_live` ([`relay`]).

mod client;
mod error;
mod exec;
mod relay;
mod signals;
mod sql;
mod tail;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use dsh_protocol::{
    Client, CommandInfo, EventMsg, Op, OpAccepted, OpenSession, ProtocolError, SessionSummary,
    Snapshot,
};
use dsh_session::SessionHeader;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::conn::Db;
use crate::error::PgStoreError;
use crate::store::PgStore;

pub use error::{ForwardError, OWNER_LOST};
use signals::{Key, Signals};

/// How a server forwards.
#[derive(Debug, Clone)]
pub struct ForwardOptions {
    /// How often a waiter looks at the tables without a hint (default 2 s).
    pub poll: Duration,
    /// LISTEN for hints (default true). Off behind a proxy that does not pass notifications
    /// (PgBouncer in transaction mode): polling alone then.
    pub notifications: bool,
    /// How often the server says it takes forwarded ops (default 5 s; the row expires after
    /// three periods).
    pub heartbeat: Duration,
}

impl Default for ForwardOptions {
    fn default() -> Self {
        ForwardOptions {
            poll: Duration::from_secs(2),
            notifications: true,
            heartbeat: Duration::from_secs(5),
        }
    }
}

/// What the `session-postgres` plugin gives a composition root that serves sessions: its store
/// and the forwarding settings of its config.
#[derive(Debug)]
pub struct PgHandle {
    /// The store.
    pub store: Arc<PgStore>,
    /// The forwarding settings.
    pub forward: ForwardOptions,
}

impl dsh_kernel::Service for PgHandle {
    const NAME: &'static str = "session-postgres-handle";
}

/// Finds the current store (a composition reload may mount a new one).
pub type StoreResolver = Arc<dyn Fn() -> Option<Arc<PgStore>> + Send + Sync>;

/// A session's committed events projected into protocol events as the server's host projects
/// its own (the host's stored view, which the composition root hands over), its state kept from
/// one batch to the next: a watcher of a session another host writes projects each new event
/// once.
pub trait StoredProjection: Send {
    /// The protocol events of the next committed event (events come in seq order).
    fn project(&mut self, event: &dsh_session::Event) -> Vec<EventMsg>;
    /// The snapshot of the events projected so far.
    fn snapshot(&self) -> Snapshot;
}

/// Makes the projection of the stored session a header describes.
pub type Projections = Arc<dyn Fn(&SessionHeader) -> Box<dyn StoredProjection> + Send + Sync>;

/// What a server asks of a session's owner.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(crate) enum Request {
    /// [`Client::send`].
    Send {
        /// The op.
        op: Op,
    },
    /// [`Client::open`] (a resume of a session the owner serves).
    Open {
        /// The request.
        request: OpenSession,
    },
    /// [`Client::commands`].
    Commands,
    /// [`Client::close`].
    Close,
}

/// The owner's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(crate) enum Reply {
    /// `send` succeeded.
    Accepted {
        /// Its answer.
        accepted: OpAccepted,
    },
    /// `open` succeeded.
    Opened {
        /// The session.
        summary: Box<SessionSummary>,
    },
    /// `commands` succeeded.
    Commands {
        /// The commands.
        commands: Vec<CommandInfo>,
    },
    /// `close` succeeded.
    Closed,
    /// The call failed.
    Failed {
        /// Why.
        error: ProtocolError,
    },
    /// The addressee no longer holds the session at the epoch the op was routed by.
    NotOwner,
}

/// A session's lease as stored.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    pub owner: Option<String>,
    pub epoch: i64,
    pub live: bool,
    pub forwards: bool,
    pub next_seq: i64,
}

/// Where a session's ops go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// This host (it serves the session, or nobody does).
    Local,
    /// Another server.
    Remote { owner: String, epoch: i64 },
}

/// Column `i` of a row of the forwarding statement `op` (named in the error).
pub(crate) fn col<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a tokio_postgres::Row,
    i: usize,
    op: &'static str,
) -> Result<T, PgStoreError> {
    row.try_get(i)
        .map_err(|source| PgStoreError::Sql { op, source })
}

/// How many times an op is routed again when its owner changed under it.
const ROUTES: u32 = 3;

pub(crate) struct Shared {
    pub local: Arc<dyn Client>,
    pub db: Db,
    pub store: StoreResolver,
    pub signals: Arc<Signals>,
    pub options: ForwardOptions,
    pub projections: Projections,
    /// The relays of the sessions this server holds, by session ([`relay`]).
    pub relays: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
}

impl Shared {
    /// This host's owner id.
    pub fn me(&self) -> Option<String> {
        (self.store)().map(|s| s.owner().to_owned())
    }

    pub async fn lease(&self, id: &str) -> Result<Option<Lease>, PgStoreError> {
        let row = self
            .db
            .with("route an op", |c| {
                let id = id.to_owned();
                async move { c.client.query_opt(sql::ROUTE, &[&id]).await }
            })
            .await?;
        let Some(r) = row else { return Ok(None) };
        let op = "route an op";
        Ok(Some(Lease {
            owner: col(&r, 0, op)?,
            epoch: col(&r, 1, op)?,
            live: col(&r, 2, op)?,
            forwards: col(&r, 3, op)?,
            next_seq: col(&r, 4, op)?,
        }))
    }

    /// Whether another owner than this host holds a live lease on the session.
    pub fn elsewhere(&self, lease: &Lease) -> bool {
        lease.live && lease.owner.is_some() && lease.owner != self.me()
    }

    pub async fn route(&self, id: &str) -> Result<Route, PgStoreError> {
        match self.lease(id).await? {
            Some(l) if l.forwards && self.elsewhere(&l) => Ok(Route::Remote {
                owner: l.owner.unwrap_or_default(),
                epoch: l.epoch,
            }),
            _ => Ok(Route::Local),
        }
    }

    /// Forwards `request` to the session's owner; `None`: the session is this host's to serve.
    pub async fn forward(
        &self,
        id: &str,
        request: &Request,
    ) -> Result<Option<Reply>, ForwardError> {
        for _ in 0..ROUTES {
            let Route::Remote { owner, epoch } = self.route(id).await? else {
                return Ok(None);
            };
            match self.forward_once(id, &owner, epoch, request).await? {
                Some(Reply::NotOwner) | None => continue,
                Some(reply) => return Ok(Some(reply)),
            }
        }
        Err(ForwardError::Unsettled {
            session: id.to_owned(),
            attempts: ROUTES,
        })
    }

    /// One attempt: `None` when the op was withdrawn unclaimed (the owner went away).
    async fn forward_once(
        &self,
        id: &str,
        owner: &str,
        epoch: i64,
        request: &Request,
    ) -> Result<Option<Reply>, ForwardError> {
        let me = self.me().unwrap_or_default();
        let body = serde_json::to_string(request)
            .map_err(|source| ForwardError::BadReply { op: 0, source })?;
        let row = self
            .db
            .with("forward an op", |c| {
                let (id, owner, me, body) =
                    (id.to_owned(), owner.to_owned(), me.clone(), body.clone());
                async move {
                    c.client
                        .query_one(sql::SUBMIT, &[&id, &owner, &epoch, &me, &body])
                        .await
                }
            })
            .await?;
        let op: i64 = col(&row, 0, "forward an op")?;
        tracing::debug!(session = %id, %owner, op, "op forwarded");
        let mut rx = self.signals.watch(Key::Op(op));
        loop {
            rx.borrow_and_update();
            match self.op_state(op).await? {
                None => return Ok(None),
                Some(state) if state == "done" => return self.take(op).await,
                Some(state) => {
                    let lease = self.lease(id).await?;
                    let holds = lease.as_ref().is_some_and(|l| {
                        l.live && l.owner.as_deref() == Some(owner) && l.epoch == epoch
                    });
                    let serves = holds && lease.as_ref().is_some_and(|l| l.forwards);
                    if serves || (holds && state == "running") {
                        signals::wait(&mut rx, self.options.poll).await;
                        continue;
                    }
                    if state == "pending" {
                        if self.withdraw(op).await? {
                            tracing::info!(session = %id, %owner, op, "the owner went away before taking the op; routing it again");
                            return Ok(None);
                        }
                        // Claimed meanwhile: look again.
                        continue;
                    }
                    // Taken, and the owner lost the lease: a last look, then give it up.
                    if self.op_state(op).await?.as_deref() == Some("done") {
                        return self.take(op).await;
                    }
                    self.drop_op(op).await?;
                    return Err(ForwardError::OwnerLost {
                        session: id.to_owned(),
                        owner: owner.to_owned(),
                        op,
                    });
                }
            }
        }
    }

    async fn op_state(&self, op: i64) -> Result<Option<String>, PgStoreError> {
        let row = self
            .db
            .with("read a forwarded op", |c| async move {
                c.client.query_opt(sql::OP_STATE, &[&op]).await
            })
            .await?;
        row.map(|r| col(&r, 0, "read a forwarded op")).transpose()
    }

    async fn take(&self, op: i64) -> Result<Option<Reply>, ForwardError> {
        let row = self
            .db
            .with("take a reply", |c| async move {
                c.client.query_opt(sql::TAKE, &[&op]).await
            })
            .await?;
        let Some(row) = row else { return Ok(None) };
        let text: Option<String> = col(&row, 0, "take a reply")?;
        let reply = serde_json::from_str(text.as_deref().unwrap_or("null"))
            .map_err(|source| ForwardError::BadReply { op, source })?;
        Ok(Some(reply))
    }

    async fn withdraw(&self, op: i64) -> Result<bool, PgStoreError> {
        let row = self
            .db
            .with("withdraw an op", |c| async move {
                c.client.query_opt(sql::WITHDRAW, &[&op]).await
            })
            .await?;
        Ok(row.is_some())
    }

    async fn drop_op(&self, op: i64) -> Result<(), PgStoreError> {
        self.db
            .with("give an op up", |c| async move {
                c.client.execute(sql::DROP, &[&op]).await
            })
            .await
            .map(|_| ())
    }

    async fn heartbeat(&self) -> Result<(), PgStoreError> {
        let Some(me) = self.me() else { return Ok(()) };
        let ttl = self.options.heartbeat.as_secs_f64() * 3.0;
        self.db
            .with("say this server takes forwarded ops", |c| {
                let me = me.clone();
                async move { c.client.query_one(sql::HEARTBEAT, &[&me, &ttl]).await }
            })
            .await
            .map(|_| ())
    }
}

/// A server's client that forwards ops for sessions other servers own (see the module).
pub struct Forwarder {
    shared: Arc<Shared>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl Forwarder {
    /// Starts forwarding over `local` (this server's client) for the store `store` finds:
    /// creates the tables when missing, says this server takes forwarded ops, and starts the
    /// tasks (the op executor, the heartbeat, the LISTEN connection when notifications are on).
    /// `projections` projects the sessions other hosts write for this server's watchers. Runs
    /// its tasks on the current tokio runtime.
    pub async fn start(
        local: Arc<dyn Client>,
        store: StoreResolver,
        options: ForwardOptions,
        projections: Projections,
    ) -> Result<Arc<Forwarder>, ForwardError> {
        let current = store().ok_or_else(|| {
            PgStoreError::Runtime("no PostgreSQL store is mounted to forward through".into())
        })?;
        let config = current.connection_config();
        let mut db = Db::from_config(config.clone());
        db.reconnect_window = current.reconnect_window();
        db.with("create the forwarding tables", |c| async move {
            c.client.batch_execute(sql::SCHEMA).await
        })
        .await?;
        let shared = Arc::new(Shared {
            local,
            db,
            store,
            signals: Arc::new(Signals::default()),
            options,
            projections,
            relays: Mutex::new(HashMap::new()),
        });
        shared.heartbeat().await?;
        let mut tasks = Vec::new();
        if shared.options.notifications {
            let s = Arc::clone(&shared);
            let me: Arc<dyn Fn() -> Option<String> + Send + Sync> = Arc::new(move || s.me());
            tasks.push(tokio::spawn(signals::listen(
                config,
                Arc::clone(&shared.signals),
                me,
            )));
        }
        tasks.push(tokio::spawn(exec::run(Arc::clone(&shared))));
        let s = Arc::clone(&shared);
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(s.options.heartbeat).await;
                if let Err(e) = s.heartbeat().await {
                    tracing::warn!("forwarding heartbeat failed: {e}");
                }
            }
        }));
        Ok(Arc::new(Forwarder {
            shared,
            tasks: Mutex::new(tasks),
        }))
    }

    /// Stops taking forwarded ops (before the server closes its sessions): the tasks end and
    /// this server's row in `dsh_peers` goes, so other servers stop routing ops here.
    pub async fn stop(&self) {
        for t in self.tasks.lock().drain(..) {
            t.abort();
        }
        for (_, t) in self.shared.relays.lock().drain() {
            t.abort();
        }
        if let Some(me) = self.shared.me()
            && let Err(e) = self
                .shared
                .db
                .with("stop taking forwarded ops", |c| {
                    let me = me.clone();
                    async move { c.client.execute(sql::LEAVE, &[&me]).await }
                })
                .await
        {
            tracing::warn!("forwarding: {e}");
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        for t in self.tasks.lock().drain(..) {
            t.abort();
        }
        for (_, t) in self.shared.relays.lock().drain() {
            t.abort();
        }
    }
}
