//! `LocalShell`: runs `bash --noprofile --norc -c <command>` as a local process group.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use dsh_shell::{
    CapturedStream, InvalidRequest, ShellError, ShellExecutor, ShellOutcome, ShellRequest,
    Termination, WorkdirProblem, limits,
};
use futures::future::BoxFuture;
use nix::sys::signal::Signal;
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::capture::{SpillBudget, SpillTarget, capture, spill_stem};
use crate::env::EnvPolicy;
use crate::group::{
    group_alive, pipe_holders, pipe_id, signal_group, signal_name, terminate_pids, wait_group_gone,
};
use crate::program::ProgramCache;
use crate::warm::{Key, Pool, start};
use crate::warm_run::WarmRun;
use dsh_shell::supervisor::{MAX_REQUEST_BYTES, RunSpec, ToSupervisor};

/// How long `run` waits, after SIGKILL, for the group to disappear before giving up (a process
/// in uninterruptible sleep can outlive SIGKILL for a while).
pub(crate) const KILL_WAIT: Duration = Duration::from_secs(5);

/// Settings of the local executor. Defaults follow `docs/behaviours.md` §5.
#[derive(Clone)]
pub struct LocalShellOptions {
    /// The shell program (`bash`, looked up in the child's `PATH`).
    pub program: PathBuf,
    /// Time between SIGTERM and SIGKILL when the group is terminated.
    pub kill_grace: Duration,
    /// After the main process exits, how long background processes may keep the output pipes
    /// open before the group is terminated.
    pub drain_window: Duration,
    /// Bytes of each stream kept in memory (the tail).
    pub stream_capture_bytes: usize,
    /// Largest spill file per stream.
    pub spill_cap_bytes: u64,
    /// Where spill files go when the request names no directory; `None` means a private
    /// temporary directory owned by the executor (deleted when the executor is dropped).
    pub spill_dir: Option<PathBuf>,
    /// Extra inherited variable names to remove, on top of the built-in secret patterns.
    pub scrub_env: Vec<String>,
    /// The environment children inherit before scrubbing; `None` means the harness process's
    /// own environment, read at each run. (A composition root may pin a snapshot; tests use it
    /// to plant secrets without touching the process environment.)
    pub base_env: Option<Vec<(OsString, OsString)>>,
    /// How many idle warm sandboxes to keep (requests that name a
    /// [`ShellRequest::supervisor`] reuse them; see the crate's README). 0: never reuse a
    /// confinement, every confined run starts its wrapper afresh.
    pub warm_sandboxes: usize,
}

impl std::fmt::Debug for LocalShellOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The base environment may hold secrets: show only its size.
        f.debug_struct("LocalShellOptions")
            .field("program", &self.program)
            .field("kill_grace", &self.kill_grace)
            .field("drain_window", &self.drain_window)
            .field("stream_capture_bytes", &self.stream_capture_bytes)
            .field("spill_cap_bytes", &self.spill_cap_bytes)
            .field("spill_dir", &self.spill_dir)
            .field("scrub_env", &self.scrub_env)
            .field(
                "base_env",
                &self
                    .base_env
                    .as_ref()
                    .map(|e| format!("<{} variables>", e.len())),
            )
            .field("warm_sandboxes", &self.warm_sandboxes)
            .finish()
    }
}

impl Default for LocalShellOptions {
    fn default() -> Self {
        Self {
            program: PathBuf::from("bash"),
            kill_grace: limits::KILL_GRACE,
            drain_window: Duration::from_millis(250),
            stream_capture_bytes: limits::STREAM_CAPTURE_BYTES,
            spill_cap_bytes: limits::SPILL_CAP_BYTES,
            spill_dir: None,
            scrub_env: Vec::new(),
            base_env: None,
            warm_sandboxes: 4,
        }
    }
}

/// The local shell executor. Cheap to share (`Arc<dyn ShellExecutor>`); runs are independent.
#[derive(Debug)]
pub struct LocalShell {
    pub(crate) options: LocalShellOptions,
    env: EnvPolicy,
    private_spill: OnceLock<Option<tempfile::TempDir>>,
    pub(crate) pool: Arc<Pool>,
    /// The shell and launcher programs found along the commands' `PATH`s.
    programs: ProgramCache,
}

impl LocalShell {
    /// An executor with `options`.
    pub fn new(options: LocalShellOptions) -> Self {
        let env = EnvPolicy {
            scrub: options.scrub_env.clone(),
        };
        Self {
            pool: Arc::new(Pool::new(options.warm_sandboxes)),
            options,
            env,
            private_spill: OnceLock::new(),
            programs: ProgramCache::default(),
        }
    }

    /// The settings this executor runs with.
    pub fn options(&self) -> &LocalShellOptions {
        &self.options
    }

    fn spill_dir(&self, request: &ShellRequest) -> Option<PathBuf> {
        if let Some(dir) = request
            .spill_dir
            .as_ref()
            .or(self.options.spill_dir.as_ref())
        {
            return Some(dir.clone());
        }
        self.private_spill
            .get_or_init(
                || match tempfile::Builder::new().prefix("dsh-bash-spill-").tempdir() {
                    Ok(dir) => Some(dir),
                    Err(error) => {
                        tracing::warn!(%error, "no private spill directory; spilling disabled");
                        None
                    }
                },
            )
            .as_ref()
            .map(|d| d.path().to_path_buf())
    }

    /// The spill targets of a run's two streams (shared budget, one file stem).
    pub(crate) fn spill_targets(&self, request: &ShellRequest) -> (SpillTarget, SpillTarget) {
        let spill_dir = self.spill_dir(request);
        let stem = spill_stem();
        let budget = match (&spill_dir, request.spill_total_cap) {
            (Some(dir), Some(cap)) => Some(Arc::new(SpillBudget::new(dir.clone(), cap))),
            _ => None,
        };
        let target = |suffix: &str| SpillTarget {
            dir: spill_dir.clone(),
            file_name: format!("{stem}.{suffix}"),
            cap: self.options.spill_cap_bytes,
            budget: budget.clone(),
        };
        (target("stdout"), target("stderr"))
    }

    async fn run_request(&self, request: ShellRequest) -> Result<ShellOutcome, ShellError> {
        if request.command.contains('\0') {
            return Err(InvalidRequest::NulByte.into());
        }
        match tokio::fs::metadata(&request.cwd).await {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(ShellError::WorkingDirectory {
                    path: request.cwd.clone(),
                    reason: WorkdirProblem::NotADirectory,
                });
            }
            Err(error) => {
                return Err(ShellError::WorkingDirectory {
                    path: request.cwd.clone(),
                    reason: WorkdirProblem::Unreadable(error),
                });
            }
        }
        // Resolving `<dir>/.` needs search permission on the directory, exactly like the
        // child's chdir: a clear error here instead of an ambiguous spawn failure.
        if let Err(error) = tokio::fs::metadata(request.cwd.join(".")).await {
            return Err(ShellError::WorkingDirectory {
                path: request.cwd.clone(),
                reason: WorkdirProblem::NotEnterable(error),
            });
        }
        let timeout = limits::clamp_timeout(request.timeout);
        let inherited = match &self.options.base_env {
            Some(base) => base.clone(),
            None => std::env::vars_os().collect(),
        };
        let env = self.env.build(
            inherited.clone(),
            request.session_id.as_deref(),
            &request.env,
        );
        // A path, not a bare name: std then spawns with posix_spawn (vfork semantics, no copy
        // of the harness's address space) instead of fork + exec (see `program.rs`).
        let program = self
            .programs
            .resolve(&self.options.program, &env, &request.cwd)
            .ok_or_else(|| ShellError::Spawn {
                program: self.options.program.display().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "not found in the command's PATH",
                ),
            })?;
        if self.pool.enabled() && !request.wrapper.is_empty() && !request.supervisor.is_empty() {
            let run = ToSupervisor::Run(RunSpec {
                program: program.clone(),
                args: vec![
                    "--noprofile".into(),
                    "--norc".into(),
                    "-c".into(),
                    request.command.clone().into(),
                ],
                cwd: request.cwd.clone(),
                env: env.clone(),
            })
            .encode();
            // Bigger requests do not fit one datagram: they take the cold path.
            if run.len() <= MAX_REQUEST_BYTES {
                let key = Key::new(&request.wrapper, &request.supervisor);
                let warm = match self.pool.take(&key) {
                    Some(warm) => Some(warm),
                    None if self.pool.is_broken(&key) => None,
                    // The supervisor's environment (no session facts) only when one starts.
                    None => match start(key.clone(), self.env.build(inherited, None, &[])).await {
                        Ok(warm) => Some(warm),
                        Err(error) => {
                            self.pool.mark_broken(key, &error);
                            None
                        }
                    },
                };
                if let Some(warm) = warm {
                    match self.run_warm(warm, &run, &request, timeout).await {
                        WarmRun::Done(result) => return *result,
                        WarmRun::Lost => {
                            tracing::debug!("the warm sandbox was lost; running cold");
                        }
                    }
                }
            }
        }
        // Everything set below is supported by std's posix_spawn path (no `pre_exec`, uid, gid
        // or groups): the process group is POSIX_SPAWN_SETPGROUP, the working directory
        // posix_spawn_file_actions_addchdir_np, and std resets SIGPIPE (ignored by the harness)
        // to its default in the child.
        let mut command = match request.wrapper.split_first() {
            None => Command::new(&program),
            Some((launcher, launcher_args)) => {
                let launcher = self
                    .programs
                    .resolve(Path::new(launcher), &env, &request.cwd)
                    .ok_or_else(|| ShellError::Spawn {
                        program: launcher.to_string_lossy().into_owned(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "not found in the command's PATH",
                        ),
                    })?;
                let mut command = Command::new(launcher);
                command.args(launcher_args).arg(&program);
                command
            }
        };
        command
            .arg("--noprofile")
            .arg("--norc")
            .arg("-c")
            .arg(&request.command)
            .current_dir(&request.cwd)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);

        let started = Instant::now();
        let mut child = command.spawn().map_err(|source| {
            if source.raw_os_error() == Some(nix::errno::Errno::E2BIG as i32) {
                ShellError::InvalidRequest(InvalidRequest::TooLong {
                    bytes: request.command.len(),
                })
            } else {
                ShellError::Spawn {
                    program: self.options.program.display().to_string(),
                    source,
                }
            }
        })?;
        let pid = child.id().ok_or_else(|| ShellError::Process {
            context: "reading the process id",
            source: std::io::Error::other("the child has no process id"),
        })?;
        let pgid = i32::try_from(pid).map_err(|_| ShellError::Process {
            context: "reading the process id",
            source: std::io::Error::other("process id out of range"),
        })?;
        let stop = CancellationToken::new();
        let mut guard = GroupGuard {
            pgid,
            stop: stop.clone(),
            armed: true,
        };
        tracing::debug!(pid, cwd = %request.cwd.display(), "bash started");

        let (out_target, err_target) = self.spill_targets(&request);
        let cap = self.options.stream_capture_bytes;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let pipes: Vec<String> = [
            stdout.as_ref().map(AsRawFd::as_raw_fd),
            stderr.as_ref().map(AsRawFd::as_raw_fd),
        ]
        .into_iter()
        .flatten()
        .filter_map(pipe_id)
        .collect();
        let stdout = tokio::spawn(read_pipe(stdout, cap, out_target, stop.clone()));
        let stderr = tokio::spawn(read_pipe(stderr, cap, err_target, stop.clone()));
        let mut readers = pin!(futures::future::join(stdout, stderr));

        let deadline = started + timeout;
        let ending = tokio::select! {
            biased;
            () = request.cancel.cancelled() => Ending::Cancelled,
            status = child.wait() => Ending::Exited(status.map_err(|source| ShellError::Process {
                context: "waiting for bash",
                source,
            })?),
            () = tokio::time::sleep_until(deadline) => Ending::TimedOut,
        };
        let grace = self.options.kill_grace;
        let mut collected = None;
        let (status, timed_out, cancelled) = match ending {
            Ending::Exited(status) => {
                // Background processes may still hold the pipes: give them the drain window,
                // then terminate whatever is left of the group.
                collected = tokio::time::timeout(self.options.drain_window, &mut readers)
                    .await
                    .ok();
                let drained = collected.is_some();
                if group_alive(pgid) {
                    tracing::debug!(pid, drained, "terminating leftover background processes");
                    terminate_group(pgid, grace, &mut child, Some(status)).await?;
                }
                (status, false, false)
            }
            Ending::TimedOut => {
                tracing::debug!(pid, ?timeout, "deadline passed; terminating the group");
                (
                    terminate_group(pgid, grace, &mut child, None).await?,
                    true,
                    false,
                )
            }
            Ending::Cancelled => {
                tracing::debug!(pid, "cancelled; terminating the group");
                (
                    terminate_group(pgid, grace, &mut child, None).await?,
                    false,
                    true,
                )
            }
        };
        guard.armed = false;
        // The group is dead; the pipes close unless a process that left the group (setsid)
        // still holds them. Bound that wait and keep what was read.
        let collected = match collected {
            Some(done) => Ok(done),
            None => tokio::time::timeout(self.options.drain_window, &mut readers).await,
        };
        let collected = match collected {
            Ok(done) => Ok(done),
            Err(_) => {
                // Processes that left the group (setsid) but kept our pipes: find them by the
                // pipes they hold and terminate them too. When none is found the pipes are
                // already at EOF and the readers only need to be scheduled (under heavy load
                // that can take a while): give them a generous bound, never cut them short.
                let holders = pipe_holders(&pipes);
                if !holders.is_empty() {
                    tracing::warn!(
                        pid,
                        ?holders,
                        "processes that left the process group still hold its output pipes; \
                         terminating them"
                    );
                    terminate_pids(&holders, grace).await;
                }
                tokio::time::timeout(KILL_WAIT, &mut readers).await
            }
        };
        let (stdout, stderr) = match collected {
            Ok(done) => done,
            Err(_) => {
                tracing::warn!(
                    pid,
                    "output pipes still open; keeping the output read so far"
                );
                stop.cancel();
                readers.await
            }
        };
        let stdout = stdout.unwrap_or_else(|error| {
            tracing::warn!(%error, "stdout reader failed");
            CapturedStream::default()
        });
        let stderr = stderr.unwrap_or_else(|error| {
            tracing::warn!(%error, "stderr reader failed");
            CapturedStream::default()
        });
        let outcome = ShellOutcome {
            stdout,
            stderr,
            termination: termination(status),
            timed_out,
            cancelled,
            timeout,
            elapsed: started.elapsed(),
            pid,
        };
        tracing::debug!(pid, termination = %outcome.termination, timed_out, cancelled, "bash finished");
        Ok(outcome)
    }
}

impl ShellExecutor for LocalShell {
    fn name(&self) -> &str {
        "local"
    }

    fn run(&self, request: ShellRequest) -> BoxFuture<'_, Result<ShellOutcome, ShellError>> {
        Box::pin(self.run_request(request))
    }
}

enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

pub(crate) async fn read_pipe<R: tokio::io::AsyncRead + Unpin>(
    pipe: Option<R>,
    cap: usize,
    target: SpillTarget,
    stop: CancellationToken,
) -> CapturedStream {
    match pipe {
        Some(pipe) => capture(pipe, cap, target, stop).await,
        None => CapturedStream::default(),
    }
}

/// SIGTERM to the group, up to `grace` for every member to die, then SIGKILL; returns the
/// leader's status once the group is gone (or `KILL_WAIT` after SIGKILL passed).
async fn terminate_group(
    pgid: i32,
    grace: Duration,
    leader: &mut Child,
    leader_status: Option<ExitStatus>,
) -> Result<ExitStatus, ShellError> {
    let wait_error = |source| ShellError::Process {
        context: "waiting for bash",
        source,
    };
    signal_group(pgid, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    let status = match leader_status {
        Some(status) => Some(status),
        None => tokio::select! {
            status = leader.wait() => Some(status.map_err(wait_error)?),
            () = tokio::time::sleep_until(deadline) => None,
        },
    };
    let gone = status.is_some() && wait_group_gone(pgid, deadline).await;
    if !gone {
        tracing::debug!(pgid, "grace period over; SIGKILL to the group");
        signal_group(pgid, Signal::SIGKILL);
    }
    let status = match status {
        Some(status) => status,
        None => leader.wait().await.map_err(wait_error)?,
    };
    if !wait_group_gone(pgid, Instant::now() + KILL_WAIT).await {
        tracing::warn!(pgid, "processes of the group survived SIGKILL");
    }
    Ok(status)
}

pub(crate) fn termination(status: ExitStatus) -> Termination {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        Termination::Exited { code }
    } else if let Some(signal) = status.signal() {
        Termination::Signaled {
            signal,
            name: signal_name(signal),
        }
    } else {
        tracing::warn!(?status, "exit status with neither code nor signal");
        Termination::Exited { code: -1 }
    }
}

/// Kills the group if a run is abandoned midway (its future dropped): no process outlives the
/// run that started it.
struct GroupGuard {
    pgid: i32,
    stop: CancellationToken,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, Signal::SIGKILL);
            self.stop.cancel();
        }
    }
}
