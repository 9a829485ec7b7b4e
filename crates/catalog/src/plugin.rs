//! [`CatalogPlugin`] (`catalog`): reports the sessions this process writes to the catalog's
//! live table, and provides the [`Catalog`] service.
//!
//! A `session/event` listener notes a session's first event, its `turn/start`s and
//! `turn/end`s and sends the change over a channel to one `dsh-catalog` thread, which writes
//! it to `catalog-live.sqlite` ([`crate::live`]): one small page per report, so a turn costs
//! two reports, never on the step's critical path (the listener only sends; the thread writes
//! every report queued meanwhile in one transaction). When the plugin is unloaded its sessions
//! are reported ended.
//!
//! The writer does not index its sessions' texts: a turn indexed into the catalog rewrites a
//! dozen of its 4 KiB B-tree pages (~40-57 KB a turn measured, against ~21 KB of log for a
//! 20-step turn: issue 33's write amplification, budget 1.5x, would be ~3.8x). The catalog is
//! derived data and readers bring it up to date: the service (and every `dsh sessions list`,
//! `search` and `stats`) reconciles it with the logs on disk before answering, reading the
//! logs that changed from each session's watermark, many sessions per transaction.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use dsh_catalog_api::{
    Catalog, CatalogError, Filter, GroupBy, Hit, LiveSession, LiveState, SearchQuery, SessionRow,
    StatRow,
};
use dsh_kernel::schemars::{self, JsonSchema};
use dsh_kernel::{BoxError, Ctx, Plugin};
use dsh_llm::service::Llm;
use dsh_session::{CoreEvent, SessionEvent, SessionPersistence, Sessions};
use parking_lot::Mutex;
use serde::Deserialize;

use crate::index::Pricer;
use crate::live::{LiveTable, Report, live_path};
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

/// What this process last noted of a session it writes.
struct Track {
    /// When this process first saw it, epoch ms.
    started_ms: i64,
    turn: u64,
    state: LiveState,
}

/// The sessions this process writes.
type Tracked = Mutex<HashMap<Arc<str>, Track>>;

/// The catalog plugin.
#[derive(Debug)]
pub struct CatalogPlugin;

enum Job {
    Report(Report),
    Stop,
}

/// The catalog as the service reads it, opened on first use.
struct Shared {
    path: PathBuf,
    /// Where the logs are (`$DSH_HOME/sessions`, the JSONL store's default).
    log_root: PathBuf,
    ctx: Ctx,
    catalog: OnceLock<Option<Arc<SqliteCatalog>>>,
    reconciled: Mutex<Option<Instant>>,
    /// A session of this process started, began or ended a turn since the last reconcile: the
    /// next answer reconciles whatever the time (this process's own sessions are never stale).
    changed: Arc<AtomicBool>,
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
        let changed = self.changed.swap(false, Ordering::SeqCst);
        if changed || last.is_none_or(|t| t.elapsed() >= RECONCILE_EVERY) {
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

    fn live(&self) -> Result<Vec<LiveSession>, CatalogError> {
        match self.0.catalog() {
            Some(c) => Ok(c.live()?),
            None => Ok(Vec::new()),
        }
    }
}

/// The reporting thread: every report queued meanwhile goes in one transaction. A session's
/// working directory is looked up here (once), off the listeners.
fn run(ctx: Ctx, path: PathBuf, jobs: Receiver<Job>) {
    let mut table: Option<LiveTable> = None;
    let mut cwds: HashMap<String, String> = HashMap::new();
    while let Ok(job) = jobs.recv() {
        let mut reports = Vec::new();
        let mut stop = false;
        for job in std::iter::once(job).chain(jobs.try_iter()) {
            match job {
                Job::Report(mut r) => {
                    let known = cwds.get(&r.id).filter(|c| !c.is_empty()).cloned();
                    r.cwd = known
                        .or_else(|| {
                            ctx.get::<dyn Sessions>()
                                .and_then(|s| s.get(&r.id))
                                .and_then(|s| s.header().cwd)
                        })
                        .unwrap_or_default();
                    if !r.cwd.is_empty() {
                        cwds.insert(r.id.clone(), r.cwd.clone());
                    }
                    reports.push(r);
                }
                Job::Stop => stop = true,
            }
        }
        if !reports.is_empty() {
            if table.is_none() {
                match LiveTable::open(&path) {
                    Ok(t) => table = Some(t),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), "the live table is unavailable: {e}")
                    }
                }
            }
            if let Some(t) = &table
                && let Err(e) = t.report(&reports)
            {
                tracing::warn!(path = %path.display(), "reporting live sessions failed: {e}");
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
            changed: Arc::default(),
        });
        let (tx, rx): (Sender<Job>, Receiver<Job>) = channel();
        let worker = {
            let path = live_path(&shared.path);
            let ctx = ctx.clone();
            std::thread::Builder::new()
                .name("dsh-catalog".into())
                .spawn(move || run(ctx, path, rx))?
        };
        ctx.provide::<dyn Catalog>(Arc::new(LiveCatalog(Arc::clone(&shared))) as Arc<dyn Catalog>)?;

        let tracked: Arc<Tracked> = Arc::default();
        let t = Arc::clone(&tracked);
        let sender = tx.clone();
        let changed = Arc::clone(&shared.changed);
        ctx.on::<SessionEvent>(move |ev| {
            let change = match ev.event.core() {
                Some(CoreEvent::TurnStart(s)) => Some((s.turn, LiveState::Working)),
                Some(CoreEvent::TurnEnd(_)) => Some((0, LiveState::Idle)),
                _ => None,
            };
            let report = {
                let mut tracked = t.lock();
                let mut first = false;
                let track = tracked
                    .entry(Arc::clone(&ev.session_id))
                    .or_insert_with(|| {
                        first = true;
                        Track {
                            started_ms: dsh_session::now_ms(),
                            turn: 0,
                            state: LiveState::Idle,
                        }
                    });
                if let Some((turn, state)) = change {
                    if state == LiveState::Working {
                        track.turn = turn;
                    }
                    track.state = state;
                }
                (first || change.is_some()).then(|| Report {
                    id: ev.session_id.to_string(),
                    cwd: String::new(),
                    started_ms: track.started_ms,
                    turn: track.turn,
                    state: track.state,
                    at_ms: dsh_session::now_ms(),
                })
            };
            if let Some(r) = report {
                changed.store(true, Ordering::SeqCst);
                let _ = sender.send(Job::Report(r));
            }
            Ok(())
        })?;
        let stop = Mutex::new(Some((tx, worker)));
        ctx.on_dispose(move || {
            if let Some((tx, worker)) = stop.lock().take() {
                let now = dsh_session::now_ms();
                for (id, track) in tracked.lock().drain() {
                    let _ = tx.send(Job::Report(Report {
                        id: id.to_string(),
                        cwd: String::new(),
                        started_ms: track.started_ms,
                        turn: track.turn,
                        state: LiveState::Ended,
                        at_ms: now,
                    }));
                }
                let _ = tx.send(Job::Stop);
                let _ = worker.join();
            }
        })?;
        Ok(())
    }
}
