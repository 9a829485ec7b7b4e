//! `dsh exec`: one task, headless.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::anyhow;
use dsh_agent::events::AgentStreamChunk;
use dsh_agent::{Agent, AgentError, AgentOptions, Agents, CancelCause, CreateAgent, ResumeAgent};
use dsh_kernel::{Composer, Composition, Kernel};
use dsh_llm::{Message, StreamChunk};
use dsh_session::data::TurnEndReason;
use dsh_session::plugin::SessionEvent;
use dsh_session::{CoreEvent, EventKind, Sessions};
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

pub(crate) fn agent_error(e: AgentError) -> Failure {
    match e {
        AgentError::NotFound(id) => Failure::usage(anyhow!(
            "no stored session `{id}` (see `dsh sessions list`)"
        )),
        AgentError::Session(s) if s.code() == "SESSION_CORRUPT" => Failure::run(anyhow!(
            "{s}\n(`dsh sessions repair <ID>` keeps the valid part and moves the rest aside; nothing is deleted)"
        )),
        AgentError::Session(s) => Failure::run(anyhow!("{s}")),
        other => Failure::run(anyhow!("{other}")),
    }
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

/// What the retry notice needs of an `llm/retry` payload.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RetryNotice {
    retry: u32,
    delay_ms: u64,
    failure: dsh_llm::LlmFailure,
}

/// Resumes `resume_id` or creates a session (with the exact id `session_id` when given): the one
/// way front ends open their agent.
pub(crate) async fn open_agent(
    agents: &dyn Agents,
    root: &dsh_kernel::Ctx,
    resume_id: Option<String>,
    session_id: Option<String>,
    options: AgentOptions,
) -> Result<Arc<dyn Agent>, Failure> {
    match resume_id {
        Some(session_id) => agents
            .resume(
                root,
                ResumeAgent {
                    session_id,
                    options,
                    setup: None,
                },
            )
            .await
            .map_err(agent_error),
        None => agents
            .create(
                root,
                CreateAgent {
                    session_id,
                    label: None,
                    options,
                    setup: None,
                },
            )
            .await
            .map_err(agent_error),
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

async fn run_agent(
    kernel: &Kernel,
    args: ExecArgs,
    prompt: String,
    cwd: PathBuf,
) -> Result<u8, Failure> {
    let root = kernel.root();
    let agents = root
        .get::<dyn Agents>()
        .ok_or_else(|| Failure::usage(anyhow!("the composition mounts no `agents` service")))?;
    let sessions = root
        .get::<dyn Sessions>()
        .ok_or_else(|| Failure::usage(anyhow!("the composition mounts no `sessions` service")))?;
    crate::providers::check_route(&root, &args.provider)?;
    let options = AgentOptions {
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
    let new_session = resume_id.is_none();
    let agent = open_agent(
        agents.as_ref(),
        &root,
        resume_id,
        args.session.clone(),
        options,
    )
    .await?;
    tracing::debug!(resumed = !new_session, "agent opened");
    let id: Arc<str> = Arc::from(agent.id());
    // Acquire and test the write path before any token is spent: a read-only or full home, or
    // a concurrent creator of the same id, fails here with nothing sent to the model. A new
    // session's first write-through publishes its file (and takes the lock); a resumed one's
    // writes the repair closers without waiting for the disk (the turn end syncs them).
    if let Err(e) = agent.session().write_through().await {
        agent.dispose().await;
        return Err(Failure::run(anyhow!(
            "cannot write session {id}: {e} (nothing was sent to the model)"
        )));
    }
    let mut printer = None;
    if args.json {
        // A session that never ran a turn (new, also through `--session`): print what its
        // start logged too.
        let new_session = new_session
            && !agent
                .session()
                .events()
                .iter()
                .any(|e| *e.event_kind() == EventKind::TurnStart);
        printer = Some(
            crate::json_out::JsonPrinter::start(&root, agent.session(), new_session)
                .map_err(Failure::run)?,
        );
    } else if std::io::stderr().is_terminal() {
        root.on::<AgentStreamChunk>(|e| {
            let mut err = std::io::stderr().lock();
            match &e.chunk {
                StreamChunk::TextDelta { text, .. } => write!(err, "{text}")?,
                StreamChunk::BlockEnd {
                    block: dsh_llm::ContentBlock::ToolCall(c),
                    ..
                } => writeln!(err, "\n[{}] {}", c.name, c.arguments)?,
                StreamChunk::Finish { .. } => writeln!(err)?,
                _ => {}
            }
            Ok(())
        })
        .map_err(|e| Failure::run(anyhow!(e)))?;
    }
    // A retried attempt restarts the answer: say so, whatever stderr is, so the partial text
    // already shown (or the pause) is explained.
    let retry_id = id.clone();
    root.on::<SessionEvent>(move |e| {
        if e.session_id == retry_id
            && *e.event.event_kind() == EventKind::LlmRetry
            && let Ok(r) = e.event.data_as::<RetryNotice>()
        {
            let mut err = std::io::stderr().lock();
            writeln!(
                err,
                "\ndsh: the answer restarts: {} ({}); retry {} in {} ms",
                r.failure.code, r.failure.message, r.retry, r.delay_ms
            )?;
        }
        Ok(())
    })
    .map_err(|e| Failure::run(anyhow!(e)))?;
    eprintln_if_tty(&format!("session {}", agent.id()));
    agent
        .followup(Message::user_text("", prompt))
        .map_err(agent_error)?;

    let wait = std::time::Duration::from_secs(args.wait_background);
    let mut left_running = None;
    let interrupted = tokio::select! {
        left = crate::background::settle(&root, &agent, wait) => {
            left_running = left;
            false
        }
        r = tokio::signal::ctrl_c() => {
            if r.is_ok() {
                agent.cancel(CancelCause::User, false);
                // A second Ctrl-C exits at once.
                tokio::spawn(async {
                    if tokio::signal::ctrl_c().await.is_ok() {
                        std::process::exit(130);
                    }
                });
                agent.when_idle().await;
            }
            r.is_ok()
        }
    };
    let (reason, text) = outcome(&agent);
    if let Some(line) = &left_running {
        eprintln!("{line}");
    }
    let usage = (args.usage || std::io::stderr().is_terminal())
        .then(|| crate::background::usage_line(&root, &agent));
    agent.dispose().await;
    if let Some(line) = usage {
        eprintln!("{line}");
    }
    if let Some(printer) = printer {
        printer.finish().await;
    }
    if !args.json && !text.is_empty() {
        crate::config_cmd::write_stdout(&format!("{text}\n"))?;
    }
    if interrupted {
        eprintln!("dsh: interrupted; session {} saved", id);
        return Ok(130);
    }
    match reason {
        Some(TurnEndReason::Completed) => Ok(0),
        Some(r) => Err(Failure::run(anyhow!("{} (session {id})", describe(&r)))),
        None => Err(Failure::run(anyhow!("the turn did not run (session {id})"))),
    }
}

fn eprintln_if_tty(line: &str) {
    if std::io::stderr().is_terminal() {
        eprintln!("{line}");
    }
}
