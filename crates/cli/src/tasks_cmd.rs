//! `dsh tasks submit | status | results` and `dsh worker` (issue 39, item 3): the work queue on
//! PostgreSQL (`dsh-fleet`). A worker claims a task, clones its repository into a workspace of
//! its own, runs `dsh exec --store URL --cwd WS --json` (this binary) in it, so that the session
//! lives in the same database, and records how it ended, what it cost and the workspace's diff.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use dsh_fleet::{Claim, Fleet, Outcome, TaskResult, TaskRow, TaskState, Usage};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::watch;

use crate::Failure;
use crate::store_cmd::StoreUrl;

/// The store option of every queue command.
#[derive(Debug, clap::Args)]
pub(crate) struct StoreArg {
    /// The PostgreSQL database holding the queue (and the tasks' sessions).
    #[arg(long, value_name = "URL", env = "DSH_STORE")]
    pub(crate) store: Option<String>,
}

/// `dsh tasks …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum TasksCommand {
    /// Submit tasks: a JSONL file, one task a line (`prompt`, `repo`, optional `ref`, `model`,
    /// `effort`, `limits: {"timeoutSeconds": N}`); a bad line refuses the whole file.
    Submit {
        /// The file (`-`: standard input).
        file: PathBuf,
        #[command(flatten)]
        store: StoreArg,
    },
    /// How many tasks are queued, running, done and failed, and each task's state.
    Status {
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArg,
    },
    /// The finished tasks: outcome, cost and diff.
    Results {
        /// JSON lines (one task a line) instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArg,
    },
}

/// `dsh worker`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Tasks run at once.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    concurrency: u32,
    /// How long a claim holds without renewal (renewed every third of it while the task runs).
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(3..))]
    visibility_seconds: u64,
    /// Exit once no task is left to claim (instead of waiting for more).
    #[arg(long)]
    drain: bool,
    /// Where the workspaces go (default: the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
}

fn url(store: &StoreArg) -> Result<String, Failure> {
    match store.store.as_deref().map(StoreUrl::parse).transpose()? {
        Some(StoreUrl::Postgres(u)) => Ok(u),
        _ => Err(Failure::usage(anyhow!(
            "the task queue needs a PostgreSQL store: --store postgres://… or DSH_STORE"
        ))),
    }
}

async fn connect(store: &StoreArg) -> Result<Fleet, Failure> {
    let url = url(store)?;
    Fleet::connect(&url)
        .await
        .map_err(|e| Failure::run(anyhow!("{e}")))
}

/// Runs a `dsh tasks` command.
pub(crate) async fn run(cmd: TasksCommand) -> Result<u8, Failure> {
    match cmd {
        TasksCommand::Submit { file, store } => submit(&file, &store).await,
        TasksCommand::Status { json, store } => {
            let tasks = list(&store).await?;
            print_status(&tasks, json)
        }
        TasksCommand::Results { json, store } => {
            let tasks = list(&store).await?;
            print_results(&tasks, json)
        }
    }
}

async fn submit(file: &Path, store: &StoreArg) -> Result<u8, Failure> {
    let url = url(store)?;
    let text = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    }
    .with_context(|| format!("cannot read {}", file.display()))
    .map_err(Failure::usage)?;
    let specs = dsh_fleet::parse_jsonl(&text)
        .map_err(|e| Failure::usage(anyhow!("{}: {e}; nothing submitted", file.display())))?;
    if specs.is_empty() {
        return Err(Failure::usage(anyhow!(
            "{}: no tasks in the file; nothing submitted",
            file.display()
        )));
    }
    let fleet = Fleet::connect(&url)
        .await
        .map_err(|e| Failure::run(anyhow!("{e}")))?;
    let ids = fleet
        .submit(&specs)
        .await
        .map_err(|e| Failure::run(anyhow!("{e}")))?;
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    println!("submitted {} tasks: {}", ids.len(), list.join(" "));
    Ok(0)
}

async fn list(store: &StoreArg) -> Result<Vec<TaskRow>, Failure> {
    connect(store)
        .await?
        .tasks()
        .await
        .map_err(|e| Failure::run(anyhow!("{e}")))
}

#[derive(serde::Serialize)]
struct Counts {
    queued: usize,
    running: usize,
    done: usize,
    failed: usize,
}

fn counts(tasks: &[TaskRow]) -> Counts {
    let n = |s: TaskState| tasks.iter().filter(|t| t.state == s).count();
    Counts {
        queued: n(TaskState::Queued),
        running: n(TaskState::Running),
        done: n(TaskState::Done),
        failed: n(TaskState::Failed),
    }
}

fn json_line(v: &impl serde::Serialize) -> Result<String, Failure> {
    serde_json::to_string(v).map_err(|e| Failure::run(anyhow!("{e}")))
}

fn print_status(tasks: &[TaskRow], json: bool) -> Result<u8, Failure> {
    let c = counts(tasks);
    if json {
        #[derive(serde::Serialize)]
        struct Status<'a> {
            #[serde(flatten)]
            counts: Counts,
            tasks: Vec<Brief<'a>>,
        }
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Brief<'a> {
            id: i64,
            state: TaskState,
            attempts: i32,
            #[serde(skip_serializing_if = "Option::is_none")]
            claimed_by: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            session_id: Option<&'a str>,
        }
        let tasks = tasks
            .iter()
            .map(|t| Brief {
                id: t.id,
                state: t.state,
                attempts: t.attempts,
                claimed_by: t.claimed_by.as_deref(),
                session_id: t.session_id.as_deref(),
            })
            .collect();
        println!("{}", json_line(&Status { counts: c, tasks })?);
        return Ok(0);
    }
    println!(
        "{} queued, {} running, {} done, {} failed",
        c.queued, c.running, c.done, c.failed
    );
    for t in tasks {
        let by = t
            .claimed_by
            .as_deref()
            .map(|w| format!(" by {w}"))
            .unwrap_or_default();
        println!(
            "{:>6}  {:<8} attempts {}{by}  {}",
            t.id,
            t.state.as_str(),
            t.attempts,
            t.spec.repo
        );
    }
    Ok(0)
}

fn print_results(tasks: &[TaskRow], json: bool) -> Result<u8, Failure> {
    for t in tasks
        .iter()
        .filter(|t| matches!(t.state, TaskState::Done | TaskState::Failed))
    {
        if json {
            println!("{}", json_line(t)?);
            continue;
        }
        let o = t.outcome.clone().unwrap_or_default();
        let u = t.usage.unwrap_or_default();
        let exit = o
            .exit_code
            .map_or_else(|| "no exit status".to_owned(), |c| format!("exit {c}"));
        println!(
            "task {} {}: turn {}, {exit}, {} input / {} output tokens in {} requests, session {}",
            t.id,
            t.state.as_str(),
            o.turn_end.as_deref().unwrap_or("not ended"),
            u.input_tokens,
            u.output_tokens,
            u.requests,
            t.session_id.as_deref().unwrap_or("-"),
        );
        if let Some(e) = &o.error {
            println!("  error: {e}");
        }
        match t.diff.as_deref() {
            Some(d) if !d.is_empty() => print!("{d}"),
            _ => println!("  (no changes)"),
        }
    }
    Ok(0)
}

/// Runs `dsh worker`.
pub(crate) async fn worker(args: WorkerArgs) -> Result<u8, Failure> {
    let url = url(&args.store)?;
    let fleet = Arc::new(
        Fleet::connect(&url)
            .await
            .map_err(|e| Failure::run(anyhow!("{e}")))?,
    );
    let exe = std::env::current_exe()
        .map_err(|e| Failure::run(anyhow!("cannot find the dsh binary: {e}")))?;
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".into());
    let name = format!("{host}:{}", std::process::id());
    let root = args
        .workdir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("dsh-worker-{}", std::process::id()));
    std::fs::create_dir_all(&root)
        .with_context(|| format!("cannot create {}", root.display()))
        .map_err(Failure::run)?;
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        stop_signal().await;
        tracing::info!("worker stopping: finishing the tasks it holds, claiming no more");
        let _ = stop_tx.send(true);
    });
    let ctx = Arc::new(Ctx {
        fleet,
        url,
        exe,
        name,
        root: root.clone(),
        visibility: Duration::from_secs(args.visibility_seconds),
        drain: args.drain,
    });
    let slots: Vec<_> = (0..args.concurrency)
        .map(|_| tokio::spawn(slot(Arc::clone(&ctx), stop.clone())))
        .collect();
    let mut failure = None;
    for s in slots {
        match s.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failure = Some(e),
            Err(e) => failure = Some(anyhow!("a worker slot failed: {e}")),
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    match failure {
        Some(e) => Err(Failure::run(e)),
        None => Ok(0),
    }
}

async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => std::future::pending::<()>().await,
    }
}

struct Ctx {
    fleet: Arc<Fleet>,
    url: String,
    exe: PathBuf,
    name: String,
    root: PathBuf,
    visibility: Duration,
    drain: bool,
}

/// One slot: claims and runs tasks one after another until stopped (or, with `--drain`, until
/// nothing is left to claim).
async fn slot(ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) -> anyhow::Result<()> {
    loop {
        if *stop.borrow() {
            return Ok(());
        }
        let claim = ctx.fleet.claim(&ctx.name, ctx.visibility).await?;
        let Some(claim) = claim else {
            if ctx.drain {
                return Ok(());
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = stop.changed() => {}
            }
            continue;
        };
        tracing::info!(task = claim.id, attempt = claim.attempt, "claimed");
        let ws = ctx
            .root
            .join(format!("task-{}-{}", claim.id, claim.attempt));
        let result = run_claimed(&ctx, &claim, &ws).await;
        let _ = tokio::fs::remove_dir_all(&ws).await;
        match result {
            Ok(Some(result)) => {
                if !ctx.fleet.finish(&claim, &result).await? {
                    // Said with the attempt's own error: a writer that was paused or cut off
                    // past its lease names the refusal (SESSION_LEASE_LOST) there.
                    tracing::warn!(
                        task = claim.id,
                        attempt = claim.attempt,
                        "the claim was taken over by another worker; this attempt's result is \
                         not recorded{}",
                        result
                            .outcome
                            .error
                            .as_deref()
                            .map(|e| format!(" (dsh exec: {e})"))
                            .unwrap_or_default()
                    );
                }
            }
            Ok(None) => {}
            Err(e) if e.is::<SessionHeld>() => {
                let delay = e
                    .downcast_ref::<SessionHeld>()
                    .map_or(ctx.visibility, |h| h.0);
                tracing::warn!(
                    task = claim.id,
                    "{e}; the task is claimable again in {} s",
                    delay.as_secs()
                );
                ctx.fleet.defer(&claim, delay).await?;
            }
            Err(e) => {
                let result = TaskResult {
                    state: TaskState::Failed,
                    outcome: Outcome {
                        error: Some(format!("{e:#}")),
                        ..Outcome::default()
                    },
                    usage: Usage::default(),
                    diff: None,
                };
                ctx.fleet.finish(&claim, &result).await?;
            }
        }
    }
}

/// Makes the workspace, runs the task with renewals, and returns its result (`None`: the claim
/// was lost while it ran, so nothing is recorded).
async fn run_claimed(ctx: &Ctx, claim: &Claim, ws: &Path) -> anyhow::Result<Option<TaskResult>> {
    checkout(&claim.spec.repo, claim.spec.git_ref.as_deref(), ws).await?;
    let takeover = claim.attempt > 1 && session_exists(&ctx.url, &claim.session_id).await?;
    let mut cmd = tokio::process::Command::new(&ctx.exe);
    cmd.arg("exec")
        .arg("--store")
        .arg(&ctx.url)
        .arg("--cwd")
        .arg(ws)
        .arg("--json");
    let prompt = if takeover {
        // An earlier attempt's worker died: take its session over (crash repair, as
        // `--resume` does) instead of starting over.
        tracing::info!(task = claim.id, session = %claim.session_id, "taking the session over");
        cmd.arg("--resume").arg(&claim.session_id);
        format!(
            "The worker that ran this task stopped before the task was finished. Continue the \
             task. This is a fresh checkout of {}{}: changes made before are not in it.",
            claim.spec.repo,
            claim
                .spec
                .git_ref
                .as_deref()
                .map(|r| format!(" at {r}"))
                .unwrap_or_default()
        )
    } else {
        cmd.arg("--session").arg(&claim.session_id);
        claim.spec.prompt.clone()
    };
    if let Some(m) = &claim.spec.model {
        cmd.arg("--model").arg(m);
    }
    if let Some(e) = claim.spec.effort {
        cmd.arg("--effort").arg(e.as_str());
    }
    cmd.arg("--")
        .arg(&prompt)
        .current_dir(ws)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own process group: a Ctrl-C at the worker's terminal stops the worker (which
        // finishes its tasks), not the tasks themselves.
        .process_group(0);
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn().context("cannot start dsh exec")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut stderr = child.stderr.take().context("no stderr")?;
    let records = tokio::spawn(read_records(stdout));
    let err_text = tokio::spawn(async move {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s).await;
        s
    });
    let mut renew = tokio::time::interval(ctx.visibility / 3);
    renew.tick().await;
    let limit = claim.spec.limits.timeout_seconds;
    let deadline = tokio::time::sleep(Duration::from_secs(limit.map_or(0, u64::from)));
    tokio::pin!(deadline);
    let mut timed_out = false;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status.context("waiting for dsh exec")?,
            _ = renew.tick() => {
                if !ctx.fleet.renew(claim, ctx.visibility).await? {
                    tracing::warn!(task = claim.id, "claim lost (expired and taken by another worker); stopping this attempt");
                    let _ = child.kill().await;
                    return Ok(None);
                }
            }
            () = &mut deadline, if limit.is_some() && !timed_out => {
                // The time limit: SIGTERM, so that dsh exec ends its turn and saves it.
                tracing::warn!(task = claim.id, "time limit reached; stopping dsh exec");
                timed_out = true;
                terminate(&mut child);
            }
        }
    };
    let (usage, turn_end) = records.await.unwrap_or_default();
    let err_text = err_text.await.unwrap_or_default();
    let diff = diff(ws).await?;
    if takeover && turn_end.is_none() && err_text.contains("SESSION_LOCKED") {
        // The dead attempt's writer still holds the session (its lease has not expired, or the
        // worker was paused, not killed): try again once the lease is free.
        let ms = err_text
            .split("expires in ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(ctx.visibility.as_millis().try_into().unwrap_or(u64::MAX));
        return Err(SessionHeld(Duration::from_millis(ms) + Duration::from_secs(1)).into());
    }
    let ok = !timed_out && status.success() && turn_end.as_deref() == Some("completed");
    Ok(Some(TaskResult {
        state: if ok {
            TaskState::Done
        } else {
            TaskState::Failed
        },
        outcome: Outcome {
            exit_code: status.code(),
            turn_end,
            error: (!ok).then(|| {
                if timed_out {
                    return format!(
                        "the task's time limit of {} s was reached (limits.timeoutSeconds)",
                        limit.unwrap_or_default()
                    );
                }
                err_text
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("dsh exec failed without a message")
                    .to_owned()
            }),
        },
        usage,
        diff: Some(diff),
    }))
}

/// A takeover refused because an earlier attempt's writer still holds the session's lease,
/// free in (about) the duration given.
#[derive(Debug)]
struct SessionHeld(Duration);

impl std::fmt::Display for SessionHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the task's session is still held by an earlier attempt's writer")
    }
}

impl std::error::Error for SessionHeld {}

/// Whether an earlier attempt stored the task's session (a later attempt then resumes it).
async fn session_exists(url: &str, id: &str) -> anyhow::Result<bool> {
    let (url, id) = (url.to_owned(), id.to_owned());
    tokio::task::spawn_blocking(move || {
        let store = crate::store_cmd::open(Some(&url)).map_err(|f| f.error)?;
        Ok(store.exists(&id))
    })
    .await
    .context("looking the session up")?
}

/// Asks `dsh exec` to stop (SIGTERM: it ends its turn and saves it).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn terminate(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: `kill` only sends a signal to the child we spawned and still wait for.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn terminate(child: &mut tokio::process::Child) {
    let _ = child.start_kill();
}

/// On Linux the child is killed when the worker dies, so that a worker killed outright does not
/// leave its task running on behind a claim that will expire and be taken by another.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut tokio::process::Command) {
    // SAFETY: `prctl(PR_SET_PDEATHSIG)` is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn die_with_parent(_cmd: &mut tokio::process::Command) {}

/// The records of `dsh exec --json` the worker needs.
#[derive(Deserialize)]
struct Record {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Option<RecordData>,
}

#[derive(Deserialize, Default)]
struct RecordData {
    #[serde(default)]
    usage: Option<RecordUsage>,
    #[serde(default)]
    reason: Option<EndReason>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecordUsage {
    #[serde(default)]
    input_tokens: i64,
    #[serde(default)]
    output_tokens: i64,
}

#[derive(Deserialize)]
struct EndReason {
    kind: String,
}

/// Sums the usage of the model replies and keeps the last turn end's reason.
async fn read_records(stdout: tokio::process::ChildStdout) -> (Usage, Option<String>) {
    let mut lines = BufReader::new(stdout).lines();
    let mut usage = Usage::default();
    let mut end = None;
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(r) = serde_json::from_str::<Record>(&line) else {
            continue;
        };
        let data = r.data.unwrap_or_default();
        match r.kind.as_str() {
            "assistant/message" => {
                usage.requests += 1;
                if let Some(u) = data.usage {
                    usage.input_tokens += u.input_tokens;
                    usage.output_tokens += u.output_tokens;
                }
            }
            "turn/end" => end = data.reason.map(|r| r.kind),
            _ => {}
        }
    }
    (usage, end)
}

async fn git(dir: Option<&Path>, args: &[&std::ffi::OsStr]) -> anyhow::Result<String> {
    let mut cmd = tokio::process::Command::new("git");
    if let Some(d) = dir {
        cmd.arg("-C").arg(d);
    }
    let out = cmd
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run git")?;
    if !out.status.success() {
        return Err(anyhow!(
            "git {} failed: {}",
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A clone of `repo` (a path or a URL) at `git_ref` in `ws`.
async fn checkout(repo: &str, git_ref: Option<&str>, ws: &Path) -> anyhow::Result<()> {
    let os = |s: &str| std::ffi::OsString::from(s);
    git(
        None,
        &[
            &os("clone"),
            &os("--quiet"),
            &os("--"),
            &os(repo),
            ws.as_os_str(),
        ],
    )
    .await?;
    if let Some(r) = git_ref {
        git(
            Some(ws),
            &[&os("checkout"), &os("--quiet"), &os("--detach"), &os(r)],
        )
        .await?;
    }
    Ok(())
}

/// The workspace's changes against the checked-out commit, new files included.
async fn diff(ws: &Path) -> anyhow::Result<String> {
    let os = |s: &str| std::ffi::OsString::from(s);
    git(
        Some(ws),
        &[&os("add"), &os("--all"), &os("--intent-to-add")],
    )
    .await?;
    git(Some(ws), &[&os("diff"), &os("--no-color"), &os("HEAD")]).await
}
