//! Live reload of the user's composition file while `dsh` runs: changed rows restart (or take
//! their new config in place), an invalid edit keeps the last good tree and says why.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::{Composer, Composition, PluginRegistry};
use notify::event::{AccessKind, AccessMode, EventKind};
use notify::{RecursiveMode, Watcher};
use tokio::sync::{Mutex, mpsc};

use crate::ComposeArgs;
use crate::compose::compose;

/// Quiet time after the last file event before reloading (editors write in several steps).
const SETTLE: Duration = Duration::from_millis(100);

/// Whether a file event can change the file's contents. Opens and reads (`Access`) cannot: the
/// reload itself reads the file, so reacting to them reloaded forever (ten times a second, each
/// reload opening the file again) as soon as anything had opened it once.
pub(crate) fn changes_contents(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) => true,
        EventKind::Any | EventKind::Other => true,
    }
}

/// Watches `file` and re-applies the composition when its contents change. `applied` is the
/// composition already applied: a reload that composes the same tree applies nothing. The
/// watcher lives as long as the returned guard.
pub(crate) fn watch(
    file: PathBuf,
    args: ComposeArgs,
    extra: Arc<dyn Fn(&mut Composition) + Send + Sync>,
    registry: PluginRegistry,
    composer: Arc<Mutex<Composer>>,
    applied: Composition,
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
                && changes_contents(&event.kind)
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
        let mut applied = applied;
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
            if composition == applied {
                tracing::debug!("configuration file touched, composition unchanged");
                continue;
            }
            let mut composer = composer.lock().await;
            match composer.apply(&composition).await {
                Ok(report) => {
                    applied = composition;
                    tracing::info!(
                    mounted = ?report.mounted,
                    updated = ?report.updated,
                    removed = ?report.removed,
                    "configuration reloaded"
                    )
                }
                Err(e) => tracing::warn!("configuration change failed: {e}"),
            }
        }
    });
    Some(watcher)
}

#[cfg(test)]
mod tests {
    use notify::event::{CreateKind, DataChange, ModifyKind, RemoveKind};

    use super::*;

    #[test]
    fn opens_and_reads_do_not_count_as_changes() {
        assert!(!changes_contents(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!changes_contents(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(!changes_contents(&EventKind::Access(AccessKind::Read)));
        assert!(changes_contents(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(changes_contents(&EventKind::Modify(ModifyKind::Data(
            DataChange::Any
        ))));
        assert!(changes_contents(&EventKind::Create(CreateKind::File)));
        assert!(changes_contents(&EventKind::Remove(RemoveKind::File)));
    }
}
