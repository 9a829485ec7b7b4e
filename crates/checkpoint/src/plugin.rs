//! The `checkpoint` plugin: a snapshot before a turn's first tool call (any tool: `bash`
//! writes as well as `write` and `edit`, and a sub-agent's tool call is made inside one of the
//! parent's) and one when the turn completes (`agent/turn-stopping`, before `turn/end`), each
//! recorded in the session log as `dsh/checkpoint`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_agent::hooks::{TurnStopping, TurnStoppingInput};
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
        tracing::debug!(session = session.id(), turn, kind = kind.as_str(), id = %snap.id.short(), hashed = snap.hashed, "checkpoint");
        Ok(())
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
        if m.before_turn == Some(turn) {
            return;
        }
        m.before_turn = Some(turn);
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

    /// The turn is about to complete: its `after` checkpoint (again after each extra step a
    /// stop listener forces; the log's last one counts).
    async fn after(&self, session: &Arc<dsh_session::Session>, turn: u64) {
        let mark = {
            let marks = self.marks.lock();
            match marks.get(session.id()) {
                Some(m) => m.clone(),
                None => return,
            }
        };
        let m = mark.lock().await;
        let Some((owed, store)) = m.after_owed.clone() else {
            return;
        };
        if owed != turn {
            return;
        }
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
        ctx.hook::<TurnStopping, _, _>(move |input: TurnStoppingInput, next| {
            let s = s.clone();
            async move {
                s.after(&input.agent.session(), input.turn).await;
                next.run(input).await
            }
        })?;
        Ok(())
    }
}
