//! The read-before-write policy: overwriting or editing a file needs a prior observation of the
//! same version in the session (by `read`, `write` or `edit`).
//!
//! Kept apart from the tools so it can be left out or replaced: the tools only report the
//! version they saw (`meta.version`); this plugin records it from `tools/result` and checks it
//! in a guard before `write` and `edit` run.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
use dsh_tools::{CallInfo, Guard, ToolError, Tools, ToolsResultEvent};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::Value;

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
        if ev.result.is_error || !matches!(ev.call.name.as_str(), "read" | "write" | "edit") {
            return;
        }
        let Some(meta) = ev.result.meta.as_ref() else {
            return;
        };
        if let (Some(path), Some(version)) = (
            meta.get("path").and_then(Value::as_str),
            meta.get("version").and_then(Value::as_str),
        ) {
            self.record(&ev.call.session_id, PathBuf::from(path), version.to_owned());
        }
    }

    /// The policy decision for a `write` or `edit` call.
    pub fn check(&self, call: &CallInfo) -> Result<(), ToolError> {
        let verb = match call.name.as_str() {
            "write" => "write",
            "edit" => "edit",
            _ => return Ok(()),
        };
        let Some(raw) = call.args.get("file_path").and_then(Value::as_str) else {
            return Ok(());
        };
        if raw.trim().is_empty() {
            return Ok(());
        }
        let path = resolve_path(&call.cwd, raw);
        let current = match std::fs::metadata(&path) {
            Ok(m) if !m.is_file() => return Ok(()), // the tool reports "not a regular file"
            Ok(m) => Some(crate::paths::file_version(&m)),
            Err(_) => None,
        };
        let observed = self.get(&call.session_id, &path);
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

struct ObservationGuard(Arc<Observations>);

impl Guard for ObservationGuard {
    fn check<'a>(&'a self, call: &'a CallInfo) -> BoxFuture<'a, Result<(), ToolError>> {
        Box::pin(async move { self.0.check(call) })
    }
}

/// Mounts the read-before-write policy on the `Tools` service.
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
        tools.guard(&ctx, Arc::new(ObservationGuard(store.clone())))?;
        ctx.on::<ToolsResultEvent>(move |ev| {
            store.record_result(ev);
            Ok(())
        })?;
        Ok(())
    }
}
