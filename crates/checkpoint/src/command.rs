//! `/rewind`: lists the session's turns with what a rewind to each would restore;
//! `/rewind N [code|conversation|both] [force]` previews a rewind (the files it touches and
//! their unified diff, as a [`CommandOutcome::RewindPreview`]); adding `yes` applies it. A
//! conversation rewind answers [`CommandOutcome::SwitchSession`] with the forked session and
//! records `dsh/forked` in the old one (clients attached to it follow the fork from it).

use std::sync::Arc;

use dsh_agent::Agent;
use dsh_commands::{CommandCall, CommandError, CommandFuture, CommandSpec, Commands};
use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_protocol::CommandOutcome;
use dsh_protocol::command::{RewindFile, RewindFileChange, RewindMode, RewindPreview};
use dsh_session::forked::{ForkReason, SessionForked};
use dsh_session::{ForkOptions, Sessions};

use crate::diff::ChangeKind;
use crate::events::Rewound;
use crate::ops;
use crate::plugin::{CheckpointConfig, checkpoints_root};
use crate::preview::{DEFAULT_MAX_LINES, diff_preview};
use crate::rewind::{self, RewindError};
use crate::store::Store;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Code,
    Conversation,
    Both,
}

impl Mode {
    fn word(self) -> &'static str {
        match self {
            Mode::Code => "code",
            Mode::Conversation => "conversation",
            Mode::Both => "both",
        }
    }
}

struct Args {
    to: Option<u64>,
    mode: Mode,
    force: bool,
    yes: bool,
}

fn parse(args: &str) -> Result<Args, CommandError> {
    let mut a = Args {
        to: None,
        mode: Mode::Both,
        force: false,
        yes: false,
    };
    for word in args.split_whitespace() {
        match word {
            "code" => a.mode = Mode::Code,
            "conversation" => a.mode = Mode::Conversation,
            "both" => a.mode = Mode::Both,
            "force" | "--force" => a.force = true,
            "yes" | "--yes" | "-y" => a.yes = true,
            n => match n.parse::<u64>() {
                Ok(n) if n >= 1 => a.to = Some(n),
                _ => {
                    return Err(CommandError::Usage(format!(
                        "`/rewind {args}`: use /rewind, or /rewind N [code|conversation|both] \
                         [force] [yes] (N: a turn, from 1)"
                    )));
                }
            },
        }
    }
    Ok(a)
}

fn failed(e: impl std::fmt::Display) -> CommandError {
    CommandError::Failed(e.to_string())
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, CommandError> + Send + 'static,
) -> Result<T, CommandError> {
    tokio::task::spawn_blocking(f).await.map_err(failed)?
}

async fn run(
    ctx: Ctx,
    config: CheckpointConfig,
    agent: Arc<dyn Agent>,
    args: Args,
) -> Result<CommandOutcome, CommandError> {
    let session = agent.session();
    if session.with_log(|l| l.tracker().open_turn()).is_some() {
        return Err(CommandError::Failed(
            "a turn is running: /rewind once it ends".into(),
        ));
    }
    let events = session.events();
    let root = config.root.clone().unwrap_or_else(checkpoints_root);
    let max = config.max_file_bytes;
    let Some(to) = args.to else {
        let Some(ws) = ops::workspace_of(&events) else {
            return Ok(done(
                "No checkpoints in this session yet: no turn has called a tool.",
            ));
        };
        let id = agent.id().to_owned();
        return blocking(move || {
            let store = Store::open(&root, &ws, max).map_err(failed)?;
            let turns = ops::list_turns(&store, &id, &events).map_err(failed)?;
            let mut out = String::from(
                "Turns (`/rewind N [code|conversation|both]` previews, `yes` applies):\n",
            );
            for t in turns {
                let r = match t.restore {
                    Some(c) => ops::summary(c),
                    None => "no file changes since".into(),
                };
                out.push_str(&format!("{:>3}. {}  ({r})\n", t.turn, t.prompt));
            }
            Ok(done(out))
        })
        .await;
    };
    let last = ops::last_turn(&events);
    if to > last {
        return Err(CommandError::Usage(format!(
            "this session has {last} turn(s): /rewind 1..{last}"
        )));
    }
    if !args.yes {
        return preview(root, max, agent.id().to_owned(), events, to, &args).await;
    }
    let mut text = String::new();
    let mut record_id = None;
    if args.mode != Mode::Conversation {
        match ops::workspace_of(&events) {
            None => text.push_str("Files: no checkpoints in this session; nothing restored.\n"),
            Some(ws) => {
                let session_id = agent.id().to_owned();
                let events = events.clone();
                let force = args.force;
                let (t, id) = blocking(move || {
                    let store = Store::open(&root, &ws, max).map_err(failed)?;
                    let (current, plan) =
                        ops::prepare(&store, &session_id, &events, to).map_err(failed)?;
                    let Some(plan) = plan.filter(|p| !p.actions.is_empty()) else {
                        return Ok((
                            format!("Files: nothing changed since turn {to} began.\n"),
                            None,
                        ));
                    };
                    let preview = ops::preview(&plan);
                    match rewind::run(
                        &store,
                        &session_id,
                        Some(to),
                        None,
                        &plan,
                        current.id,
                        force,
                    ) {
                        Ok(o) => {
                            let mut t = format!(
                                "Files restored to before turn {to} ({} written, {} deleted; \
                                 backup {}):\n{preview}",
                                o.applied.written,
                                o.applied.deleted,
                                o.record.backup.short()
                            );
                            for (p, e) in &o.applied.failed {
                                t.push_str(&format!("  failed: {p}: {e}\n"));
                            }
                            t.push_str("Undo with `dsh rewind --undo`.\n");
                            Ok((t, Some(o.record.id)))
                        }
                        Err(RewindError::Conflicts(paths)) => Err(CommandError::Failed(format!(
                            "Nothing restored: {} file(s) changed outside dsh since the \
                             checkpoint:\n  {}\nPreview:\n{preview}Run `/rewind {to} code \
                             force yes` to overwrite them (a backup is taken first).",
                            paths.len(),
                            paths.join("\n  ")
                        ))),
                        Err(e) => Err(failed(e)),
                    }
                })
                .await?;
                text.push_str(&t);
                record_id = id;
            }
        }
    }
    if args.mode != Mode::Code {
        let Some(boundary) = ops::fork_boundary(&events, to) else {
            text.push_str(
                "Conversation: nothing before turn 1 to keep; start a new session instead.\n",
            );
            return Ok(done(text));
        };
        let sessions = ctx.dep::<dyn Sessions>().map_err(failed)?;
        let child = sessions
            .fork(
                agent.id(),
                ForkOptions {
                    boundary: Some(boundary),
                    ..Default::default()
                },
            )
            .map_err(failed)?;
        child
            .append_plugin(&Rewound {
                from_session: agent.id().to_owned(),
                to_turn: to,
                rewind: record_id.clone(),
            })
            .map_err(failed)?;
        let id = child.id().to_owned();
        sessions.close(&id).await.map_err(failed)?;
        // The old session says where it continues: every client attached to it, now or
        // later (a replay of its log), follows the fork from this record.
        session
            .append_plugin(&SessionForked {
                session_id: id.clone(),
                reason: ForkReason::Rewind,
                to_turn: Some(to),
                rewind_id: record_id.clone(),
            })
            .map_err(failed)?;
        session.write_through().await.map_err(failed)?;
        text.push_str(&format!(
            "Conversation rewound to before turn {to} in a new session `{id}` (this one stays \
             as it was): continue it with `dsh --resume {id}`.\n"
        ));
        return Ok(CommandOutcome::SwitchSession {
            session_id: id,
            text,
        });
    }
    Ok(done(text))
}

fn done(text: impl Into<String>) -> CommandOutcome {
    CommandOutcome::Done { text: text.into() }
}

/// `/rewind N [mode]` without `yes`: what it would do, nothing done.
async fn preview(
    root: std::path::PathBuf,
    max: u64,
    session_id: String,
    events: Vec<Arc<dsh_session::Event>>,
    to: u64,
    args: &Args,
) -> Result<CommandOutcome, CommandError> {
    let mode = match args.mode {
        Mode::Both => RewindMode::Both,
        Mode::Code => RewindMode::Code,
        Mode::Conversation => RewindMode::Conversation,
    };
    let force = if args.force { " force" } else { "" };
    let mut p = RewindPreview {
        to_turn: to,
        mode,
        files: Vec::new(),
        diff: String::new(),
        omitted_lines: 0,
        conflicts: Vec::new(),
        left_alone: Vec::new(),
        confirm: format!("{to} {}{force} yes", args.mode.word()),
    };
    let ws = ops::workspace_of(&events);
    let (Some(ws), false) = (ws, args.mode == Mode::Conversation) else {
        return Ok(CommandOutcome::RewindPreview(p));
    };
    blocking(move || {
        let store = Store::open(&root, &ws, max).map_err(failed)?;
        let (current, plan) = ops::prepare(&store, &session_id, &events, to).map_err(failed)?;
        if let Some(plan) = plan {
            let d = diff_preview(&store, &plan, &current.manifest, DEFAULT_MAX_LINES)
                .map_err(failed)?;
            p.files = d
                .files
                .into_iter()
                .map(|f| RewindFile {
                    path: f.path,
                    change: match f.kind {
                        ChangeKind::Added => RewindFileChange::Recreate,
                        ChangeKind::Changed => RewindFileChange::Restore,
                        ChangeKind::Removed => RewindFileChange::Delete,
                    },
                    binary: f.binary,
                    added: f.added,
                    removed: f.removed,
                })
                .collect();
            p.diff = d.text;
            p.omitted_lines = d.omitted_lines;
            let lossy = |v: &Vec<u8>| String::from_utf8_lossy(v).into_owned();
            p.conflicts = plan.conflicts.iter().map(lossy).collect();
            p.left_alone = plan.left_alone.iter().map(lossy).collect();
        }
        Ok(CommandOutcome::RewindPreview(p))
    })
    .await
}

/// Plugin `rewind-command`: `/rewind` in the command registry (its config names the store
/// like the `checkpoint` plugin's).
#[derive(Debug)]
pub struct RewindCommandPlugin;

impl Plugin for RewindCommandPlugin {
    const NAME: &'static str = "rewind-command";
    type Config = CheckpointConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Commands>(), Dep::on::<dyn Sessions>()]
    }

    async fn apply(ctx: Ctx, config: CheckpointConfig) -> Result<(), BoxError> {
        let commands = ctx.dep::<dyn Commands>()?;
        let c = ctx.clone();
        commands.register(
            &ctx,
            CommandSpec::new(
                "rewind",
                "Rewind files and/or conversation to before an earlier turn",
            )
            .with_argument_hint("[N [code|conversation|both] [force] [yes]]"),
            Arc::new(move |call: CommandCall| -> CommandFuture {
                let (c, config) = (c.clone(), config.clone());
                Box::pin(async move {
                    let args = parse(&call.args)?;
                    run(c, config, call.agent.clone(), args).await
                })
            }),
        )?;
        Ok(())
    }
}
