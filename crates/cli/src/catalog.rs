//! The session catalog as the commands use it: `$DSH_HOME/catalog.sqlite` reconciled with the
//! logs before each listing, search or stats (a missing, damaged or foreign catalog is rebuilt,
//! with progress on stderr when it is a terminal), in memory when `$DSH_HOME` is read-only.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use anyhow::anyhow;
use dsh_catalog::{Progress, SqliteCatalog};
use dsh_session::SessionPersistence;
use dsh_session_jsonl::JsonlStore;

use crate::{Failure, home};

/// Logs to read before progress is shown.
const PROGRESS_FROM: usize = 200;

/// Prices without a composition: DeepSeek's list prices for the DeepSeek routes, nothing for
/// other routes (a running session's catalog plugin prices with the composed routes instead).
pub(crate) fn pricer() -> dsh_catalog::Pricer {
    Arc::new(|provider: &str, _model: &str| {
        provider
            .starts_with("deepseek")
            .then_some(dsh_llm_deepseek::config::LIST_PRICES)
    })
}

fn progress_bar() -> impl FnMut(Progress) {
    let tty = std::io::stderr().is_terminal();
    move |p: Progress| {
        if !tty || p.total < PROGRESS_FROM {
            return;
        }
        if p.done == 1 || p.done == p.total || p.done.is_multiple_of(50) {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\rdsh: indexing sessions {}/{}", p.done, p.total);
            if p.done == p.total {
                let _ = writeln!(err);
            }
        }
    }
}

fn reconciled(
    catalog: SqliteCatalog,
    store: &dyn SessionPersistence,
) -> Result<SqliteCatalog, dsh_catalog::Error> {
    match catalog.reconcile(store, &mut progress_bar()) {
        Ok(_) => Ok(catalog),
        Err(e) if e.is_damage() => {
            tracing::warn!("the catalog is damaged, rebuilding it: {e}");
            catalog.recover()?;
            catalog.reconcile(store, &mut progress_bar())?;
            Ok(catalog)
        }
        Err(e) => Err(e),
    }
}

/// The catalog, up to date with the logs. Never fails for the catalog's sake: a catalog that
/// cannot be opened or written is replaced by one in memory; only unreadable logs fail.
pub(crate) fn open() -> Result<SqliteCatalog, Failure> {
    let store = JsonlStore::new(home::sessions_root());
    let path = home::dsh_home().join("catalog.sqlite");
    let on_file = SqliteCatalog::open_or_memory(&path)
        .map(|c| c.with_pricer(pricer()).with_log_root(home::sessions_root()))
        .and_then(|c| reconciled(c, &store));
    match on_file {
        Ok(c) => Ok(c),
        Err(e) => {
            tracing::warn!(path = %path.display(), "the catalog is unusable, using one in memory: {e}");
            let memory = SqliteCatalog::open_in_memory()
                .map_err(|e| Failure::run(anyhow!("{e}")))?
                .with_pricer(pricer())
                .with_log_root(home::sessions_root());
            memory
                .reconcile(&store, &mut progress_bar())
                .map_err(|e| Failure::run(anyhow!("{e}")))?;
            Ok(memory)
        }
    }
}
