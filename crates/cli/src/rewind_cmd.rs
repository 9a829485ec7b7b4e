//! `dsh rewind [SESSION] --to N [--code | --conversation] [--yes] [--force] [--store URL]`,
//! `dsh rewind --undo`, and `dsh checkpoints list | gc` (dsh-checkpoint).
//!
//! With `--store URL` / `DSH_STORE` the session is read from, and its conversation forked in, a
//! PostgreSQL store; its file checkpoints are this host's (`$DSH_HOME/checkpoints`, kept by the
//! host that ran the session), so a files rewind works on that host only.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use dsh_checkpoint::ops;
use dsh_checkpoint::preview::{DEFAULT_MAX_LINES, diff_preview};
use dsh_checkpoint::rewind::{self, RewindError};
use dsh_checkpoint::{DEFAULT_MAX_FILE_BYTES, Rewound, Store, checkpoints_root};
use dsh_session::forked::{ForkReason, SessionForked};
use dsh_session::{
    DirectSink, ForkOptions, SessionError, SessionPersistence, SessionStore, Sessions as _,
};
use dsh_session_jsonl::store::JsonlStore;

use crate::config_cmd::write_stdout;
use crate::{Failure, home};

/// `dsh rewind`.
#[derive(Debug, Args)]
pub(crate) struct RewindArgs {
    /// The session (default: the latest session of the current directory).
    #[arg(value_name = "SESSION")]
    session: Option<String>,
    /// Restore the state before this turn (numbered from 1, as `dsh sessions show` lists them).
    #[arg(long, value_name = "N", required_unless_present = "undo")]
    to: Option<u64>,
    /// Files only (the conversation stays).
    #[arg(long, conflicts_with = "conversation")]
    code: bool,
    /// The conversation only (a new session forked before turn N; files stay).
    #[arg(long)]
    conversation: bool,
    /// Do not ask.
    #[arg(long, short = 'y')]
    yes: bool,
    /// Overwrite files changed outside dsh since the checkpoint (they are in the backup).
    #[arg(long)]
    force: bool,
    /// Undo the latest rewind of the session (or of this directory): undoing an undo redoes.
    #[arg(long, conflicts_with_all = ["to", "code", "conversation"])]
    undo: bool,
    /// The session store: a `postgres://` URL, or `jsonl` (the default: $DSH_HOME/sessions).
    #[arg(long, value_name = "URL", env = "DSH_STORE")]
    store: Option<String>,
}

/// `dsh checkpoints`.
#[derive(Debug, Subcommand)]
pub(crate) enum CheckpointsCommand {
    /// The checkpoint stores: workspace, size, checkpoints per session.
    List {
        /// Also the sessions of this store (a `postgres://` URL): theirs are not "deleted".
        #[arg(long, value_name = "URL", env = "DSH_STORE")]
        store: Option<String>,
    },
    /// Drop the checkpoints of deleted sessions and the objects nothing else uses.
    Gc {
        /// Also the sessions of this store (a `postgres://` URL): theirs are kept.
        #[arg(long, value_name = "URL", env = "DSH_STORE")]
        store: Option<String>,
    },
}

fn sessions_store() -> Arc<JsonlStore> {
    Arc::new(JsonlStore::new(home::sessions_root()))
}

fn run_err(e: impl std::fmt::Display) -> Failure {
    Failure::run(anyhow!("{e}"))
}

/// The latest stored session whose cwd is `dir`.
fn latest_for(store: &dyn SessionPersistence, dir: &Path) -> Result<String, Failure> {
    let dir = dir.to_string_lossy();
    store
        .list()
        .map_err(run_err)?
        .into_iter()
        .filter(|s| s.cwd.as_deref() == Some(&*dir))
        .max_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)))
        .map(|s| s.id)
        .ok_or_else(|| {
            Failure::usage(anyhow!(
                "no stored session of {dir}: name one (see `dsh sessions list`)"
            ))
        })
}

fn cwd() -> Result<PathBuf, Failure> {
    std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| Failure::run(anyhow!("cannot read the current directory: {e}")))
}

fn confirm(summary: &str, yes: bool) -> Result<bool, Failure> {
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(Failure::usage(anyhow!(
            "refusing to rewind without confirmation: pass --yes"
        )));
    }
    eprint!("{summary}Rewind? [y/N] ");
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| Failure::run(anyhow!("cannot read the answer: {e}")))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// `dsh rewind`.
pub(crate) async fn rewind(args: RewindArgs) -> Result<u8, Failure> {
    let sessions = crate::store_cmd::open(args.store.as_deref())?;
    let id = match &args.session {
        Some(id) => id.clone(),
        None => latest_for(&*sessions, &cwd()?)?,
    };
    let log = sessions
        .open_read(&id)
        .map_err(|e| match e {
            dsh_session::SessionError::NotFound(_) => Failure::usage(anyhow!(
                "no stored session `{id}` (see `dsh sessions list`)"
            )),
            other => run_err(other),
        })?
        .replay()
        .map_err(run_err)?;
    let events = log.events().to_vec();
    let root = checkpoints_root();
    if args.undo {
        return undo(&root, &id, &events, &args).await;
    }
    let Some(to) = args.to else {
        return Err(Failure::usage(anyhow!("--to N is required")));
    };
    let last = ops::last_turn(&events);
    if to == 0 || to > last {
        return Err(Failure::usage(anyhow!(
            "session {id} has {last} turn(s): --to 1..{last}"
        )));
    }
    let code = !args.conversation;
    let conversation = !args.code;
    let mut out = String::new();
    let mut record = None;
    if code {
        match ops::workspace_of(&events) {
            None => out.push_str("files: no checkpoints in this session; nothing to restore\n"),
            Some(ws) => {
                let store = Store::open(&root, &ws, DEFAULT_MAX_FILE_BYTES).map_err(run_err)?;
                let (current, plan) = ops::prepare(&store, &id, &events, to).map_err(run_err)?;
                match plan.filter(|p| !p.actions.is_empty() || !p.left_alone.is_empty()) {
                    None => {
                        out.push_str(&format!("files: nothing changed since turn {to} began\n"))
                    }
                    Some(plan) => {
                        let diff =
                            diff_preview(&store, &plan, &current.manifest, DEFAULT_MAX_LINES)
                                .map_err(run_err)?;
                        let preview = format!(
                            "files of {} to restore to before turn {to}:\n{}{}",
                            ws.display(),
                            ops::preview(&plan),
                            diff.text
                        );
                        if !plan.conflicts.is_empty() && !args.force {
                            eprint!("{preview}");
                            return Err(Failure::run(anyhow!(
                                "{} file(s) changed outside dsh since the checkpoint: refusing \
                                 without --force (what is overwritten is backed up first)",
                                plan.conflicts.len()
                            )));
                        }
                        if !confirm(&preview, args.yes)? {
                            eprintln!("dsh: nothing changed");
                            return Ok(1);
                        }
                        out.push_str(&preview);
                        let done =
                            rewind::run(&store, &id, Some(to), None, &plan, current.id, args.force)
                                .map_err(|e| match e {
                                    RewindError::Conflicts(_) => run_err(e),
                                    RewindError::Store(e) => run_err(e),
                                })?;
                        out.push_str(&format!(
                            "restored: {} written, {} deleted; backup {} (undo: dsh rewind {id} \
                             --undo)\n",
                            done.applied.written,
                            done.applied.deleted,
                            done.record.backup.short()
                        ));
                        for (p, e) in &done.applied.failed {
                            out.push_str(&format!("failed: {p}: {e}\n"));
                        }
                        record = Some(done.record.id);
                    }
                }
            }
        }
    } else if !args.yes && !confirm("", false)? {
        return Ok(1);
    }
    if conversation {
        match ops::fork_boundary(&events, to) {
            None => out.push_str(
                "conversation: nothing before turn 1 to keep; start a new session instead\n",
            ),
            Some(boundary) => {
                let child = fork(sessions, &id, boundary, to, record).await?;
                out.push_str(&format!(
                    "conversation: rewound to before turn {to} in new session {child} ({id} \
                     stays as it was)\nresume it with: dsh --resume {child}   (headless: dsh \
                     exec --resume {child} PROMPT)\n"
                ));
            }
        }
    }
    write_stdout(&out)?;
    Ok(0)
}

async fn fork(
    persistence: Arc<dyn SessionPersistence>,
    id: &str,
    boundary: u64,
    to: u64,
    rewind: Option<String>,
) -> Result<String, Failure> {
    let sessions = SessionStore::new(
        Some(persistence.clone()),
        Arc::new(DirectSink::new(persistence)),
    );
    let child = sessions
        .fork(
            id,
            ForkOptions {
                boundary: Some(boundary),
                ..Default::default()
            },
        )
        .map_err(run_err)?;
    child
        .append_plugin(&Rewound {
            from_session: id.to_owned(),
            to_turn: to,
            rewind: rewind.clone(),
        })
        .map_err(run_err)?;
    let child_id = child.id().to_owned();
    sessions.close(&child_id).await.map_err(run_err)?;
    // The old session says where it continues (its clients follow the fork from it), unless
    // another process holds it.
    match sessions.open(id) {
        Ok(old) => {
            old.append_plugin(&SessionForked {
                session_id: child_id.clone(),
                reason: ForkReason::Rewind,
                to_turn: Some(to),
                rewind_id: rewind,
            })
            .map_err(run_err)?;
            sessions.close(id).await.map_err(run_err)?;
        }
        Err(SessionError::Locked(_)) => eprintln!(
            "dsh: session {id} is open in another process: its clients are not told of the fork"
        ),
        Err(e) => return Err(run_err(e)),
    }
    Ok(child_id)
}

async fn undo(
    root: &Path,
    id: &str,
    events: &[Arc<dsh_session::Event>],
    args: &RewindArgs,
) -> Result<u8, Failure> {
    let ws = match ops::workspace_of(events) {
        Some(ws) => ws,
        None => cwd()?,
    };
    let store = Store::open(root, &ws, DEFAULT_MAX_FILE_BYTES).map_err(run_err)?;
    let Some(last) = rewind::last_rewind(&store, Some(id)).map_err(run_err)? else {
        return Err(Failure::usage(anyhow!(
            "session {id} has no rewind to undo"
        )));
    };
    let current = store.snapshot().map_err(run_err)?;
    let plan = rewind::plan_undo(&store, &last, &current.manifest).map_err(run_err)?;
    let diff =
        diff_preview(&store, &plan, &current.manifest, DEFAULT_MAX_LINES).map_err(run_err)?;
    let preview = format!(
        "files of {} to put back as they were before rewind {}:\n{}{}",
        ws.display(),
        last.id,
        ops::preview(&plan),
        diff.text
    );
    if !plan.conflicts.is_empty() && !args.force {
        eprint!("{preview}");
        return Err(Failure::run(anyhow!(
            "{} file(s) changed since the rewind: refusing without --force",
            plan.conflicts.len()
        )));
    }
    if !confirm(&preview, args.yes)? {
        eprintln!("dsh: nothing changed");
        return Ok(1);
    }
    let done = rewind::run(
        &store,
        id,
        None,
        Some(last.id.clone()),
        &plan,
        current.id,
        args.force,
    )
    .map_err(run_err)?;
    let mut out = preview;
    out.push_str(&format!(
        "undone: {} written, {} deleted (undo again to redo)\n",
        done.applied.written, done.applied.deleted
    ));
    if let Some(f) = &last.forked_session {
        out.push_str(&format!(
            "the conversation of {f} is kept; {id} is as it was\n"
        ));
    }
    write_stdout(&out)?;
    Ok(0)
}

/// `dsh checkpoints list | gc`.
pub(crate) async fn checkpoints(cmd: CheckpointsCommand) -> Result<u8, Failure> {
    let root = checkpoints_root();
    let projects = Store::projects(&root).map_err(run_err)?;
    let jsonl = sessions_store();
    let (CheckpointsCommand::List { store } | CheckpointsCommand::Gc { store }) = &cmd;
    // A session is deleted when neither the JSONL store nor the named store holds it.
    let other = crate::store_cmd::postgres(store.as_deref())?;
    let exists = |s: &str| {
        jsonl.exists(s)
            || other
                .as_ref()
                .is_some_and(|pg| SessionPersistence::exists(&**pg, s))
    };
    let mut out = String::new();
    match cmd {
        CheckpointsCommand::List { .. } => {
            for (dir, ws) in projects {
                let store = Store::at(&dir, &ws, DEFAULT_MAX_FILE_BYTES);
                let records = store.records().map_err(run_err)?;
                out.push_str(&format!(
                    "{}  {} checkpoints  {} KiB  {}\n",
                    ws.display(),
                    records.len(),
                    store.size() / 1024,
                    dir.display()
                ));
                let mut by_session: BTreeMap<String, (usize, u64, u64)> = BTreeMap::new();
                for r in &records {
                    let e = by_session
                        .entry(r.session.clone())
                        .or_insert((0, u64::MAX, 0));
                    e.0 += 1;
                    if let Some(t) = r.turn {
                        e.1 = e.1.min(t);
                        e.2 = e.2.max(t);
                    }
                }
                for (s, (n, lo, hi)) in by_session {
                    let gone = if exists(&s) {
                        ""
                    } else {
                        "  (session deleted)"
                    };
                    let turns = if lo == u64::MAX {
                        String::new()
                    } else {
                        format!("  turns {lo}..{hi}")
                    };
                    out.push_str(&format!("  {s}  {n} checkpoints{turns}{gone}\n"));
                }
            }
            if out.is_empty() {
                out.push_str("no checkpoints\n");
            }
        }
        CheckpointsCommand::Gc { .. } => {
            let (mut objects, mut bytes) = (0, 0);
            for (dir, ws) in projects {
                let store = Store::at(&dir, &ws, DEFAULT_MAX_FILE_BYTES);
                let r = store.gc(|s| exists(s)).map_err(run_err)?;
                out.push_str(&format!(
                    "{}: dropped {} checkpoints and {} rewinds of deleted sessions, {} objects \
                     ({} KiB); {} KiB left\n",
                    ws.display(),
                    r.records_dropped,
                    r.rewinds_dropped,
                    r.objects_deleted,
                    r.bytes_freed / 1024,
                    store.size() / 1024
                ));
                objects += r.objects_deleted;
                bytes += r.bytes_freed;
            }
            out.push_str(&format!(
                "total: {objects} objects, {} KiB freed\n",
                bytes / 1024
            ));
        }
    }
    write_stdout(&out)?;
    Ok(0)
}
