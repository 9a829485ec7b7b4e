//! The `checkpoint` plugin: a snapshot before a turn's first tool call (any tool: `bash`
//! writes as well as `write` and `edit`, and a sub-agent's tool call is made inside one of the
//! parent's) and one when the turn ends, however it ends (`agent/turn-ending`, before
//! `turn/end`: completed, interrupted, failed), each recorded in the session log as
//! `dsh/checkpoint`. A turn whose process was killed has no end checkpoint: when its session is
//! resumed, the missing one is taken (crash repair) before anything else of the session's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::collections::HashSet;

use dsh_agent::events::AgentSessionStart;
use dsh_agent::hooks::{PreStep, PreStepInput, TurnEnding, TurnEndingInput};
use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_session::Sessions;
use dsh_tools::{ExecuteInput, Tools, ToolsExecute};
use parking_lot::Mutex;
use serde::Deserialize;

use crate::error::CheckpointError;
use crate::events::CheckpointTaken;
use crate::store::{CheckpointKind, CheckpointRecord, DEFAULT_MAX_FILE_BYTES, Store, now_ms};

/// Config of the `checkpoint` plugin.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CheckpointConfig {
    /// Files larger than this are recorded as skipped, their content not kept (default
    /// 10 MiB).
    #[serde(default = "default_max")]
    pub max_file_bytes: u64,
    /// The stores' root (default `$DSH_HOME/checkpoints`).
    #[serde(default)]
    pub root: Option<PathBuf>,
}

fn default_max() -> u64 {
    DEFAULT_MAX_FILE_BYTES
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            root: None,
        }
    }
}

/// `$DSH_HOME/checkpoints` (`DSH_HOME` defaults to `~/.dsh`).
pub fn checkpoints_root() -> PathBuf {
    if let Some(home) = std::env::var_os("DSH_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(home).join("checkpoints");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".dsh").join("checkpoints")
}

#[derive(Default)]
struct Mark {
    /// The turn whose `before` checkpoint is taken.
    before_turn: Option<u64>,
    /// A turn whose `after` checkpoint is owed, and its store.
    after_owed: Option<(u64, Arc<Store>)>,
}

struct Shared {
    root: PathBuf,
    max: u64,
    stores: Mutex<HashMap<PathBuf, Arc<Store>>>,
    marks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Mark>>>>,
    /// Resumed sessions whose log has not been checked for a turn without its end checkpoint.
    repair_due: Mutex<HashSet<String>>,
}

impl Shared {
    fn store(&self, workspace: &Path) -> Result<Arc<Store>, CheckpointError> {
        if let Some(s) = self.stores.lock().get(workspace) {
            return Ok(s.clone());
        }
        let s = Arc::new(Store::open(&self.root, workspace, self.max)?);
        self.stores
            .lock()
            .insert(workspace.to_path_buf(), s.clone());
        Ok(s)
    }

    fn mark(&self, session: &str) -> Arc<tokio::sync::Mutex<Mark>> {
        self.marks
            .lock()
            .entry(session.to_owned())
            .or_default()
            .clone()
    }

    async fn take(
        store: &Arc<Store>,
        session: &Arc<dsh_session::Session>,
        turn: u64,
        kind: CheckpointKind,
    ) -> Result<(), BoxError> {
        let s = store.clone();
        let snap = tokio::task::spawn_blocking(move || s.snapshot())
            .await
            .map_err(|e| CheckpointError::Task(e.to_string()))??;
        let mut skipped = snap.skipped();
        skipped.truncate(20);
        store.record(&CheckpointRecord {
            id: snap.id,
            kind,
            session: session.id().to_owned(),
            turn: Some(turn),
            created_ms: now_ms(),
            files: snap.manifest.entries.len() as u64,
            new_bytes: snap.new_bytes,
        })?;
        session.append_plugin(&CheckpointTaken {
            turn,
            kind,
            checkpoint: snap.id,
            workspace: store.workspace().to_string_lossy().into_owned(),
            files: snap.manifest.entries.len() as u64,
            skipped,
        })?;
        // Before a tool's side effect the `before` checkpoint must survive a killed process
        // (a crash barrier, as the loop's before its calls).
        if kind == CheckpointKind::Before {
            session.write_through().await?;
        }
        tracing::debug!(session = session.id(), turn, kind = kind.as_str(), id = %snap.id.short(), hashed = snap.hashed, "checkpoint");
        Ok(())
    }

    /// Crash repair, under the session's mark: when the session was resumed and the latest
    /// turn with a `before` checkpoint (other than the open one) has no `after` (the process
    /// ended inside that turn), its `after` is taken now.
    async fn repair(&self, session: &Arc<dsh_session::Session>, m: &mut Mark) {
        if !self.repair_due.lock().remove(session.id()) {
            return;
        }
        let open = session.with_log(|l| l.tracker().open_turn());
        let mut last: Option<(u64, String)> = None;
        let mut ended: HashSet<(u64, String)> = HashSet::new();
        for e in session.events() {
            let Some(Ok(c)) = e.plugin::<CheckpointTaken>() else {
                continue;
            };
            if Some(c.turn) == open {
                continue;
            }
            match c.kind {
                CheckpointKind::Before if last.as_ref().is_none_or(|(t, _)| c.turn >= *t) => {
                    last = Some((c.turn, c.workspace));
                }
                CheckpointKind::After => {
                    ended.insert((c.turn, c.workspace));
                }
                _ => {}
            }
        }
        let Some((turn, ws)) = last.filter(|l| !ended.contains(l)) else {
            return;
        };
        let store = match self.store(Path::new(&ws)) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "checkpoint repair: no store for the workspace");
                return;
            }
        };
        tracing::info!(
            session = session.id(),
            turn,
            "checkpoint: the end checkpoint of a turn cut short by a crash"
        );
        if let Err(e) = Self::take(&store, session, turn, CheckpointKind::After).await {
            tracing::warn!(error = %e, turn, "checkpoint repair failed");
        }
        if m.after_owed.as_ref().is_some_and(|(t, _)| *t == turn) {
            m.after_owed = None;
        }
    }

    /// A resumed session: its crash repair, unless a tool call of its came first.
    async fn resumed(&self, session: &Arc<dsh_session::Session>) {
        let mark = self.mark(session.id());
        let mut m = mark.lock().await;
        self.repair(session, &mut m).await;
    }

    /// Before a tool call: the turn's `before` checkpoint, once per turn.
    async fn before(&self, ctx: &Ctx, session_id: &str, cwd: &Path) {
        let Some(session) = ctx.get::<dyn Sessions>().and_then(|s| s.get(session_id)) else {
            return;
        };
        // A sub-agent's calls run inside a parent's turn, whose checkpoint covers them.
        if session.header().origin.as_deref() == Some("subagent") {
            return;
        }
        let Some(turn) = session.with_log(|l| l.tracker().open_turn()) else {
            return;
        };
        let mark = self.mark(session_id);
        let mut m = mark.lock().await;
        self.repair(&session, &mut m).await;
        if m.before_turn == Some(turn) {
            return;
        }
        m.before_turn = Some(turn);
        // An earlier turn's end checkpoint still owed (its end listener failed): now.
        if let Some((owed, store)) = m.after_owed.take()
            && owed < turn
            && let Err(e) = Self::take(&store, &session, owed, CheckpointKind::After).await
        {
            tracing::warn!(error = %e, turn = owed, "late end checkpoint failed");
        }
        let store = match self.store(cwd) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "checkpoint: no store for the workspace");
                return;
            }
        };
        match Self::take(&store, &session, turn, CheckpointKind::Before).await {
            Ok(()) => m.after_owed = Some((turn, store)),
            Err(e) => tracing::warn!(error = %e, turn, "checkpoint before the turn failed"),
        }
    }

    /// The turn is about to end (any reason): its `after` checkpoint.
    async fn after(&self, session: &Arc<dsh_session::Session>, turn: u64) {
        let mark = {
            let marks = self.marks.lock();
            match marks.get(session.id()) {
                Some(m) => m.clone(),
                None => return,
            }
        };
        let mut m = mark.lock().await;
        let Some((owed, store)) = m.after_owed.clone() else {
            return;
        };
        if owed != turn {
            return;
        }
        m.after_owed = None;
        if let Err(e) = Self::take(&store, session, turn, CheckpointKind::After).await {
            tracing::warn!(error = %e, turn, "checkpoint at the turn's end failed");
        }
    }
}

/// Checkpoints every turn that calls a tool (see the module docs).
#[derive(Debug)]
pub struct CheckpointPlugin;

impl Plugin for CheckpointPlugin {
    const NAME: &'static str = "checkpoint";
    type Config = CheckpointConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>(), Dep::on::<dyn Sessions>()]
    }

    async fn apply(ctx: Ctx, config: CheckpointConfig) -> Result<(), BoxError> {
        let shared = Arc::new(Shared {
            root: config.root.clone().unwrap_or_else(checkpoints_root),
            max: config.max_file_bytes,
            stores: Mutex::new(HashMap::new()),
            marks: Mutex::new(HashMap::new()),
            repair_due: Mutex::new(HashSet::new()),
        });
        let (s, c) = (shared.clone(), ctx.clone());
        ctx.hook::<ToolsExecute, _, _>(move |input: ExecuteInput, next| {
            let (s, c) = (s.clone(), c.clone());
            async move {
                s.before(&c, &input.call.session_id, &input.call.cwd).await;
                next.run(input).await
            }
        })?;
        let s = shared.clone();
        ctx.hook::<TurnEnding, _, _>(move |input: TurnEndingInput, next| {
            let s = s.clone();
            async move {
                s.after(&input.agent.session(), input.turn).await;
                next.run(input).await
            }
        })?;
        // A resumed session may end a turn a killed process left without its end checkpoint:
        // repaired at once (in the background), and at the latest before its next turn's first
        // step, whichever comes first.
        let s = shared.clone();
        ctx.hook::<PreStep, _, _>(move |input: PreStepInput, next| {
            let s = s.clone();
            async move {
                if input.step == 1 && s.repair_due.lock().contains(input.agent.id()) {
                    s.resumed(&input.agent.session()).await;
                }
                next.run(input).await
            }
        })?;
        let (s, c) = (shared.clone(), ctx.clone());
        ctx.on::<AgentSessionStart>(move |e| {
            if !e.resumed {
                return Ok(());
            }
            let Some(session) = c.get::<dyn Sessions>().and_then(|x| x.get(&e.agent_id)) else {
                return Ok(());
            };
            if session.header().origin.as_deref() == Some("subagent") {
                return Ok(());
            }
            s.repair_due.lock().insert(e.agent_id.clone());
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let s = s.clone();
                rt.spawn(async move { s.resumed(&session).await });
            }
            Ok(())
        })?;
        Ok(())
    }
}
