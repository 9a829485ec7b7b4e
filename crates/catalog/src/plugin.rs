//! [`CatalogPlugin`] (`catalog`): keeps `$DSH_HOME/catalog.sqlite` up to date from the
//! committed events of the sessions this process writes, and provides the [`Catalog`] service.
//!
//! A `session/event` listener keeps the session's new events in memory (an `Arc` each). At the
//! first `session/flush` barrier after a `turn/end` (or after [`MAX_PENDING`] events, or when
//! the plugin is unloaded) the batch is handed to one indexing thread through a channel, which
//! writes it in one SQLite transaction: one commit per turn, not per step (each commit writes
//! whole pages of the tables and a new FTS5 segment). The step never waits for SQLite: the
//! listeners only push to a vector and send on a channel.
//!
//! The catalog is derived data: events of a turn that never ended in this process (a crash, a
//! kill) are not lost, since the plugin's rows carry no log stamp and the next reconciliation
//! (every list, search and stats) reads such a log from the session's watermark.
//! The service reconciles the catalog with the logs on disk (sessions written by other
//! processes, by the original harness) before answering, at most once every two seconds.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use dsh_catalog_api::{
    Catalog, CatalogError, Filter, GroupBy, Hit, SearchQuery, SessionRow, StatRow,
};
use dsh_kernel::schemars::{self, JsonSchema};
use dsh_kernel::{BoxError, Ctx, Plugin};
use dsh_llm::service::Llm;
use dsh_session::{
    CoreEvent, Event, SessionEvent, SessionFlush, SessionHeader, SessionPersistence, Sessions,
};
use parking_lot::Mutex;
use serde::Deserialize;

use crate::index::Pricer;
use crate::store::{SqliteCatalog, default_log_root, default_path};

/// How often the service reads the log directory again before answering.
const RECONCILE_EVERY: Duration = Duration::from_secs(2);

/// Events a session keeps in memory before a flush hands them to the indexing thread even
/// though no turn ended (a very long turn).
pub const MAX_PENDING: usize = 512;

/// Config of the `catalog` plugin.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CatalogConfig {
    /// The catalog file. Default: `$DSH_HOME/catalog.sqlite`.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// The directory of the session logs, walked to find new and changed logs. Default:
    /// `$DSH_HOME/sessions` (the `session-jsonl` plugin's default root).
    #[serde(default)]
    pub log_root: Option<PathBuf>,
}

/// A session's committed events not yet handed to the indexing thread.
#[derive(Default)]
struct Batch {
    events: Vec<Arc<Event>>,
    /// A `turn/end` is among them: the next flush hands them over.
    turn_ended: bool,
    /// The session's header, looked up at its first flush (for the batches handed over when
    /// the plugin is unloaded, when the session may be gone).
    header: Option<Box<SessionHeader>>,
}

/// Committed events per session, waiting for the end of their turn.
type Pending = Mutex<HashMap<Arc<str>, Batch>>;

/// The catalog plugin.
#[derive(Debug)]
pub struct CatalogPlugin;

enum Job {
    Index {
        header: Box<SessionHeader>,
        events: Vec<Arc<Event>>,
    },
    Stop,
}

/// The catalog shared by the indexing thread and the service, opened on first use.
struct Shared {
    path: PathBuf,
    /// Where the logs are (`$DSH_HOME/sessions`, the JSONL store's default).
    log_root: PathBuf,
    ctx: Ctx,
    catalog: OnceLock<Option<Arc<SqliteCatalog>>>,
    reconciled: Mutex<Option<Instant>>,
}

impl Shared {
    fn catalog(&self) -> Option<&Arc<SqliteCatalog>> {
        self.catalog
            .get_or_init(|| {
                let ctx = self.ctx.clone();
                let pricer: Pricer = Arc::new(move |provider: &str, model: &str| {
                    ctx.get::<dyn Llm>()?.pricing(provider, model)
                });
                match SqliteCatalog::open_or_memory(&self.path) {
                    Ok(c) => Some(Arc::new(
                        c.with_pricer(pricer).with_log_root(&self.log_root),
                    )),
                    Err(e) => {
                        tracing::warn!(path = %self.path.display(), "the catalog is unavailable: {e}");
                        None
                    }
                }
            })
            .as_ref()
    }

    /// The catalog for the indexing thread: only one that exists. A missing file is made by its
    /// first reader (a list, search or stats), which reads every log anyway; a process that
    /// only writes sessions does not create it.
    fn existing(&self) -> Option<&Arc<SqliteCatalog>> {
        if self.catalog.get().is_none() && !self.path.exists() {
            return None;
        }
        self.catalog()
    }

    /// The catalog, reconciled with the logs at most every [`RECONCILE_EVERY`].
    fn fresh(&self) -> Result<&Arc<SqliteCatalog>, CatalogError> {
        let catalog = self.catalog().ok_or_else(|| {
            CatalogError::Storage(format!("cannot open {}", self.path.display()).into())
        })?;
        let mut last = self.reconciled.lock();
        if last.is_none_or(|t| t.elapsed() >= RECONCILE_EVERY) {
            if let Some(p) = self.ctx.get::<dyn SessionPersistence>() {
                catalog.reconcile(p.as_ref(), &mut |_| {})?;
            }
            *last = Some(Instant::now());
        }
        Ok(catalog)
    }
}

/// The [`Catalog`] service of the plugin.
struct LiveCatalog(Arc<Shared>);

impl Catalog for LiveCatalog {
    fn list(&self, filter: &Filter) -> Result<Vec<SessionRow>, CatalogError> {
        Ok(self.0.fresh()?.list(filter)?)
    }

    fn get(&self, id: &str) -> Result<Option<SessionRow>, CatalogError> {
        Ok(self.0.fresh()?.get(id)?)
    }

    fn search(&self, query: &SearchQuery) -> Result<Vec<Hit>, CatalogError> {
        Ok(self.0.fresh()?.search(query)?)
    }

    fn stats(&self, by: GroupBy, filter: &Filter) -> Result<Vec<StatRow>, CatalogError> {
        Ok(self.0.fresh()?.stats(by, filter)?)
    }

    fn delete(&self, id: &str) -> Result<(), CatalogError> {
        match self.0.catalog() {
            Some(c) => Ok(c.delete(id)?),
            None => Ok(()),
        }
    }
}

fn run(shared: Arc<Shared>, jobs: Receiver<Job>) {
    while let Ok(job) = jobs.recv() {
        // Everything queued meanwhile goes in the same pass.
        let mut batch = vec![job];
        batch.extend(jobs.try_iter());
        let mut stop = false;
        for job in batch {
            match job {
                Job::Stop => stop = true,
                Job::Index { header, events } => {
                    let Some(catalog) = shared.existing() else {
                        continue;
                    };
                    if let Err(e) = catalog.index_events(&header, &events) {
                        tracing::warn!(session = %header.id, "catalog indexing failed: {e}");
                    }
                }
            }
        }
        if stop {
            return;
        }
    }
}

impl Plugin for CatalogPlugin {
    const NAME: &'static str = "catalog";
    type Config = CatalogConfig;

    async fn apply(ctx: Ctx, config: CatalogConfig) -> Result<(), BoxError> {
        let shared = Arc::new(Shared {
            log_root: config.log_root.unwrap_or_else(default_log_root),
            path: config.path.unwrap_or_else(default_path),
            ctx: ctx.clone(),
            catalog: OnceLock::new(),
            reconciled: Mutex::new(None),
        });
        let (tx, rx): (Sender<Job>, Receiver<Job>) = channel();
        let worker = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("dsh-catalog".into())
                .spawn(move || run(shared, rx))?
        };
        ctx.provide::<dyn Catalog>(Arc::new(LiveCatalog(Arc::clone(&shared))) as Arc<dyn Catalog>)?;

        let pending: Arc<Pending> = Arc::default();
        let p = Arc::clone(&pending);
        ctx.on::<SessionEvent>(move |ev| {
            let mut pending = p.lock();
            let batch = pending.entry(Arc::clone(&ev.session_id)).or_default();
            batch.turn_ended |= matches!(ev.event.core(), Some(CoreEvent::TurnEnd(_)));
            batch.events.push(Arc::clone(&ev.event));
            Ok(())
        })?;
        let p = Arc::clone(&pending);
        let lookup = ctx.clone();
        let sender = tx.clone();
        ctx.on_parallel::<SessionFlush, _, _>(move |ev| {
            let ready = {
                let mut pending = p.lock();
                match pending.get_mut(&ev.session_id) {
                    Some(batch) if !batch.events.is_empty() => {
                        if batch.header.is_none() {
                            batch.header = lookup
                                .get::<dyn Sessions>()
                                .and_then(|s| s.get(&ev.session_id))
                                .map(|s| Box::new(s.header()));
                        }
                        if batch.turn_ended || batch.events.len() >= MAX_PENDING {
                            pending.remove(&ev.session_id)
                        } else {
                            None
                        }
                    }
                    _ => None,
                }
            };
            if let Some(Batch {
                events,
                header: Some(header),
                ..
            }) = ready
            {
                let _ = sender.send(Job::Index { header, events });
            }
            async { Ok(()) }
        })?;
        let stop = Mutex::new(Some((tx, worker)));
        ctx.on_dispose(move || {
            if let Some((tx, worker)) = stop.lock().take() {
                // What open turns committed so far (a session closed mid-turn).
                for (_, batch) in pending.lock().drain() {
                    if let (Some(header), false) = (batch.header, batch.events.is_empty()) {
                        let _ = tx.send(Job::Index {
                            header,
                            events: batch.events,
                        });
                    }
                }
                let _ = tx.send(Job::Stop);
                let _ = worker.join();
            }
        })?;
        Ok(())
    }
}
