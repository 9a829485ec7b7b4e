//! [`PgStore`]: the PostgreSQL implementation of [`SessionPersistence`].
//!
//! A writer holds a **lease** on each session it writes: `owner` (this store's id), `epoch`
//! (incremented at every acquisition) and `expires_at`, renewed by every commit batch and by a
//! renewal task while the session is open. Every commit batch is one statement that checks
//! owner, epoch, expiry and the committed count and inserts the batch's rows (one transaction,
//! one round trip); a writer whose lease expired or was taken over is refused with
//! [`PgStoreError::LeaseLost`] and nothing of the batch is written. Readers take no lease.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use dsh_session::codec::{DecodedLog, decode_jsonl};
use dsh_session::header::SessionHeader;
use dsh_session::{Event, SessionError, SessionPersistence, SessionSummary};
use parking_lot::Mutex;

use crate::conn::{Cols, Db, Runtime};
use crate::error::{LeaseLoss, PgStoreError};
use crate::sql;

/// How durable a commit batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// On disk before the commit returns (the server's `synchronous_commit`): `session/flush`.
    Durable,
    /// Committed and visible, safe against a crash of this process, not yet of the server's
    /// machine: the write-through before a tool's side effect.
    WriteThrough,
}

/// The default lease duration.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// One row to insert: the stored line, the event type, the searchable text and its words.
#[derive(Debug, Clone)]
struct Row {
    line: String,
    kind: String,
    body: Option<String>,
    doc: Option<String>,
    title: Option<String>,
}

impl Row {
    fn of(event: &Event) -> Row {
        let kind = event.kind().to_owned();
        let crate::search::Indexed { body, doc, title } = crate::search::index(&kind, event.data());
        Row {
            line: event.to_json_line(),
            kind,
            body,
            doc,
            title,
        }
    }
}

/// A session open for write through this store.
#[derive(Debug)]
struct Writer {
    epoch: i64,
    /// Events committed to the database (the next batch's first seq).
    committed: i64,
    /// Appended, not yet committed.
    pending: Vec<Row>,
    /// The lease was found lost (by a batch or the renewal task).
    lost: Option<LeaseLoss>,
}

/// State shared with the renewal task.
#[derive(Debug)]
struct Inner {
    db: Db,
    owner: String,
    lease: Duration,
    writers: Mutex<HashMap<String, Arc<Mutex<Writer>>>>,
    /// Serialises the commits of one session (a flush and a write-through never interleave).
    gates: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// The PostgreSQL session store.
#[derive(Debug)]
pub struct PgStore {
    inner: Arc<Inner>,
    rt: Runtime,
}

/// Options of [`PgStore::connect`].
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// The lease duration (default 30 s); renewed every third of it.
    pub lease: Duration,
    /// This writer's owner id (default: `host:pid:random`).
    pub owner: Option<String>,
    /// How long an operation keeps reconnecting to a server that went away (default 30 s).
    pub reconnect_window: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            lease: DEFAULT_LEASE,
            owner: None,
            reconnect_window: Duration::from_secs(30),
        }
    }
}

fn default_owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    let nonce = uuid::Uuid::now_v7().simple().to_string();
    format!(
        "{host}:{}:{}",
        std::process::id(),
        &nonce[nonce.len() - 8..]
    )
}

fn lease_secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl PgStore {
    /// Connects to the store at `url` (a `postgresql://` URL or a key=value string; a unix
    /// socket directory goes in `host=`), creating the tables when missing, and starts the
    /// lease renewal task.
    pub fn connect(url: &str, options: PgOptions) -> Result<Self, PgStoreError> {
        let mut db = Db::new(url)?;
        db.reconnect_window = options.reconnect_window;
        let inner = Arc::new(Inner {
            db,
            owner: options.owner.unwrap_or_else(default_owner),
            lease: options.lease,
            writers: Mutex::new(HashMap::new()),
            gates: Mutex::new(HashMap::new()),
        });
        let rt = Runtime::start()?;
        // Connect now: a wrong URL or an unreachable server fails at start, naming it.
        let i = Arc::clone(&inner);
        rt.block(async move { i.db.first_connect().await })?;
        rt.handle().spawn(renew_loop(Arc::downgrade(&inner)));
        Ok(PgStore { inner, rt })
    }

    /// This writer's owner id (recorded in the leases it takes).
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// The connection settings (the forwarder opens connections of its own to the same
    /// database).
    pub(crate) fn connection_config(&self) -> tokio_postgres::Config {
        self.inner.db.config().clone()
    }

    /// How long an operation keeps reconnecting.
    pub(crate) fn reconnect_window(&self) -> Duration {
        self.inner.db.reconnect_window
    }

    /// Statements sent so far (one round trip each). A commit batch costs one.
    pub fn round_trips(&self) -> u64 {
        self.inner.db.round_trips()
    }

    /// Connections made after the first one (a server restart, a cut connection).
    pub fn reconnects(&self) -> u64 {
        self.inner.db.reconnects()
    }

    /// Runs one statement (`op`, given a live connection) on the store's runtime, with the
    /// store's reconnects, and waits for it.
    pub(crate) fn query<T, F, Fut>(&self, what: &'static str, op: F) -> Result<T, PgStoreError>
    where
        T: Send + 'static,
        F: Fn(Arc<crate::conn::Conn>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>> + Send,
    {
        let inner = Arc::clone(&self.inner);
        self.rt.block(async move { inner.db.with(what, op).await })
    }

    /// The lease epoch this store holds on a session open for write.
    pub fn epoch(&self, id: &str) -> Option<i64> {
        let w = self.inner.writers.lock().get(id).cloned()?;
        let e = w.lock().epoch;
        Some(e)
    }

    fn writer(&self, id: &str) -> Result<Arc<Mutex<Writer>>, PgStoreError> {
        self.inner
            .writers
            .lock()
            .get(id)
            .cloned()
            .ok_or_else(|| PgStoreError::NotOpen(id.to_owned()))
    }

    /// Registers a new session and takes its lease.
    pub fn create_session(&self, header: &SessionHeader) -> Result<(), PgStoreError> {
        if self.inner.writers.lock().contains_key(&header.id) {
            return Err(PgStoreError::Exists(header.id.clone()));
        }
        let inner = Arc::clone(&self.inner);
        let h = header.clone();
        let epoch = self.rt.block(async move { inner.create(&h).await })?;
        self.inner.writers.lock().insert(
            header.id.clone(),
            Arc::new(Mutex::new(Writer {
                epoch,
                committed: 0,
                pending: Vec::new(),
                lost: None,
            })),
        );
        Ok(())
    }

    /// Takes the lease of a stored session and reads it.
    pub fn open_session(&self, id: &str) -> Result<DecodedLog, PgStoreError> {
        if self.inner.writers.lock().contains_key(id) {
            return Err(PgStoreError::Locked {
                session: id.to_owned(),
                owner: self.inner.owner.clone(),
                epoch: self.epoch(id).unwrap_or(0),
                expires_in_ms: 0,
            });
        }
        let inner = Arc::clone(&self.inner);
        let sid = id.to_owned();
        let (epoch, decoded) = self.rt.block(async move {
            let (epoch, count) = inner.acquire(&sid).await?;
            match inner.read(&sid, Some(count)).await {
                Ok(decoded) => Ok((epoch, decoded)),
                Err(e) => {
                    let _ = inner.release(&sid, epoch).await;
                    Err(e)
                }
            }
        })?;
        self.inner.writers.lock().insert(
            id.to_owned(),
            Arc::new(Mutex::new(Writer {
                epoch,
                committed: decoded.events.len() as i64,
                pending: Vec::new(),
                lost: None,
            })),
        );
        Ok(decoded)
    }

    /// Reads a stored session (no lease).
    pub fn read_session(&self, id: &str) -> Result<DecodedLog, PgStoreError> {
        let inner = Arc::clone(&self.inner);
        let sid = id.to_owned();
        self.rt.block(async move { inner.read(&sid, None).await })
    }

    /// The stored session as JSONL bytes: the header line and every event line, each with its
    /// `\n`, exactly as the JSONL store writes them.
    pub fn export_jsonl(&self, id: &str) -> Result<Vec<u8>, PgStoreError> {
        let inner = Arc::clone(&self.inner);
        let sid = id.to_owned();
        self.rt
            .block(async move { inner.raw(&sid, None).await.map(|(b, _)| b) })
    }

    /// Stores a whole JSONL log (as [`PgStore::export_jsonl`] gives it, or a plain JSONL log
    /// file) as a new session, after checking that it reads as a log (the same reader and
    /// admission as the JSONL store's). No lease is held afterwards. Refused when the id
    /// exists.
    pub fn import_jsonl(&self, bytes: &[u8]) -> Result<String, PgStoreError> {
        let decoded = decode_jsonl(bytes, 4, "import", "import")?;
        let header = decoded.header.clone();
        // The stored lines verbatim (a torn last line is left out, as the reader drops it).
        let ends: Vec<usize> = decoded
            .row_offsets
            .iter()
            .skip(1)
            .map(|&o| o as usize)
            .chain(std::iter::once(decoded.committed_len))
            .collect();
        let header_line = bytes
            .split(|&b| b == b'\n')
            .next()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .unwrap_or_default();
        let lines: Vec<String> = decoded
            .row_offsets
            .iter()
            .zip(&ends)
            .map(|(&start, &end)| {
                let line = bytes.get(start as usize..end).unwrap_or_default();
                let line = line.strip_suffix(b"\n").unwrap_or(line);
                String::from_utf8_lossy(line).into_owned()
            })
            .collect();
        let log = decoded.replay()?;
        let rows: Vec<Row> = log
            .events()
            .iter()
            .zip(lines)
            .map(|(e, line)| Row { line, ..Row::of(e) })
            .collect();
        let inner = Arc::clone(&self.inner);
        let h = header.clone();
        self.rt
            .block(async move { inner.import(&h, &header_line, rows).await })?;
        Ok(header.id)
    }

    /// Deletes a stored session whose lease is free.
    pub fn delete_session(&self, id: &str) -> Result<(), PgStoreError> {
        let inner = Arc::clone(&self.inner);
        let sid = id.to_owned();
        self.rt.block(async move {
            let gone = inner
                .db
                .with("delete", |c| {
                    let sid = sid.clone();
                    async move { c.client.query_opt(sql::DELETE, &[&sid]).await }
                })
                .await?;
            if gone.is_some() {
                return Ok(());
            }
            match inner.lease_state(&sid).await? {
                None => Err(PgStoreError::NotFound(sid)),
                Some(s) => Err(PgStoreError::Locked {
                    session: sid,
                    owner: s.owner.unwrap_or_default(),
                    epoch: s.epoch,
                    expires_in_ms: s.expires_in_ms.unwrap_or(0),
                }),
            }
        })
    }

    /// Buffers events of a session open for write.
    pub fn append_events(&self, id: &str, events: &[Arc<Event>]) -> Result<(), PgStoreError> {
        let w = self.writer(id)?;
        let mut w = w.lock();
        w.pending.extend(events.iter().map(|e| Row::of(e)));
        Ok(())
    }

    /// Commits the buffered events of a session durably: one statement (one round trip) that
    /// checks the lease and inserts the batch. Async: runs on the store's runtime.
    pub async fn commit(&self, id: &str) -> Result<(), PgStoreError> {
        self.commit_as(id, Durability::Durable).await
    }

    /// [`PgStore::commit`] with a chosen durability: `WriteThrough` commits with
    /// `synchronous_commit = off` for that transaction (set inside the same statement): the
    /// batch is committed and visible, safe against a crash of this process, and made durable
    /// by the server's WAL writer or the next durable commit (which flushes the WAL past it).
    pub async fn commit_as(&self, id: &str, durability: Durability) -> Result<(), PgStoreError> {
        let inner = Arc::clone(&self.inner);
        let sid = id.to_owned();
        self.rt
            .run(async move { inner.commit(&sid, durability).await })
            .await
    }

    /// Starts a write-through commit of what is buffered without waiting for it (an event other
    /// hosts must see before the next barrier: an approval request). A failure is logged; the
    /// batch stays buffered and the next barrier reports it.
    pub fn commit_soon(&self, id: &str) {
        let inner = Arc::clone(&self.inner);
        let sid = id.to_owned();
        self.rt.handle().spawn(async move {
            if let Err(e) = inner.commit(&sid, Durability::WriteThrough).await {
                tracing::warn!(session = %sid, "an early commit failed: {e}");
            }
        });
    }

    /// [`PgStore::commit_as`], blocking.
    pub fn commit_blocking(&self, id: &str, durability: Durability) -> Result<(), PgStoreError> {
        let inner = Arc::clone(&self.inner);
        let sid = id.to_owned();
        self.rt
            .block(async move { inner.commit(&sid, durability).await })
    }

    /// Commits what is buffered and releases the lease.
    pub fn close_session(&self, id: &str) -> Result<(), PgStoreError> {
        let Some(w) = self.inner.writers.lock().get(id).cloned() else {
            return Ok(());
        };
        let inner = Arc::clone(&self.inner);
        let sid = id.to_owned();
        let result = self.rt.block(async move {
            // Nothing buffered: nothing to commit (a never-flushed session stays unstored).
            let pending = !w.lock().pending.is_empty();
            let committed = if pending {
                inner.commit(&sid, Durability::Durable).await
            } else {
                Ok(())
            };
            let epoch = w.lock().epoch;
            let released = inner.release(&sid, epoch).await;
            committed.and(released)
        });
        self.inner.writers.lock().remove(id);
        self.inner.gates.lock().remove(id);
        result
    }

    /// Closes every session open for write (shutdown).
    pub fn close_all(&self) {
        let ids: Vec<String> = self.inner.writers.lock().keys().cloned().collect();
        for id in ids {
            if let Err(e) = self.close_session(&id) {
                tracing::error!(session = %id, "closing failed: {e}");
            }
        }
    }

    /// Renews the leases of the open sessions now (the renewal task does it every third of
    /// the lease). Returns the sessions whose lease was found lost.
    pub fn renew_now(&self) -> Result<Vec<String>, PgStoreError> {
        let inner = Arc::clone(&self.inner);
        self.rt.block(async move { inner.renew().await })
    }
}

/// The lease of a session as stored.
#[derive(Debug)]
struct LeaseState {
    owner: Option<String>,
    epoch: i64,
    expires_in_ms: Option<i64>,
    materialized: bool,
    next_seq: i64,
}

impl Inner {
    async fn lease_state(&self, id: &str) -> Result<Option<LeaseState>, PgStoreError> {
        let row = self
            .db
            .with("read the lease", |c| {
                let id = id.to_owned();
                async move { c.client.query_opt(&c.stmts.lease_state, &[&id]).await }
            })
            .await?;
        row.map(|r| {
            let c = Cols::new(&r, "read the lease");
            Ok(LeaseState {
                owner: c.get(0)?,
                epoch: c.get(1)?,
                expires_in_ms: c.get(2)?,
                materialized: c.get(3)?,
                next_seq: c.get(4)?,
            })
        })
        .transpose()
    }

    async fn create(&self, h: &SessionHeader) -> Result<i64, PgStoreError> {
        let line = h.to_json_line();
        let version = h.version as i64;
        let secs = lease_secs(self.lease);
        let row = self
            .db
            .with("create a session", |c| {
                let (line, h, owner) = (line.clone(), h.clone(), self.owner.clone());
                async move {
                    c.client
                        .query_opt(
                            &c.stmts.create,
                            &[
                                &h.id,
                                &line,
                                &version,
                                &h.created_at,
                                &h.cwd,
                                &h.parent_session,
                                &owner,
                                &secs,
                            ],
                        )
                        .await
                }
            })
            .await?;
        if let Some(row) = row {
            return Cols::new(&row, "create a session").get(0);
        }
        // Taken, or our own insert whose reply was lost to a reconnect.
        match self.lease_state(&h.id).await? {
            Some(s) if s.owner.as_deref() == Some(&self.owner) && !s.materialized => Ok(s.epoch),
            _ => Err(PgStoreError::Exists(h.id.clone())),
        }
    }

    async fn acquire(&self, id: &str) -> Result<(i64, i64), PgStoreError> {
        let secs = lease_secs(self.lease);
        let row = self
            .db
            .with("take the lease", |c| {
                let (id, owner) = (id.to_owned(), self.owner.clone());
                async move {
                    c.client
                        .query_opt(&c.stmts.acquire, &[&id, &owner, &secs])
                        .await
                }
            })
            .await?;
        if let Some(row) = row {
            let c = Cols::new(&row, "take the lease");
            return Ok((c.get(0)?, c.get(1)?));
        }
        match self.lease_state(id).await? {
            Some(s) if s.materialized => Err(PgStoreError::Locked {
                session: id.to_owned(),
                owner: s.owner.unwrap_or_default(),
                epoch: s.epoch,
                expires_in_ms: s.expires_in_ms.unwrap_or(0),
            }),
            _ => Err(PgStoreError::NotFound(id.to_owned())),
        }
    }

    async fn release(&self, id: &str, epoch: i64) -> Result<(), PgStoreError> {
        self.db
            .with("release the lease", |c| {
                let (id, owner) = (id.to_owned(), self.owner.clone());
                async move {
                    c.client
                        .execute(&c.stmts.release, &[&id, &owner, &epoch])
                        .await
                }
            })
            .await
            .map(|_| ())
    }

    /// The stored log as JSONL bytes and its event count (up to `limit` events).
    async fn raw(&self, id: &str, limit: Option<i64>) -> Result<(Vec<u8>, usize), PgStoreError> {
        let head = self
            .db
            .with("read a session", |c| {
                let id = id.to_owned();
                async move { c.client.query_opt(&c.stmts.session, &[&id]).await }
            })
            .await?
            .ok_or_else(|| PgStoreError::NotFound(id.to_owned()))?;
        let c = Cols::new(&head, "read a session");
        let header: String = c.get(0)?;
        let stored: i64 = c.get(1)?;
        let count = limit.unwrap_or(stored);
        let rows = self
            .db
            .with("read the events", |c| {
                let id = id.to_owned();
                async move { c.client.query(&c.stmts.events, &[&id, &count]).await }
            })
            .await?;
        let mut out = Vec::with_capacity(header.len() + 1 + rows.len() * 512);
        out.extend_from_slice(header.as_bytes());
        out.push(b'\n');
        for r in &rows {
            let line: &str = Cols::new(r, "read the events").get(0)?;
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        if rows.len() as i64 != count {
            return Err(PgStoreError::SeqConflict {
                session: id.to_owned(),
                expected: count,
                stored: rows.len() as i64,
            });
        }
        Ok((out, rows.len()))
    }

    async fn read(&self, id: &str, limit: Option<i64>) -> Result<DecodedLog, PgStoreError> {
        let (bytes, _) = self.raw(id, limit).await?;
        let path = format!("postgres:{id}");
        Ok(decode_jsonl(&bytes, 4, &path, id)?)
    }

    async fn import(
        &self,
        h: &SessionHeader,
        header_line: &str,
        rows: Vec<Row>,
    ) -> Result<(), PgStoreError> {
        let line = header_line.to_owned();
        let version = h.version as i64;
        let title = rows.iter().rev().find_map(|r| r.title.clone());
        let lines: Vec<String> = rows.iter().map(|r| r.line.clone()).collect();
        let kinds: Vec<String> = rows.iter().map(|r| r.kind.clone()).collect();
        let bodies: Vec<Option<String>> = rows.iter().map(|r| r.body.clone()).collect();
        let docs: Vec<Option<String>> = rows.iter().map(|r| r.doc.clone()).collect();
        let row = self
            .db
            .with("import a session", |c| {
                let (line, h, title) = (line.clone(), h.clone(), title.clone());
                let (lines, kinds, bodies) = (lines.clone(), kinds.clone(), bodies.clone());
                let docs = docs.clone();
                async move {
                    c.client
                        .query_one(
                            sql::IMPORT,
                            &[
                                &h.id,
                                &line,
                                &version,
                                &h.created_at,
                                &h.cwd,
                                &h.parent_session,
                                &title,
                                &lines,
                                &kinds,
                                &bodies,
                                &docs,
                            ],
                        )
                        .await
                }
            })
            .await?;
        let created: i64 = Cols::new(&row, "import a session").get(0)?;
        if created == 0 {
            return Err(PgStoreError::Exists(h.id.clone()));
        }
        Ok(())
    }

    fn gate(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(self.gates.lock().entry(id.to_owned()).or_default())
    }

    async fn commit(&self, id: &str, durability: Durability) -> Result<(), PgStoreError> {
        let w = self
            .writers
            .lock()
            .get(id)
            .cloned()
            .ok_or_else(|| PgStoreError::NotOpen(id.to_owned()))?;
        let gate = self.gate(id);
        let _serial = gate.lock().await;
        let (epoch, mut first, mut rows) = {
            let mut w = w.lock();
            (w.epoch, w.committed, std::mem::take(&mut w.pending))
        };
        let mut result = self.commit_rows(id, epoch, first, &rows, durability).await;
        // An earlier attempt whose reply was lost (a reconnect window that ran out) committed a
        // prefix of this batch: those rows are stored, send the rest once more.
        if let Err(PgStoreError::SeqConflict { stored, .. }) = &result
            && *stored > first
            && *stored < first + rows.len() as i64
        {
            let done = (*stored - first) as usize;
            rows.drain(..done);
            first = *stored;
            w.lock().committed = first;
            result = self.commit_rows(id, epoch, first, &rows, durability).await;
        }
        let mut w = w.lock();
        match &result {
            Ok(()) => w.committed = first + rows.len() as i64,
            Err(e) => {
                if let PgStoreError::LeaseLost { cause, .. } = e {
                    w.lost = Some(cause.clone());
                }
                // Keep the batch: the next barrier tries it again (and reports the error again).
                let later = std::mem::replace(&mut w.pending, rows);
                w.pending.extend(later);
            }
        }
        result
    }

    async fn commit_rows(
        &self,
        id: &str,
        epoch: i64,
        first: i64,
        rows: &[Row],
        durability: Durability,
    ) -> Result<(), PgStoreError> {
        let sync = match durability {
            Durability::Durable => "on",
            Durability::WriteThrough => "off",
        };
        let lines: Vec<&str> = rows.iter().map(|r| r.line.as_str()).collect();
        let kinds: Vec<&str> = rows.iter().map(|r| r.kind.as_str()).collect();
        let bodies: Vec<Option<&str>> = rows.iter().map(|r| r.body.as_deref()).collect();
        let docs: Vec<Option<&str>> = rows.iter().map(|r| r.doc.as_deref()).collect();
        let title = rows.iter().rev().find_map(|r| r.title.as_deref());
        let secs = lease_secs(self.lease);
        let row = self
            .db
            .with("commit a batch", |c| {
                let (lines, kinds, bodies, docs) = (&lines, &kinds, &bodies, &docs);
                async move {
                    c.client
                        .query_one(
                            &c.stmts.append,
                            &[
                                &id,
                                &self.owner,
                                &epoch,
                                &first,
                                lines,
                                kinds,
                                bodies,
                                &secs,
                                &title,
                                &sync,
                                docs,
                            ],
                        )
                        .await
                }
            })
            .await?;
        let leased: i64 = Cols::new(&row, "commit a batch").get(0)?;
        if leased == 1 {
            return Ok(());
        }
        // Refused: say why (one more round trip, on the failure path only).
        let state = self.lease_state(id).await?;
        let end = first + rows.len() as i64;
        let lost = |cause| PgStoreError::LeaseLost {
            session: id.to_owned(),
            owner: self.owner.clone(),
            epoch,
            cause,
        };
        match state {
            None => Err(lost(LeaseLoss::Released)),
            Some(s) if s.owner.as_deref() == Some(&self.owner) && s.epoch == epoch => {
                match s.expires_in_ms {
                    // Our batch committed and its reply was lost to a reconnect: done.
                    Some(ms) if ms > 0 && s.next_seq == end => Ok(()),
                    Some(ms) if ms > 0 => Err(PgStoreError::SeqConflict {
                        session: id.to_owned(),
                        expected: first,
                        stored: s.next_seq,
                    }),
                    Some(ms) => Err(lost(LeaseLoss::Expired { ago_ms: -ms })),
                    None => Err(lost(LeaseLoss::Released)),
                }
            }
            Some(LeaseState {
                owner: Some(owner),
                epoch: e,
                ..
            }) => Err(lost(LeaseLoss::TakenOver { owner, epoch: e })),
            Some(_) => Err(lost(LeaseLoss::Released)),
        }
    }

    async fn renew(&self) -> Result<Vec<String>, PgStoreError> {
        let held: Vec<(String, i64)> = self
            .writers
            .lock()
            .iter()
            .filter_map(|(id, w)| {
                let w = w.lock();
                w.lost.is_none().then(|| (id.clone(), w.epoch))
            })
            .collect();
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = held.iter().map(|(i, _)| i.as_str()).collect();
        let epochs: Vec<i64> = held.iter().map(|(_, e)| *e).collect();
        let secs = lease_secs(self.lease);
        let rows = self
            .db
            .with("renew the leases", |c| {
                let (ids, epochs) = (&ids, &epochs);
                async move {
                    c.client
                        .query(&c.stmts.renew, &[ids, epochs, &self.owner, &secs])
                        .await
                }
            })
            .await?;
        let renewed: Vec<String> = rows
            .iter()
            .filter_map(|r| r.try_get::<_, String>(0).ok())
            .collect();
        let lost: Vec<String> = held
            .into_iter()
            .map(|(id, _)| id)
            .filter(|id| !renewed.contains(id))
            .collect();
        for id in &lost {
            tracing::warn!(
                session = %id,
                owner = %self.owner,
                "the write lease of this session is lost; its next commit will be refused"
            );
        }
        Ok(lost)
    }
}

async fn renew_loop(inner: Weak<Inner>) {
    loop {
        let period = match inner.upgrade() {
            Some(i) => i.lease / 3,
            None => return,
        };
        tokio::time::sleep(period).await;
        let Some(i) = inner.upgrade() else { return };
        if let Err(e) = i.renew().await {
            tracing::warn!("PostgreSQL store: renewing leases failed: {e}");
        }
    }
}

impl SessionPersistence for PgStore {
    fn create(&self, header: &SessionHeader) -> Result<(), SessionError> {
        Ok(self.create_session(header)?)
    }

    fn open_write(&self, id: &str) -> Result<DecodedLog, SessionError> {
        Ok(self.open_session(id)?)
    }

    fn open_read(&self, id: &str) -> Result<DecodedLog, SessionError> {
        Ok(self.read_session(id)?)
    }

    fn exists(&self, id: &str) -> bool {
        if self.inner.writers.lock().contains_key(id) {
            return true;
        }
        let inner = Arc::clone(&self.inner);
        let sid = id.to_owned();
        self.rt
            .block(async move {
                inner
                    .db
                    .with("look a session up", |c| {
                        let sid = sid.clone();
                        async move { c.client.query_opt(sql::EXISTS, &[&sid]).await }
                    })
                    .await
            })
            .map(|r| r.is_some())
            .unwrap_or_else(|e| {
                tracing::warn!("PostgreSQL store: {e}");
                false
            })
    }

    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        let inner = Arc::clone(&self.inner);
        let rows = self.rt.block(async move {
            inner
                .db
                .with("list the sessions", |c| async move {
                    c.client.query(sql::LIST, &[]).await
                })
                .await
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let get = |e| {
                SessionError::from(PgStoreError::Sql {
                    op: "list the sessions",
                    source: e,
                })
            };
            let id: String = r.try_get(0).map_err(get)?;
            let version: i64 = r.try_get(4).map_err(get)?;
            out.push(SessionSummary {
                path: PathBuf::from(format!("postgres:{id}")),
                id,
                created_at: r.try_get(1).map_err(get)?,
                cwd: r.try_get(2).map_err(get)?,
                parent_session: r.try_get(3).map_err(get)?,
                version: version as u64,
                title: r.try_get(5).map_err(get)?,
            });
        }
        Ok(out)
    }

    fn export_raw(&self, id: &str) -> Result<Vec<u8>, SessionError> {
        Ok(self.export_jsonl(id)?)
    }

    fn append(&self, id: &str, events: &[Arc<Event>]) -> Result<(), SessionError> {
        Ok(self.append_events(id, events)?)
    }

    fn flush(&self, id: &str) -> Result<(), SessionError> {
        Ok(self.commit_blocking(id, Durability::Durable)?)
    }

    fn write_through(&self, id: &str) -> Result<(), SessionError> {
        Ok(self.commit_blocking(id, Durability::WriteThrough)?)
    }

    fn close(&self, id: &str) -> Result<(), SessionError> {
        Ok(self.close_session(id)?)
    }
}
