//! [`JsonlPlugin`]: mounts the JSONL backend on the kernel. Provides the `session-persistence`
//! service, buffers every `session/event` and makes it durable at `session/flush` (write +
//! fsync on a blocking thread; a write-through without fsync runs in place when the store's
//! lock is free).

use std::path::PathBuf;
use std::sync::Arc;

use dsh_kernel::schemars::{self, JsonSchema};
use dsh_kernel::{BoxError, Ctx, Plugin};
use dsh_session::{SessionEvent, SessionFlush, SessionPersistence};
use serde::Deserialize;

use crate::JsonlStore;

/// Config of the `session-jsonl` plugin.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JsonlConfig {
    /// Root directory of the sessions. Default: `$DSH_HOME/sessions` (`DSH_HOME` defaults to
    /// `~/.dsh`).
    #[serde(default)]
    pub root: Option<PathBuf>,
    /// Encoding of new session logs: `zstd` (the default, as the original harness's: both read
    /// and continue each other's sessions in one root, and logs are ~2.4× smaller) or `none`
    /// (plain JSONL). An existing log is continued in its own encoding.
    #[serde(default)]
    pub compression: Option<crate::Compression>,
}

/// The default root: `$DSH_HOME/sessions`, or `~/.dsh/sessions`.
pub fn default_root() -> PathBuf {
    if let Some(home) = std::env::var_os("DSH_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(home).join("sessions");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".dsh").join("sessions")
}

/// The JSONL persistence plugin (`session-jsonl`).
#[derive(Debug)]
pub struct JsonlPlugin;

impl Plugin for JsonlPlugin {
    const NAME: &'static str = "session-jsonl";
    type Config = JsonlConfig;

    async fn apply(ctx: Ctx, config: JsonlConfig) -> Result<(), BoxError> {
        let root = config.root.unwrap_or_else(default_root);
        let store = Arc::new(
            JsonlStore::new(root)
                .with_compression(config.compression.unwrap_or(crate::Compression::Zstd)),
        );
        ctx.provide::<dyn SessionPersistence>(Arc::clone(&store) as Arc<dyn SessionPersistence>)?;
        let s = Arc::clone(&store);
        ctx.on::<SessionEvent>(move |ev| {
            s.append(&ev.session_id, std::slice::from_ref(&ev.event))?;
            Ok(())
        })?;
        let s = Arc::clone(&store);
        ctx.on_parallel::<SessionFlush, _, _>(move |ev| {
            let s = Arc::clone(&s);
            async move {
                let id = Arc::clone(&ev.session_id);
                let durable = ev.durable;
                // A write-through is a buffered write (no fsync): done in place when the
                // store is free, without a hop to a blocking thread and back (several per
                // step: the loop's before each tool, the host's log stream's before it hands
                // records on).
                if !durable && let Some(done) = s.try_write_through(&id) {
                    return done.map_err(Into::into);
                }
                tokio::task::spawn_blocking(move || {
                    if durable {
                        s.flush(&id)
                    } else {
                        s.write_through(&id)
                    }
                })
                .await??;
                Ok(())
            }
        })?;
        ctx.on_dispose(move || store.close_all())?;
        Ok(())
    }
}
