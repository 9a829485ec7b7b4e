//! `dsh exec`: one task, headless.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::anyhow;
use dsh_agent::{Agent, AgentOptions, Agents};
use dsh_kernel::{Composer, Composition, Kernel};
use dsh_protocol::{Client, ErrorCode, EventMsg, Op, OpenSession, ProtocolError, SessionOptions};
use dsh_session::data::TurnEndReason;
use dsh_session::{CoreEvent, EventKind, Sessions};
use futures::StreamExt;
use serde_json::Value;

use crate::compose::{compose, registry};
use crate::{ExecArgs, Failure};

fn read_prompt(arg: &str) -> Result<String, Failure> {
    let prompt = if arg == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| Failure::usage(anyhow!("cannot read the prompt from stdin: {e}")))?;
        s
    } else {
        arg.to_owned()
    };
    if prompt.trim().is_empty() {
        return Err(Failure::usage(anyhow!("the prompt is empty")));
    }
    Ok(prompt)
}

pub(crate) fn working_dir(arg: Option<&PathBuf>) -> Result<PathBuf, Failure> {
    let dir = match arg {
        Some(d) => d.clone(),
        None => std::env::current_dir()
            .map_err(|e| Failure::usage(anyhow!("cannot read the current directory: {e}")))?,
    };
    let dir = dir
        .canonicalize()
        .map_err(|e| Failure::usage(anyhow!("working directory {}: {e}", dir.display())))?;
    if !dir.is_dir() {
        return Err(Failure::usage(anyhow!(
            "working directory {} is not a directory",
            dir.display()
        )));
    }
    Ok(dir)
}

/// The latest stored session whose working directory is `cwd`.
pub(crate) fn latest_for(sessions: &dyn Sessions, cwd: &str) -> Result<String, Failure> {
    let list = sessions
        .list()
        .map_err(|e| Failure::run(anyhow!("cannot list sessions: {e}")))?;
    list.into_iter()
        .filter(|s| s.cwd.as_deref() == Some(cwd) && s.parent_session.is_none())
        .max_by_key(|s| (s.created_at, s.id.clone()))
        .map(|s| s.id)
        .ok_or_else(|| Failure::usage(anyhow!("no session to continue in {cwd}")))
}

/// The last `turn/end` reason and the text of the last assistant message of that turn.
fn outcome(agent: &Arc<dyn Agent>) -> (Option<TurnEndReason>, String) {
    let session = agent.session();
    session.with_log(|log| {
        let events = log.events();
        let start = events
            .iter()
            .rposition(|e| *e.event_kind() == EventKind::TurnStart)
            .unwrap_or(0);
        let mut reason = None;
        let mut text = String::new();
        for e in &events[start..] {
            match e.core() {
                Some(CoreEvent::TurnEnd(end)) => reason = Some(end.reason.clone()),
                Some(CoreEvent::AssistantMessage(m)) => {
                    let t = m.message.text();
                    if !t.is_empty() {
                        text = t;
                    }
                }
                _ => {}
            }
        }
        (reason, text)
    })
}

fn describe(reason: &TurnEndReason) -> String {
    match reason {
        TurnEndReason::Error { error } => {
            format!("the turn failed: {}: {}", error.code, error.message)
        }
        TurnEndReason::Aborted { reason } => {
            format!("the turn was aborted ({})", reason.kind())
        }
        other => format!("the turn ended `{}`", other.kind()),
    }
}

/// Runs `dsh exec`.
pub(crate) async fn run(mut args: ExecArgs) -> Result<u8, Failure> {
    if let Some(id) = &args.resume {
        // Read the log while the composition starts; the store adopts the read when the file
        // is unchanged under its lock (a custom `root` in the config just leaves it unused).
        dsh_session_jsonl::prefetch::start(dsh_session_jsonl::default_root(), id);
    }
    let prompt = read_prompt(&args.prompt)?;
    if let Some(server) = args.server.clone() {
        return crate::exec_remote::run(args, server, prompt).await;
    }
    if args.bg {
        return crate::bg::exec(args, prompt).await;
    }
    let cwd = working_dir(args.cwd.as_ref())?;
    args.compose.project_dir = Some(cwd.clone());
    let registry = registry();
    let max_parallel = args.max_parallel_tools;
    let sandbox = args.sandbox.clone();
    let plan = args.plan.clone();
    // Command-line settings applied over every composition (also on live reloads).
    let extra: Arc<dyn Fn(&mut Composition) + Send + Sync> =
        Arc::new(move |c: &mut Composition| {
            if let Some(n) = max_parallel {
                for r in c.rows.iter_mut().filter(|r| r.row.name == "agent-loop") {
                    if !r.row.config.is_object() {
                        r.row.config = Value::Object(Default::default());
                    }
                    r.row.config["maxParallelToolCalls"] = Value::from(n);
                }
            }
            sandbox.apply(c);
            plan.apply(c);
        });
    let mut composition = compose(&args.compose, None, &registry)?;
    extra(&mut composition);
    let kernel = Kernel::new(registry.clone());
    let composer = Arc::new(tokio::sync::Mutex::new(Composer::new(kernel.root())));
    {
        let mut c = composer.lock().await;
        c.apply(&composition).await.map_err(Failure::usage)?;
        c.ready().await.map_err(Failure::usage)?;
        tracing::debug!("composition ready");
    }
    let _watcher = crate::watch::watch(
        crate::home::user_file(),
        args.compose.clone(),
        extra,
        registry,
        composer.clone(),
        composition,
    );
    let result = run_agent(&kernel, args, prompt, cwd).await;
    kernel.dispose().await;
    result
}

/// What the in-process host adds to the protocol for a local `exec`: the agent itself, for what
/// the protocol does not carry (waiting for background work, the usage line, the outcome read
/// from the log).
pub(crate) struct Local {
    root: dsh_kernel::Ctx,
    host: dsh_host::Host,
    /// Resumed (or continued) rather than created.
    resumed: Option<String>,
    wait: std::time::Duration,
    usage: bool,
}

impl Local {
    fn agent(&self, id: &str) -> Result<Arc<dyn Agent>, Failure> {
        self.host
            .agent(id)
            .ok_or_else(|| Failure::run(anyhow!("session {id} is not open in this process")))
    }

    /// A failed open, as `exec` always said it.
    fn open_failure(&self, e: ProtocolError) -> Failure {
        match (&self.resumed, &e.code) {
            (Some(id), ErrorCode::SessionNotFound) => Failure::usage(anyhow!(
                "no stored session `{id}` (see `dsh sessions list`)"
            )),
            (Some(id), ErrorCode::Internal) if self.corrupt(id) => Failure::run(anyhow!(
                "{}\n(`dsh sessions repair <ID>` keeps the valid part and moves the rest aside; nothing is deleted)",
                e.message
            )),
            _ => Failure::run(anyhow!("{}", e.message)),
        }
    }

    /// Whether the stored log of `id` is refused as corrupt (asked only after a failed open).
    fn corrupt(&self, id: &str) -> bool {
        self.root
            .get::<dyn Sessions>()
            .is_some_and(|s| matches!(s.read(id), Err(e) if e.code() == "SESSION_CORRUPT"))
    }
}

/// How the run ends, by signal.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Interrupt,
    Terminate,
}

impl Stop {
    fn code(self) -> u8 {
        match self {
            Stop::Interrupt => 130,
            Stop::Terminate => 143,
        }
    }
}

/// Ctrl-C or SIGTERM.
async fn stop_signal() -> Stop {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                r = tokio::signal::ctrl_c() => match r {
                    Ok(()) => Stop::Interrupt,
                    Err(_) => futures::future::pending().await,
                },
                _ = term.recv() => Stop::Terminate,
            };
        }
    }
    match tokio::signal::ctrl_c().await {
        Ok(()) => Stop::Interrupt,
        Err(_) => futures::future::pending().await,
    }
}

/// What the event stream told of the turn (a remote run ends on its `turnEnded`).
#[derive(Default)]
struct Seen {
    text: String,
    reason: Option<dsh_protocol::TurnEndReason>,
}

/// Follows the session's events: the streamed text on a terminal, retry notices, the last
/// answer and turn end (for a remote run).
async fn follow(
    mut events: dsh_protocol::EventStream,
    stream_text: bool,
    remote: bool,
    seen: tokio::sync::watch::Sender<Seen>,
) {
    while let Some(ev) = events.next().await {
        match ev.msg {
            EventMsg::TextDelta { text } if stream_text => {
                let _ = write!(std::io::stderr().lock(), "{text}");
            }
            EventMsg::ToolCallBegan {
                tool_name, display, ..
            } if stream_text => {
                let what = display.subject.unwrap_or(display.title);
                let _ = writeln!(std::io::stderr().lock(), "\n[{tool_name}] {what}");
            }
            EventMsg::AssistantMessage { text, .. } => {
                if stream_text {
                    let _ = writeln!(std::io::stderr().lock());
                }
                if !text.is_empty() {
                    seen.send_modify(|s| s.text = text);
                }
            }
            // A retried attempt restarts the answer: say so, whatever stderr is, so the partial
            // text already shown (or the pause) is explained.
            EventMsg::Retrying {
                attempt,
                delay_ms,
                error,
                ..
            } => eprintln!(
                "\ndsh: the answer restarts: {} ({}); retry {attempt} in {delay_ms} ms",
                error.code, error.message
            ),
            EventMsg::Error(e) if remote => eprintln!("dsh: {e}"),
            EventMsg::TurnEnded { reason, .. } => seen.send_modify(|s| s.reason = Some(reason)),
            _ => {}
        }
    }
}

/// Runs one task on `client`: opens the session, prints its log with `--json`, submits the
/// prompt, waits for the turn (and, locally, the background work it started), interrupts it on
/// Ctrl-C or SIGTERM, and answers with exec's output and exit status. The one path of a local
/// `exec` (an in-process host, `local`) and of `exec --server` (a remote client).
pub(crate) async fn drive(
    client: Arc<dyn Client>,
    open: OpenSession,
    prompt: String,
    json: bool,
    local: Option<Local>,
    server: Option<&str>,
) -> Result<u8, Failure> {
    let summary = match client.open(open).await {
        Ok(s) => s,
        Err(e) => {
            return Err(match &local {
                Some(l) => l.open_failure(e),
                None => crate::exec_remote::failure(e),
            });
        }
    };
    let id = summary.id.clone();
    tracing::debug!(
        resumed = local.as_ref().is_some_and(|l| l.resumed.is_some()),
        "session opened"
    );
    let agent = match &local {
        Some(l) => Some(l.agent(&id)?),
        None => None,
    };
    if let Some(agent) = &agent {
        // Acquire and test the write path before any token is spent: a read-only or full home,
        // or a concurrent creator of the same id, fails here with nothing sent to the model. A
        // new session's first write-through publishes its file (and takes the lock); a resumed
        // one's writes the repair closers without waiting for the disk (the turn end syncs them).
        if let Err(e) = agent.session().write_through().await {
            let _ = client.close(&id).await;
            return Err(Failure::run(anyhow!(
                "cannot write session {id}: {e} (nothing was sent to the model)"
            )));
        }
    }
    let mut printer = None;
    if json {
        // A session that never ran a turn (new, also through `--session`): print what its start
        // logged too.
        let fresh = match (&local, &agent) {
            (Some(l), Some(a)) => {
                l.resumed.is_none()
                    && !a
                        .session()
                        .events()
                        .iter()
                        .any(|e| *e.event_kind() == EventKind::TurnStart)
            }
            _ => summary.turns == 0,
        };
        let after = if fresh { None } else { summary.last_seq };
        let log = client
            .log(&id, after)
            .await
            .map_err(|e| Failure::run(anyhow!("{e}")))?;
        printer = Some(crate::json_out::JsonPrinter::start(log));
    }
    let tty = std::io::stderr().is_terminal();
    let events = client
        .subscribe(&id, summary.last_seq)
        .await
        .map_err(|e| Failure::run(anyhow!("{e}")))?;
    let (seen_tx, mut seen) = tokio::sync::watch::channel(Seen::default());
    let follower = tokio::spawn(follow(events, tty && !json, server.is_some(), seen_tx));
    if tty {
        match server {
            Some(s) => eprintln!("session {id} on {s}"),
            None => eprintln!("session {id}"),
        }
    }
    let submit = Op::Submit {
        text: prompt,
        attachments: Vec::new(),
    };
    if let Err(e) = client.send(&id, submit).await {
        follower.abort();
        return Err(match &local {
            Some(_) => Failure::run(anyhow!("{}", e.message)),
            None => crate::exec_remote::failure(e),
        });
    }
    let mut stopped = None;
    let mut left_running = None;
    match (&local, &agent) {
        (Some(l), Some(agent)) => {
            tokio::select! {
                left = crate::background::settle(&l.root, agent, l.wait) => left_running = left,
                stop = stop_signal() => {
                    stopped = Some(stop);
                    // Pending input is dropped: nothing starts after the interrupted turn.
                    client
                        .send(&id, Op::InterruptDropQueued)
                        .await
                        .map_err(|e| Failure::run(anyhow!("{}", e.message)))?;
                    // A second signal exits at once.
                    tokio::spawn(async move {
                        let again = stop_signal().await;
                        std::process::exit(i32::from(again.code()));
                    });
                    agent.when_idle().await;
                }
            }
        }
        _ => loop {
            tokio::select! {
                r = seen.wait_for(|s| s.reason.is_some()) => {
                    if r.is_err() {
                        return Err(Failure::run(anyhow!(
                            "the server closed session {id} before its turn ended"
                        )));
                    }
                    break;
                }
                stop = stop_signal(), if stopped.is_none() => {
                    stopped = Some(stop);
                    // As locally: nothing queued starts after the interrupted turn.
                    client
                        .send(&id, Op::InterruptDropQueued)
                        .await
                        .map_err(crate::exec_remote::failure)?;
                }
            }
        },
    }
    let Some(l) = &local else {
        // Remote: the session stays open on the server.
        let (reason, text) = {
            let s = seen.borrow();
            (s.reason.clone(), s.text.clone())
        };
        follower.abort();
        if tty {
            eprintln!();
        }
        if !text.is_empty() {
            crate::config_cmd::write_stdout(&format!("{text}\n"))?;
        }
        if let Some(stop) = stopped {
            eprintln!("dsh: interrupted; session {id} saved on the server");
            return Ok(stop.code());
        }
        return match reason {
            Some(dsh_protocol::TurnEndReason::Completed) => Ok(0),
            Some(r) => Err(Failure::run(anyhow!(
                "{} (session {id})",
                crate::exec_remote::describe(&r)
            ))),
            None => Err(Failure::run(anyhow!("the turn did not run (session {id})"))),
        };
    };
    let agent = agent.ok_or_else(|| Failure::run(anyhow!("session {id} is not open")))?;
    let (reason, text) = outcome(&agent);
    let goal = goal_outcome(&agent, summary.last_seq);
    if let Some(line) = &left_running {
        eprintln!("{line}");
    }
    let usage = (l.usage || tty).then(|| crate::background::usage_line(&l.root, &agent));
    // Closed through the host: the turn settled, the log flushed, the lock released; the log
    // stream ends after the records the close committed.
    if let Err(e) = client.close(&id).await {
        tracing::warn!(error = %e, "closing the session failed");
        agent.dispose().await;
    }
    follower.abort();
    if let Some(line) = usage {
        eprintln!("{line}");
    }
    if let Some(printer) = printer {
        printer.finish().await;
    }
    if !json && !text.is_empty() {
        crate::config_cmd::write_stdout(&format!("{text}\n"))?;
    }
    if let Some(stop) = stopped {
        eprintln!("dsh: interrupted; session {} saved", id);
        return Ok(stop.code());
    }
    // A goal this run worked on decides: complete 0; blocked (out of rounds too) or paused 1.
    match goal {
        Some(g) if g.phase == dsh_goal_api::GoalPhase::Complete => return Ok(0),
        Some(g) if g.phase != dsh_goal_api::GoalPhase::Active => {
            let why = g
                .blocked_reason
                .map(|r| format!(": {}: {}", r.code, r.message))
                .unwrap_or_default();
            return Err(Failure::run(anyhow!(
                "the goal is {}{why} (session {id})",
                g.phase.as_str()
            )));
        }
        _ => {}
    }
    match reason {
        Some(TurnEndReason::Completed) => Ok(0),
        Some(r) => Err(Failure::run(anyhow!("{} (session {id})", describe(&r)))),
        None => Err(Failure::run(anyhow!("the turn did not run (session {id})"))),
    }
}

/// The session's goal when this run (the events after `before`) changed it or ran a round of it.
fn goal_outcome(agent: &Arc<dyn Agent>, before: Option<u64>) -> Option<dsh_goal_api::Goal> {
    let events = agent.session().events();
    let touched = events
        .iter()
        .any(|e| before.is_none_or(|b| e.seq() > b) && dsh_goal_api::GoalFold::reads(e));
    touched.then(|| dsh_goal_api::GoalFold::of(&events).current.map(|s| s.goal))?
}

/// A local `exec`: an in-process host over the kernel, driven through the client.
async fn run_agent(
    kernel: &Kernel,
    args: ExecArgs,
    prompt: String,
    cwd: PathBuf,
) -> Result<u8, Failure> {
    let root = kernel.root();
    if root.get::<dyn Agents>().is_none() {
        return Err(Failure::usage(anyhow!(
            "the composition mounts no `agents` service"
        )));
    }
    let sessions = root
        .get::<dyn Sessions>()
        .ok_or_else(|| Failure::usage(anyhow!("the composition mounts no `sessions` service")))?;
    crate::providers::check_route(&root, &args.provider)?;
    let defaults = AgentOptions {
        provider: Some(args.provider.clone()),
        model: args.model.clone(),
        reasoning_effort: args.effort.map(Into::into),
        max_tokens: None,
        temperature: None,
        cwd: cwd.clone(),
    };
    let resume_id = match (&args.resume, args.continue_latest) {
        (Some(id), _) => Some(id.clone()),
        (None, true) => Some(latest_for(sessions.as_ref(), &cwd.to_string_lossy())?),
        (None, false) => None,
    };
    // Approvals keep exec's policy: no person answers here (the approval plugin decides).
    let host = dsh_host::Host::new(
        root.clone(),
        dsh_host::HostOptions {
            defaults,
            answer_approvals: false,
        },
    )
    .map_err(|e| Failure::usage(anyhow!("{}", e.message)))?;
    // The session keeps exec's directory, resumed or new.
    let options = SessionOptions {
        cwd: Some(cwd.display().to_string()),
        ..Default::default()
    };
    let open = match &resume_id {
        Some(id) => OpenSession::Resume {
            session_id: id.clone(),
            options,
        },
        None => OpenSession::Create {
            session_id: args.session.clone(),
            options,
            prompt: None,
        },
    };
    let local = Local {
        root,
        host: host.clone(),
        resumed: resume_id,
        wait: std::time::Duration::from_secs(args.wait_background),
        usage: args.usage,
    };
    let result = drive(host.client(), open, prompt, args.json, Some(local), None).await;
    host.shutdown().await;
    result
}
