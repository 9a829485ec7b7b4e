//! `dsh exec`: one task, headless.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::anyhow;
use dsh_agent::{AgentOptions, Agents};
use dsh_kernel::{Composer, Composition, Kernel};
use dsh_protocol::{
    Client, ErrorCode, GoalPhase, Op, OpenSession, ProtocolError, SessionOptions, SessionQuery,
    TurnEndReason,
};
use dsh_session::Sessions;
use serde_json::Value;

use crate::exec_follow::{Seen, describe, follow};

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

/// The latest session (not a sub-agent's) whose working directory is `cwd`, as the client's
/// host lists them (`--continue`, locally and on a server alike).
pub(crate) async fn latest_for(client: &dyn Client, cwd: &str) -> Result<String, Failure> {
    let list = client
        .sessions(SessionQuery {
            cwd: Some(cwd.to_owned()),
            ..Default::default()
        })
        .await
        .map_err(|e| Failure::run(anyhow!("cannot list sessions: {e}")))?;
    list.into_iter()
        .filter(|s| s.cwd == cwd && s.parent_id.is_none())
        .max_by_key(|s| (s.created_ms, s.id.clone()))
        .map(|s| s.id)
        .ok_or_else(|| Failure::usage(anyhow!("no session to continue in {cwd}")))
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

/// Ctrl-C and SIGTERM, listened to from [`StopSignals::listen`] on: a signal that arrives
/// before the first wait (the turn may stream before `drive` waits) is kept, not left to kill
/// the process with nothing saved.
struct StopSignals {
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self {
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// The next Ctrl-C or SIGTERM.
    async fn next(&mut self) -> Stop {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                if let Some(s) = s
                    && s.recv().await.is_some()
                {
                    return;
                }
                futures::future::pending::<()>().await;
            }
            tokio::select! {
                () = recv(&mut self.int) => Stop::Interrupt,
                () = recv(&mut self.term) => Stop::Terminate,
            }
        }
        #[cfg(not(unix))]
        match tokio::signal::ctrl_c().await {
            Ok(()) => Stop::Interrupt,
            Err(_) => futures::future::pending().await,
        }
    }
}

/// How `drive` runs and reports.
pub(crate) struct DriveOptions<'a> {
    /// Print the session's committed records as JSON lines.
    pub json: bool,
    /// Print the usage line (also on a terminal).
    pub usage: bool,
    /// How long to wait for background work after the task is answered.
    pub wait: std::time::Duration,
    /// The server's address, for `--server` (its messages and failures).
    pub server: Option<&'a str>,
}

/// A failed open, as `exec` always said it.
fn open_failure(open: &OpenSession, e: ProtocolError, remote: bool) -> Failure {
    match (open, &e.code) {
        (OpenSession::Resume { session_id, .. }, ErrorCode::SessionNotFound) => Failure::usage(
            anyhow!("no stored session `{session_id}` (see `dsh sessions list`)"),
        ),
        (OpenSession::Resume { .. }, ErrorCode::SessionCorrupt) => Failure::run(anyhow!(
            "{}\n(`dsh sessions repair <ID>` keeps the valid part and moves the rest aside; nothing is deleted)",
            e.message
        )),
        _ if remote => crate::exec_remote::failure(e),
        _ => Failure::run(anyhow!("{}", e.message)),
    }
}

/// Waits until the session is idle after a turn with no background work left, or until `wait`
/// (from now) passed with background work still running: then the line saying what is stopped
/// (closing the session stops it). Fails when the session is closed before its turn ended.
async fn settle(
    seen: &mut tokio::sync::watch::Receiver<Seen>,
    wait: std::time::Duration,
    remote: bool,
) -> Option<String> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let _ = seen.wait_for(Seen::idle_after_a_turn).await;
        if seen.borrow().settled() {
            return None;
        }
        tokio::select! {
            _ = seen.wait_for(|s| s.settled() || s.busy()) => continue,
            () = tokio::time::sleep_until(deadline) => {}
        }
        // The deadline passed: a turn a notice woke is let finish only if nothing is left.
        let s = seen.borrow().clone();
        if s.background.is_empty() || s.busy() {
            continue;
        }
        let mut what = Vec::new();
        if !s.background.jobs.is_empty() {
            what.push(format!(
                "{} background job(s) ({})",
                s.background.jobs.len(),
                s.background.jobs.join(", ")
            ));
        }
        if s.background.subagents > 0 {
            what.push(format!(
                "{} continuable subagent(s)",
                s.background.subagents
            ));
        }
        return Some(format!(
            "dsh: stopped {} still running after {} s (--wait-background){}",
            what.join(" and "),
            wait.as_secs(),
            if remote { " on the server" } else { "" }
        ));
    }
}

/// Runs one task on `client`: opens the session, checks it can be written, prints its log with
/// `--json`, submits the prompt, waits for the turn and the background work it started (capped),
/// interrupts it on Ctrl-C or SIGTERM, closes the session, and answers with exec's output and
/// exit status. The one path of a local `exec` (an in-process host) and of `exec --server` (a
/// remote client): everything it reads comes through the protocol.
pub(crate) async fn drive(
    client: Arc<dyn Client>,
    open: OpenSession,
    prompt: String,
    options: DriveOptions<'_>,
) -> Result<u8, Failure> {
    let server = options.server;
    let remote = server.is_some();
    let resumed = matches!(open, OpenSession::Resume { .. });
    let summary = match client.open(open.clone()).await {
        Ok(s) => s,
        Err(e) => return Err(open_failure(&open, e, remote)),
    };
    let id = summary.id.clone();
    tracing::debug!(resumed, "session opened");
    // Acquire and test the write path before any token is spent: a read-only or full home,
    // or a concurrent creator of the same id, fails here with nothing sent to the model. A
    // new session's first write-through publishes its file (and takes the lock); a resumed
    // one's writes the repair closers without waiting for the disk (the turn end syncs them).
    if let Err(e) = client.send(&id, Op::Persist).await {
        let _ = client.close(&id).await;
        return Err(Failure::run(anyhow!(
            "cannot write session {id}: {} (nothing was sent to the model)",
            e.message
        )));
    }
    let mut printer = None;
    if options.json {
        // A session that never ran a turn (new, also through `--session`): print what its start
        // logged too.
        let fresh = !resumed && summary.turns == 0;
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
    let headless = remote.then(|| crate::exec_follow::Headless {
        client: client.clone(),
        session_id: id.clone(),
    });
    let follower = tokio::spawn(follow(events, tty && !options.json, headless, seen_tx));
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
    // Listen before the turn starts: it may stream before the wait below begins.
    let mut signals = StopSignals::listen();
    if let Err(e) = client.send(&id, submit).await {
        follower.abort();
        return Err(match server {
            Some(_) => crate::exec_remote::failure(e),
            None => Failure::run(anyhow!("{}", e.message)),
        });
    }
    let mut stopped = None;
    let mut left_running = None;
    tokio::select! {
        left = settle(&mut seen, options.wait, remote) => left_running = left,
        stop = signals.next() => stopped = Some(stop),
    }
    if stopped.is_some() {
        // Pending input is dropped: nothing starts after the interrupted turn.
        client
            .send(&id, Op::InterruptDropQueued)
            .await
            .map_err(|e| Failure::run(anyhow!("{}", e.message)))?;
        // A second signal exits at once.
        tokio::spawn(async move {
            let again = signals.next().await;
            std::process::exit(i32::from(again.code()));
        });
        let _ = seen.wait_for(|s| !s.busy()).await;
    }
    let outcome = seen.borrow().clone();
    if outcome.closed && outcome.ended == 0 && stopped.is_none() {
        return Err(Failure::run(anyhow!(
            "the session {id} was closed before its turn ended"
        )));
    }
    if let Some(line) = &left_running {
        eprintln!("{line}");
    }
    let usage = if options.usage || tty {
        match client.session(&id).await {
            Ok(s) => Some(crate::exec_follow::usage_line(
                &s.usage.unwrap_or_default(),
                &s.subagent_usage.unwrap_or_default(),
            )),
            Err(e) => {
                tracing::warn!(error = %e, "reading the session's usage failed");
                None
            }
        }
    } else {
        None
    };
    // Closed in the host: the turn settled, the log flushed, the lock released, its background
    // work stopped; the log stream ends after the records the close committed. The session
    // stays stored (on the server with `--server`), to be resumed.
    // A log that cannot be stored at the end (the turn-end barrier failed: a full disk, a
    // lease lost to another host) fails the run, saying why, whatever the turn's outcome: the
    // write check again before the close (the close itself only logs a failed flush).
    let unstored = match client.send(&id, Op::Persist).await {
        Err(e) if e.code == dsh_protocol::ErrorCode::StorageFailed => Some(e.message),
        _ => None,
    };
    if let Err(e) = client.close(&id).await {
        tracing::warn!(error = %e, "closing the session failed");
    }
    follower.abort();
    if tty && remote {
        eprintln!();
    }
    if let Some(line) = usage {
        eprintln!("{line}");
    }
    if let Some(printer) = printer {
        printer.finish().await;
    }
    if !options.json && !outcome.text.is_empty() {
        crate::config_cmd::write_stdout(&format!("{}\n", outcome.text))?;
    }
    if let Some(why) = unstored {
        return Err(Failure::run(anyhow!(
            "the session {id} could not be stored: {why}"
        )));
    }
    if let Some(stop) = stopped {
        match server {
            Some(_) => eprintln!("dsh: interrupted; session {id} saved on the server"),
            None => eprintln!("dsh: interrupted; session {id} saved"),
        }
        return Ok(stop.code());
    }
    // A goal this run worked on decides: complete 0; blocked (out of rounds too) or paused 1.
    match outcome.goal.flatten() {
        Some(g) if g.phase == GoalPhase::Complete => return Ok(0),
        Some(g) if g.phase != GoalPhase::Active => {
            let why = g
                .blocked
                .map(|r| format!(": {}: {}", r.code, r.message))
                .unwrap_or_default();
            let phase = match g.phase {
                GoalPhase::Paused => "paused",
                GoalPhase::Blocked => "blocked",
                GoalPhase::Active => "active",
                GoalPhase::Complete => "complete",
            };
            return Err(Failure::run(anyhow!(
                "the goal is {phase}{why} (session {id})"
            )));
        }
        _ => {}
    }
    match outcome.end {
        Some((TurnEndReason::Completed, _)) => Ok(0),
        Some((r, cause)) => Err(Failure::run(anyhow!(
            "{} (session {id})",
            describe(&r, cause.as_ref())
        ))),
        None => Err(Failure::run(anyhow!("the turn did not run (session {id})"))),
    }
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
    if root.get::<dyn Sessions>().is_none() {
        return Err(Failure::usage(anyhow!(
            "the composition mounts no `sessions` service"
        )));
    }
    crate::providers::check_route(&root, &args.provider)?;
    let defaults = AgentOptions {
        provider: Some(args.provider.clone()),
        model: args.model.clone(),
        reasoning_effort: args.effort.map(Into::into),
        max_tokens: None,
        temperature: None,
        cwd: cwd.clone(),
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
    let resume_id = match (&args.resume, args.continue_latest) {
        (Some(id), _) => Some(id.clone()),
        (None, true) => Some(latest_for(&*host.client(), &cwd.to_string_lossy()).await?),
        (None, false) => None,
    };
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
    let options = DriveOptions {
        json: args.json,
        usage: args.usage,
        wait: std::time::Duration::from_secs(args.wait_background),
        server: None,
    };
    let result = drive(host.client(), open, prompt, options).await;
    host.shutdown().await;
    result
}
