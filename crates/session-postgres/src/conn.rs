//! The connection: one `tokio-postgres` client on the store's own runtime thread, reconnected
//! when the server goes away (a restart, a cut connection), with the statements prepared once
//! per connection so that a statement costs one round trip.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio_postgres::{Client, Config, NoTls, Statement};

use crate::error::PgStoreError;
use crate::sql;

/// The statements every connection prepares.
#[derive(Debug)]
pub(crate) struct Stmts {
    pub(crate) append: Statement,
    pub(crate) create: Statement,
    pub(crate) acquire: Statement,
    pub(crate) lease_state: Statement,
    pub(crate) renew: Statement,
    pub(crate) release: Statement,
    pub(crate) events: Statement,
    pub(crate) session: Statement,
}

/// One live connection and its prepared statements.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) client: Client,
    pub(crate) stmts: Stmts,
}

/// The store's runtime thread: tokio-postgres is async and the persistence seam is not, so the
/// store runs its connection on a current-thread runtime of its own and its blocking methods
/// wait for the result there (safe from inside another runtime: nothing blocks on that one).
#[derive(Debug)]
pub(crate) struct Runtime {
    handle: tokio::runtime::Handle,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl Runtime {
    pub(crate) fn start() -> Result<Self, PgStoreError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| PgStoreError::Runtime(e.to_string()))?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("dsh-session-postgres".into())
            .spawn(move || {
                rt.block_on(async move {
                    let _ = stopped.await;
                });
            })
            .map_err(|e| PgStoreError::Runtime(e.to_string()))?;
        Ok(Runtime {
            handle,
            stop: Mutex::new(Some(stop)),
        })
    }

    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// Runs `fut` on the store's runtime and blocks this thread until it is done.
    pub(crate) fn block<T: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<T, PgStoreError>> + Send + 'static,
    ) -> Result<T, PgStoreError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .map_err(|_| PgStoreError::Runtime("the store's thread stopped".into()))?
    }

    /// Runs `fut` on the store's runtime and awaits it from any runtime.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<T, PgStoreError>> + Send + 'static,
    ) -> Result<T, PgStoreError> {
        self.handle
            .spawn(fut)
            .await
            .map_err(|e| PgStoreError::Runtime(e.to_string()))?
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.lock().take() {
            let _ = stop.send(());
        }
    }
}

/// The connection manager.
#[derive(Debug)]
pub(crate) struct Db {
    config: Config,
    target: String,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    /// How long an operation keeps trying to reconnect before it fails.
    pub(crate) reconnect_window: Duration,
    round_trips: AtomicU64,
    reconnects: AtomicU64,
}

/// Whether an error means the connection is gone (retry on a new one) rather than a refusal by
/// the server.
fn is_connection_loss(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        // No SQLSTATE: an I/O error or a protocol failure of the connection.
        None => true,
        // The server is shutting down or starting up, or killed the connection.
        Some(code) => {
            let c = code.code();
            c.starts_with("57P") || c.starts_with("08")
        }
    }
}

impl Db {
    pub(crate) fn new(url: &str) -> Result<Self, PgStoreError> {
        let config: Config = url.parse().map_err(PgStoreError::BadUrl)?;
        Ok(Self::from_config(config))
    }

    /// A manager of connections to the server and database of `config`.
    pub(crate) fn from_config(config: Config) -> Self {
        let target = describe(&config);
        Db {
            config,
            target,
            conn: tokio::sync::Mutex::new(None),
            reconnect_window: Duration::from_secs(30),
            round_trips: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
        }
    }

    /// The connection settings (for another connection to the same database).
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// Statements sent to the server so far (each one round trip; connecting and preparing
    /// not counted).
    pub(crate) fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Connections made after the first one.
    pub(crate) fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }

    async fn connect(&self) -> Result<Arc<Conn>, tokio_postgres::Error> {
        let (client, connection) = self.config.connect(NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("PostgreSQL store connection ended: {e}");
            }
        });
        client.batch_execute(sql::SCHEMA).await?;
        let stmts = Stmts {
            append: client.prepare(sql::APPEND).await?,
            create: client.prepare(sql::CREATE).await?,
            acquire: client.prepare(sql::ACQUIRE).await?,
            lease_state: client.prepare(sql::LEASE_STATE).await?,
            renew: client.prepare(sql::RENEW).await?,
            release: client.prepare(sql::RELEASE).await?,
            events: client.prepare(sql::EVENTS).await?,
            session: client.prepare(sql::SESSION).await?,
        };
        Ok(Arc::new(Conn { client, stmts }))
    }

    /// A live connection, made now if there is none (one attempt).
    async fn conn(&self) -> Result<Arc<Conn>, tokio_postgres::Error> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref()
            && !c.client.is_closed()
        {
            return Ok(Arc::clone(c));
        }
        let had = slot.is_some();
        *slot = None;
        let c = self.connect().await?;
        if had {
            self.reconnects.fetch_add(1, Ordering::Relaxed);
            tracing::info!(target = %self.target, "PostgreSQL store reconnected");
        }
        *slot = Some(Arc::clone(&c));
        Ok(c)
    }

    /// The first connection: one attempt, so that a wrong URL or a server that is not there
    /// fails at once, naming it.
    pub(crate) async fn first_connect(&self) -> Result<(), PgStoreError> {
        self.conn()
            .await
            .map(|_| ())
            .map_err(|source| PgStoreError::Connect {
                target: self.target.clone(),
                source,
            })
    }

    async fn forget(&self, broken: &Arc<Conn>) {
        let mut slot = self.conn.lock().await;
        if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, broken)) {
            *slot = None;
        }
    }

    /// Runs `op` (one statement) on a live connection. When the connection is lost (the server
    /// restarted, the socket was cut) it reconnects and runs `op` again, for up to the
    /// reconnect window. `op` must be safe to run twice: a statement whose reply was lost may
    /// have committed (the callers' statements are idempotent or check for it).
    pub(crate) async fn with<T, F, Fut>(&self, what: &'static str, op: F) -> Result<T, PgStoreError>
    where
        F: Fn(Arc<Conn>) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let start = Instant::now();
        let mut pause = Duration::from_millis(20);
        loop {
            let attempt = match self.conn().await {
                Ok(c) => {
                    self.round_trips.fetch_add(1, Ordering::Relaxed);
                    match op(Arc::clone(&c)).await {
                        Ok(v) => return Ok(v),
                        Err(e) if is_connection_loss(&e) => {
                            self.forget(&c).await;
                            Err(PgStoreError::Sql {
                                op: what,
                                source: e,
                            })
                        }
                        Err(e) => {
                            return Err(PgStoreError::Sql {
                                op: what,
                                source: e,
                            });
                        }
                    }
                }
                Err(e) if e.code().is_some() && !is_connection_loss(&e) => {
                    // The server answered and refused (authentication, a missing database, a
                    // failing schema statement): retrying does not help.
                    return Err(PgStoreError::Connect {
                        target: self.target.clone(),
                        source: e,
                    });
                }
                Err(e) => Err(PgStoreError::Connect {
                    target: self.target.clone(),
                    source: e,
                }),
            };
            if start.elapsed() >= self.reconnect_window {
                return attempt;
            }
            if let Err(e) = &attempt {
                tracing::warn!(target = %self.target, "PostgreSQL store: {e}; retrying");
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }
}

/// The columns of one result row, read for the operation `op`: a column that does not convert
/// fails as [`PgStoreError::Sql`] naming the operation.
#[derive(Clone, Copy)]
pub(crate) struct Cols<'a> {
    row: &'a tokio_postgres::Row,
    op: &'static str,
}

impl<'a> Cols<'a> {
    pub(crate) fn new(row: &'a tokio_postgres::Row, op: &'static str) -> Self {
        Cols { row, op }
    }

    /// Column `i`.
    pub(crate) fn get<T: tokio_postgres::types::FromSql<'a>>(
        self,
        i: usize,
    ) -> Result<T, PgStoreError> {
        self.row.try_get(i).map_err(|source| PgStoreError::Sql {
            op: self.op,
            source,
        })
    }
}

/// Maps each row of a result (read for `op`) with `f`.
pub(crate) fn map_rows<T>(
    rows: &[tokio_postgres::Row],
    op: &'static str,
    f: impl Fn(Cols<'_>) -> Result<T, PgStoreError>,
) -> Result<Vec<T>, PgStoreError> {
    rows.iter().map(|r| f(Cols::new(r, op))).collect()
}

/// The server and database of a config, for messages (never the password).
fn describe(config: &Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("postgresql server {host}, database {db}")
}
