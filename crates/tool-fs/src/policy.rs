//! The read-before-write policy: overwriting or editing a file needs a prior observation of the
//! same version in the session (by `read`, `write` or `edit`).
//!
//! Kept apart from the tools so it can be left out or replaced: the tools only report the
//! version they saw (`meta.version`); this plugin records it from `tools/result` and checks it
//! in a guard before `write` and `edit` run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_agent::Agents;
use dsh_agent::events::AgentSessionStart;
use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin, Service};
use dsh_session::data::CoreEvent;
use dsh_tools::{CallInfo, Guard, ToolError, Tools, ToolsResultEvent};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::Value;

use crate::backend::{BackendError, FileBackend, FileBackends, text_version};
use crate::paths::{codes, resolve_path};

/// File versions last observed, per session and absolute path. In memory only.
#[derive(Debug, Default)]
pub struct Observations {
    seen: Mutex<HashMap<(String, PathBuf), String>>,
}

impl Observations {
    /// Record that `session` saw `version` of `path`.
    pub fn record(&self, session: &str, path: PathBuf, version: String) {
        self.seen.lock().insert((session.to_owned(), path), version);
    }

    /// The version `session` last saw of `path`.
    pub fn get(&self, session: &str, path: &std::path::Path) -> Option<String> {
        self.seen
            .lock()
            .get(&(session.to_owned(), path.to_path_buf()))
            .cloned()
    }

    /// Record the observation a successful `read`/`write`/`edit` result reports.
    pub fn record_result(&self, ev: &ToolsResultEvent) {
        self.record_logged(
            &ev.call.session_id,
            &ev.call.name,
            ev.result.is_error,
            ev.result.meta.as_ref(),
        );
    }

    /// Record the observation of a logged tool result (`name`, `isError`, `meta`), e.g. when a
    /// resumed session replays its `tool/result` events. A version that no longer matches the
    /// file is harmless: the next write or edit is refused as stale.
    pub fn record_logged(&self, session: &str, name: &str, is_error: bool, meta: Option<&Value>) {
        if is_error || !matches!(name, "read" | "write" | "edit") {
            return;
        }
        let Some(meta) = meta else {
            return;
        };
        if let (Some(path), Some(version)) = (
            meta.get("path").and_then(Value::as_str),
            meta.get("version").and_then(Value::as_str),
        ) {
            self.record(session, PathBuf::from(path), version.to_owned());
        }
    }

    /// Records the observations of a stored session's log: each `tool/result` with the name of
    /// its `tool/call` (matched on the typed events, decoded once when the log was admitted).
    pub fn replay_log(&self, session: &str, events: &[Arc<dsh_session::Event>]) {
        let mut names: HashMap<&str, &str> = HashMap::new();
        for e in events {
            match e.core() {
                Some(CoreEvent::ToolCallEvent(call)) => {
                    names.insert(call.call_id.as_str(), call.name.as_str());
                }
                Some(CoreEvent::ToolResult(result)) => {
                    let message = &result.message;
                    let Some(name) = message.tool_call_id.as_deref().and_then(|id| names.get(id))
                    else {
                        continue;
                    };
                    let is_error = message.is_error.unwrap_or(false);
                    if is_error || !matches!(*name, "read" | "write" | "edit") {
                        continue;
                    }
                    let meta = result
                        .meta
                        .as_ref()
                        .map(dsh_session::data::ToolMeta::to_value);
                    self.record_logged(session, name, is_error, meta.as_ref());
                }
                _ => {}
            }
        }
    }

    /// The path a `write`/`edit` call targets (`None`: another tool, or arguments the tool
    /// itself rejects).
    fn target(call: &CallInfo) -> Option<(&'static str, PathBuf)> {
        let verb = match call.name.as_str() {
            "write" => "write",
            "edit" => "edit",
            _ => return None,
        };
        let raw = call.args.get("file_path").and_then(Value::as_str)?;
        if raw.trim().is_empty() {
            return None;
        }
        Some((verb, resolve_path(&call.cwd, raw)))
    }

    /// The policy decision for a `write` or `edit` call on the local file system.
    pub fn check(&self, call: &CallInfo) -> Result<(), ToolError> {
        let Some((verb, path)) = Self::target(call) else {
            return Ok(());
        };
        let current = match std::fs::metadata(&path) {
            Ok(m) if !m.is_file() => return Ok(()), // the tool reports "not a regular file"
            Ok(m) => Some(crate::paths::file_version(&m)),
            Err(_) => None,
        };
        self.decide(call, verb, &path, current)
    }

    /// The policy decision for a `write` or `edit` call whose session's files are served by
    /// `backend`: the current version is that of the text the backend serves now.
    pub async fn check_via(
        &self,
        call: &CallInfo,
        backend: &dyn FileBackend,
    ) -> Result<(), ToolError> {
        let Some((verb, path)) = Self::target(call) else {
            return Ok(());
        };
        let current = match backend.read_text(&path).await {
            Ok(text) => Some(text_version(&text)),
            Err(BackendError::NotFound) => None,
            Err(_) => return Ok(()), // the tool reports the backend's error
        };
        self.decide(call, verb, &path, current)
    }

    fn decide(
        &self,
        call: &CallInfo,
        verb: &str,
        path: &Path,
        current: Option<String>,
    ) -> Result<(), ToolError> {
        let observed = self.get(&call.session_id, path);
        let p = path.display();
        let stale = |what: &str| {
            Err(ToolError::new(
                codes::FS_STALE_VERSION,
                format!("cannot {verb} \"{p}\": {what} — re-read the file, then retry"),
            ))
        };
        match (current, observed) {
            (None, None) => Ok(()),
            (None, Some(_)) => stale("file no longer exists"),
            (Some(_), None) => Err(ToolError::new(
                codes::FS_NOT_OBSERVED,
                if verb == "write" {
                    format!(
                        "cannot overwrite existing \"{p}\" without reading it first — read the file, then retry"
                    )
                } else {
                    format!("edit requires reading \"{p}\" first — read the file, then retry")
                },
            )),
            (Some(c), Some(o)) if c == o => Ok(()),
            (Some(_), Some(_)) => stale("file changed since it was read"),
        }
    }
}

impl Service for Observations {
    const NAME: &'static str = "fs-observations";
}

struct ObservationGuard {
    store: Arc<Observations>,
    /// Looks up the `fs-backends` service at call time (soft: absent means local).
    ctx: Ctx,
}

impl ObservationGuard {
    fn sandbox_refuses(&self, call: &CallInfo) -> bool {
        let (Some(sandbox), Some((_, path))) = (
            self.ctx.get::<dyn dsh_sandbox::Sandbox>(),
            Observations::target(call),
        ) else {
            return false;
        };
        let policy = sandbox.policy(&call.session_id, &call.cwd, Some(&call.call_id));
        policy
            .check_write(&crate::write::write_target(&path))
            .is_err()
    }
}

impl Guard for ObservationGuard {
    fn check<'a>(&'a self, call: &'a CallInfo) -> BoxFuture<'a, Result<(), ToolError>> {
        Box::pin(async move {
            let backend = Observations::target(call).and_then(|(_, path)| {
                self.ctx
                    .get::<FileBackends>()
                    .and_then(|b| b.for_path(&call.session_id, &call.cwd, &path))
            });
            match backend {
                // A path dsh's sandbox refuses is not asked of the backend: the tool reports
                // the denial.
                Some(_) if self.sandbox_refuses(call) => Ok(()),
                Some(backend) => self.store.check_via(call, &*backend).await,
                None => self.store.check(call),
            }
        })
    }
}

/// Mounts the read-before-write policy on the `Tools` service, and provides its store as the
/// `fs-observations` service (so a resume step can rebuild it from logged results).
#[derive(Debug)]
pub struct ReadBeforeWritePlugin;

impl Plugin for ReadBeforeWritePlugin {
    const NAME: &'static str = "fs-read-before-write";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let tools = ctx.dep::<dyn Tools>()?;
        let store = Arc::new(Observations::default());
        ctx.provide::<Observations>(store.clone())?;
        tools.guard(
            &ctx,
            Arc::new(ObservationGuard {
                store: store.clone(),
                ctx: ctx.clone(),
            }),
        )?;
        let results = store.clone();
        ctx.on::<ToolsResultEvent>(move |ev| {
            results.record_result(ev);
            Ok(())
        })?;
        // A resumed session keeps what it observed before: replay its logged results.
        let lookup = ctx.clone();
        ctx.on::<AgentSessionStart>(move |ev| {
            if !ev.resumed {
                return Ok(());
            }
            let Some(agent) = lookup.get::<dyn Agents>().and_then(|a| a.get(&ev.agent_id)) else {
                return Ok(());
            };
            store.replay_log(&ev.agent_id, &agent.session().events());
            Ok(())
        })?;
        Ok(())
    }
}
