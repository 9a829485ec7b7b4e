//! Live reload of the user's composition file while `dsh` runs: changed rows restart (or take
//! their new config in place), an invalid edit keeps the last good tree and says why.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::{Composer, Composition, PluginRegistry};
use notify::{RecursiveMode, Watcher};
use tokio::sync::{Mutex, mpsc};

use crate::ComposeArgs;
use crate::compose::compose;

/// Quiet time after the last file event before reloading (editors write in several steps).
const SETTLE: Duration = Duration::from_millis(100);

/// Watches `file` and re-applies the composition when it changes. The watcher lives as long as
/// the returned guard.
pub(crate) fn watch(
    file: PathBuf,
    args: ComposeArgs,
    extra: Arc<dyn Fn(&mut Composition) + Send + Sync>,
    registry: PluginRegistry,
    composer: Arc<Mutex<Composer>>,
) -> Option<notify::RecommendedWatcher> {
    let dir = file.parent()?.to_path_buf();
    if !dir.is_dir() {
        // No $DSH_HOME yet: nothing to watch.
        return None;
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let target = file.clone();
    let mut watcher = match notify::recommended_watcher(
        move |res: notify::Result<notify::Event>| {
            if let Ok(event) = res
                && event.paths.iter().any(|p| p == &target)
            {
                let _ = tx.send(());
            }
        },
    ) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "cannot watch the configuration");
            return None;
        }
    };
    if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot watch the configuration directory");
        return None;
    }
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            // Settle: wait until the events stop for a moment.
            while let Ok(Some(())) = tokio::time::timeout(SETTLE, rx.recv()).await {}
            let mut composition = match compose(&args, None, &registry) {
                Ok(c) => c,
                Err(f) => {
                    tracing::warn!(
                        "configuration change refused, keeping the last good configuration: {:#}",
                        f.error
                    );
                    continue;
                }
            };
            extra(&mut composition);
            let mut composer = composer.lock().await;
            match composer.apply(&composition).await {
                Ok(report) => tracing::info!(
                    mounted = ?report.mounted,
                    updated = ?report.updated,
                    removed = ?report.removed,
                    "configuration reloaded"
                ),
                Err(e) => tracing::warn!("configuration change failed: {e}"),
            }
        }
    });
    Some(watcher)
}
