//! [`CatalogPlugin`] (`catalog`): keeps `$DSH_HOME/catalog.sqlite` up to date from the
//! committed events of the sessions this process writes, and provides the [`Catalog`] service.
//!
//! A `session/event` listener keeps the session's new events (an `Arc` each); at the
//! `session/flush` barrier the batch is handed to one indexing thread through a channel. The
//! step never waits for SQLite: the listeners only push to a vector and send on a channel.
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
use dsh_session::{Event, SessionEvent, SessionFlush, SessionHeader, SessionPersistence, Sessions};
use parking_lot::Mutex;
use serde::Deserialize;

use crate::index::Pricer;
use crate::store::{SqliteCatalog, default_log_root, default_path};

/// How often the service reads the log directory again before answering.
const RECONCILE_EVERY: Duration = Duration::from_secs(2);

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

/// Committed events per session, waiting for the session's next flush.
type Pending = Mutex<HashMap<Arc<str>, Vec<Arc<Event>>>>;

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
                    let Some(catalog) = shared.catalog() else {
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
            p.lock()
                .entry(Arc::clone(&ev.session_id))
                .or_default()
                .push(Arc::clone(&ev.event));
            Ok(())
        })?;
        let p = Arc::clone(&pending);
        let lookup = ctx.clone();
        let sender = tx.clone();
        ctx.on_parallel::<SessionFlush, _, _>(move |ev| {
            let events = p.lock().remove(&ev.session_id).unwrap_or_default();
            if !events.is_empty() {
                let header = lookup
                    .get::<dyn Sessions>()
                    .and_then(|s| s.get(&ev.session_id))
                    .map(|s| s.header());
                if let Some(header) = header {
                    let _ = sender.send(Job::Index {
                        header: Box::new(header),
                        events,
                    });
                }
            }
            async { Ok(()) }
        })?;
        let stop = Mutex::new(Some((tx, worker)));
        ctx.on_dispose(move || {
            if let Some((tx, worker)) = stop.lock().take() {
                let _ = tx.send(Job::Stop);
                let _ = worker.join();
            }
        })?;
        Ok(())
    }
}
