//! `dsh sessions delete ID... [--yes]`: removes stored sessions (each log's whole directory:
//! every generation, spill files, the lock file) and their catalog rows. A session open for
//! write (its lock held by a running dsh) is refused, never deleted.

use std::io::IsTerminal;

use anyhow::anyhow;
use dsh_session_jsonl::error::StoreError;
use dsh_session_jsonl::store::JsonlStore;

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
}

/// One line per session to delete: id, title or first prompt, directory, turns.
fn describe(catalog: &dsh_catalog::SqliteCatalog, id: &str) -> String {
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

/// Runs `dsh sessions delete`: 0 when every session was deleted, 1 when one was refused (the
/// others are still deleted), 2 for an unknown id or a missing confirmation (nothing deleted).
pub(crate) async fn delete(args: DeleteArgs) -> Result<u8, Failure> {
    let store = JsonlStore::new(home::sessions_root());
    let catalog = crate::catalog::open()?;
    let catalogued = |id: &str| matches!(catalog.get(id), Ok(Some(_)));
    let unknown: Vec<&str> = args
        .ids
        .iter()
        .map(String::as_str)
        .filter(|id| !dsh_session::SessionPersistence::exists(&store, id) && !catalogued(id))
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
        summary.push_str(&describe(&catalog, id));
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
        match store.remove_session(id) {
            Ok(_) | Err(StoreError::NotFound(_)) => {}
            Err(StoreError::Locked(_)) => {
                eprintln!(
                    "dsh: session `{id}` is live (a running dsh holds its log open for write): \
                     not deleted; close it first"
                );
                refused = true;
                continue;
            }
            Err(e) => {
                eprintln!("dsh: session `{id}` not deleted: {e}");
                refused = true;
                continue;
            }
        }
        if let Err(e) = catalog.delete(id) {
            // The log is gone: the next reconciliation forgets the row anyway.
            tracing::warn!(session = %id, "the catalog row stays until the next listing: {e}");
        }
        out.push_str(&format!("deleted {id}\n"));
    }
    write_stdout(&out)?;
    Ok(u8::from(refused))
}
