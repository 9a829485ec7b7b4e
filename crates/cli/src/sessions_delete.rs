//! `dsh sessions delete ID... [--yes] [--store URL]`: removes stored sessions and their catalog
//! rows. In the JSONL store, each log's whole directory (every generation, spill files, the lock
//! file); a session open for write (its lock held by a running dsh) is refused, never deleted.
//! In a PostgreSQL store (`--store URL` / `DSH_STORE`), the session's row and its events; a
//! session whose write lease is held (a `dsh exec`, a worker or a server on any host runs it) is
//! refused, naming the holder.

use std::io::IsTerminal;
use std::sync::Arc;

use anyhow::anyhow;
use dsh_catalog_api::Catalog;
use dsh_session::SessionPersistence;
use dsh_session_jsonl::error::StoreError;
use dsh_session_jsonl::store::JsonlStore;
use dsh_session_postgres::{PgStore, PgStoreError};

use crate::config_cmd::write_stdout;
use crate::{Failure, home};

/// Options of `dsh sessions delete`.
#[derive(Debug, clap::Args)]
pub(crate) struct DeleteArgs {
    /// Session ids.
    #[arg(value_name = "ID", required = true)]
    pub(crate) ids: Vec<String>,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
    /// The store: a `postgres://` URL, or `jsonl` (the default: $DSH_HOME/sessions).
    #[arg(long, value_name = "URL", env = "DSH_STORE")]
    pub(crate) store: Option<String>,
}

/// One line per session to delete: id, title or first prompt, directory, turns.
fn describe(catalog: &dyn Catalog, id: &str) -> String {
    match catalog.get(id) {
        Ok(Some(row)) => {
            let what = row
                .title
                .as_deref()
                .unwrap_or(&row.first_prompt)
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(60)
                .collect::<String>();
            let cwd = if row.cwd.is_empty() { "-" } else { &row.cwd };
            format!("  {id}  {cwd}  turns={}  {what}\n", row.turns)
        }
        _ => format!("  {id}\n"),
    }
}

/// Where the sessions are deleted.
enum Target {
    Jsonl(JsonlStore),
    Postgres(Arc<PgStore>),
}

/// Why one session was not deleted (the others still are).
enum Refusal {
    /// Open for write: the text says by whom.
    Live(String),
    /// Another failure.
    Failed(String),
}

impl Target {
    fn exists(&self, id: &str) -> bool {
        match self {
            Target::Jsonl(s) => SessionPersistence::exists(s, id),
            Target::Postgres(s) => SessionPersistence::exists(&**s, id),
        }
    }

    fn remove(&self, id: &str) -> Result<(), Refusal> {
        match self {
            Target::Jsonl(s) => match s.remove_session(id) {
                Ok(_) | Err(StoreError::NotFound(_)) => Ok(()),
                Err(StoreError::Locked(_)) => Err(Refusal::Live(
                    "a running dsh holds its log open for write".into(),
                )),
                Err(e) => Err(Refusal::Failed(e.to_string())),
            },
            Target::Postgres(s) => match s.delete_session(id) {
                Ok(()) | Err(PgStoreError::NotFound(_)) => Ok(()),
                Err(PgStoreError::Locked {
                    owner,
                    epoch,
                    expires_in_ms,
                    ..
                }) => Err(Refusal::Live(format!(
                    "its write lease is held by {owner} (epoch {epoch}, expires in {} s unless \
                     renewed)",
                    (expires_in_ms.max(0) + 999) / 1000
                ))),
                Err(e) => Err(Refusal::Failed(e.to_string())),
            },
        }
    }
}

/// Runs `dsh sessions delete`: 0 when every session was deleted, 1 when one was refused (the
/// others are still deleted), 2 for an unknown id or a missing confirmation (nothing deleted).
pub(crate) async fn delete(args: DeleteArgs) -> Result<u8, Failure> {
    let (target, catalog): (Target, Box<dyn Catalog>) =
        match crate::store_cmd::postgres(args.store.as_deref())? {
            None => (
                Target::Jsonl(JsonlStore::new(home::sessions_root())),
                Box::new(crate::catalog::open()?),
            ),
            Some(pg) => (
                Target::Postgres(Arc::clone(&pg)),
                Box::new(crate::store_cmd::pg_catalog(pg)),
            ),
        };
    let catalogued = |id: &str| matches!(catalog.get(id), Ok(Some(_)));
    let unknown: Vec<&str> = args
        .ids
        .iter()
        .map(String::as_str)
        .filter(|id| !target.exists(id) && !catalogued(id))
        .collect();
    if !unknown.is_empty() {
        return Err(Failure::usage(anyhow!(
            "no stored session {} (see `dsh sessions list`); nothing deleted",
            unknown
                .iter()
                .map(|id| format!("`{id}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let mut summary = String::from("delete (the logs cannot be restored):\n");
    for id in &args.ids {
        summary.push_str(&describe(&*catalog, id));
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::usage(anyhow!(
                "{summary}refusing to delete without confirmation: pass --yes"
            )));
        }
        summary.push_str("Delete? [y/N] ");
        eprint!("{summary}");
        let mut answer = String::new();
        std::io::stdin()
            .read_line(&mut answer)
            .map_err(|e| Failure::run(anyhow!("cannot read the answer: {e}")))?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            eprintln!("dsh: nothing deleted");
            return Ok(1);
        }
    }
    let mut out = String::new();
    let mut refused = false;
    for id in &args.ids {
        match target.remove(id) {
            Ok(()) => {}
            Err(Refusal::Live(who)) => {
                eprintln!("dsh: session `{id}` is live ({who}): not deleted; close it first");
                refused = true;
                continue;
            }
            Err(Refusal::Failed(e)) => {
                eprintln!("dsh: session `{id}` not deleted: {e}");
                refused = true;
                continue;
            }
        }
        if let Target::Jsonl(_) = target
            && let Err(e) = catalog.delete(id)
        {
            // The log is gone: the next reconciliation forgets the row anyway.
            tracing::warn!(session = %id, "the catalog row stays until the next listing: {e}");
        }
        out.push_str(&format!("deleted {id}\n"));
    }
    write_stdout(&out)?;
    Ok(u8::from(refused))
}
