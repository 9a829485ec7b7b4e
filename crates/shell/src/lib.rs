//! The `ShellExecutor` seam: the shell service trait and its vocabulary.
//!
//! This is the interface crate of the shell capability (`docs/architecture.md` §1.5, §2).
//! Implementations (the local one is `dsh-bash-local`; sandboxed or remote ones later) provide
//! `dyn ShellExecutor` as a kernel service; consumers (the model-facing `bash` tool in
//! `dsh-tool-bash`) look the service up and never name an implementation type.
//!
//! One [`ShellRequest`] is one fresh `bash -c` run: no state carries between runs. The executor
//! owns the process lifetime (deadline, cancellation, process-group kill, output caps, spill
//! files) and reports what happened as a [`ShellOutcome`]. A non-zero exit, a timeout or a
//! signal are outcomes, not errors; [`ShellError`] is for infrastructure failures only (the
//! process could not be started, the working directory is unusable, the request is malformed).

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use dsh_kernel::Service;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

pub mod limits;
pub mod supervisor;

mod capture;
pub use capture::{CapturedStream, SpillSkipped};

/// One shell run: a command, where to run it, how long it may take, and extra environment.
///
/// Built with [`ShellRequest::new`] and the `with_*` methods; fields are public so consumers
/// can inspect what they built.
#[derive(Debug, Clone)]
pub struct ShellRequest {
    /// Bash source, run as `bash -c <command>` (no rc files). Must not contain NUL bytes.
    pub command: String,
    /// Working directory of the run. Must be an existing directory.
    pub cwd: PathBuf,
    /// Deadline measured from spawn. Executors clamp it to [`limits::MAX_TIMEOUT`].
    pub timeout: Duration,
    /// The session the run belongs to; exported to the command as `DSH_SESSION_ID`.
    pub session_id: Option<String>,
    /// Extra variables set in the child's environment after the executor's own policy
    /// (scrubbing, managed `DSH_*` facts). Later entries win.
    pub env: Vec<(String, String)>,
    /// Where the executor writes spill files for this run; `None` means the executor's own
    /// private directory. Consumers pass a session-private directory here when they have one.
    pub spill_dir: Option<PathBuf>,
    /// Cap on the total size of the spill files in `spill_dir` (the session's spill budget,
    /// counting what is already there). A stream whose spill would take the directory past it
    /// is not spilled: its result says so ([`SpillSkipped::SessionCap`]). `None`: no cap
    /// beyond the executor's per-stream one.
    pub spill_total_cap: Option<u64>,
    /// Cancels the run: the executor terminates the process group (SIGTERM, grace, SIGKILL)
    /// and returns an outcome with `cancelled: true`.
    pub cancel: CancellationToken,
    /// A launcher the shell runs under (a sandbox's confinement, e.g. `bwrap ... --`): the
    /// executor spawns `wrapper[0] wrapper[1..] <shell> <shell args>`. Empty: the shell itself.
    /// The first element is looked up in the child's `PATH` like the shell is.
    pub wrapper: Vec<OsString>,
    /// A supervisor program that can run inside `wrapper` and keep that confinement warm for
    /// later runs ([`supervisor`] protocol): the executor may start `wrapper… supervisor…`
    /// once and hand it this and later commands instead of paying the launcher for each run.
    /// Empty: every run spawns `wrapper` afresh.
    pub supervisor: Vec<OsString>,
}

impl ShellRequest {
    /// A request with the default timeout ([`limits::DEFAULT_TIMEOUT`]), no session, no extra
    /// environment, the executor's spill directory and a fresh (never cancelled) token.
    pub fn new(command: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            command: command.into(),
            cwd: cwd.into(),
            timeout: limits::DEFAULT_TIMEOUT,
            session_id: None,
            env: Vec::new(),
            spill_dir: None,
            spill_total_cap: None,
            cancel: CancellationToken::new(),
            wrapper: Vec::new(),
            supervisor: Vec::new(),
        }
    }

    /// Sets the deadline (clamped by the executor to [`limits::MAX_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the session id exported as `DSH_SESSION_ID`.
    pub fn with_session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    /// Adds one environment variable for the child.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Sets the spill directory for this run.
    pub fn with_spill_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spill_dir = Some(dir.into());
        self
    }

    /// Caps the total size of the spill files in the spill directory (see
    /// [`ShellRequest::spill_total_cap`]).
    pub fn with_spill_total_cap(mut self, cap: u64) -> Self {
        self.spill_total_cap = Some(cap);
        self
    }

    /// Runs the shell under `wrapper` (see [`ShellRequest::wrapper`]).
    pub fn with_wrapper(mut self, wrapper: Vec<OsString>) -> Self {
        self.wrapper = wrapper;
        self
    }

    /// Lets the executor keep the confinement warm with `supervisor` (see
    /// [`ShellRequest::supervisor`]).
    pub fn with_supervisor(mut self, supervisor: Vec<OsString>) -> Self {
        self.supervisor = supervisor;
        self
    }

    /// Uses `cancel` as the run's cancellation token (typically a child of the tool call's).
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }
}

/// How the command's main process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Termination {
    /// It exited with this status code.
    Exited {
        /// The exit code (0 is success).
        code: i32,
    },
    /// A signal killed it.
    Signaled {
        /// The signal number.
        signal: i32,
        /// The signal name as the model sees it, e.g. `SIGKILL` (the number as text when the
        /// platform has no name for it).
        name: String,
    },
}

impl Termination {
    /// The exit code, when the process exited normally.
    pub fn code(&self) -> Option<i32> {
        match self {
            Self::Exited { code } => Some(*code),
            Self::Signaled { .. } => None,
        }
    }

    /// The signal name, when a signal killed the process.
    pub fn signal_name(&self) -> Option<&str> {
        match self {
            Self::Exited { .. } => None,
            Self::Signaled { name, .. } => Some(name),
        }
    }

    /// True for exit code 0.
    pub fn success(&self) -> bool {
        matches!(self, Self::Exited { code: 0 })
    }
}

impl fmt::Display for Termination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exited { code } => write!(f, "exit code {code}"),
            Self::Signaled { name, .. } => write!(f, "killed by signal {name}"),
        }
    }
}

/// What a finished run produced. A failed command is a normal outcome.
#[derive(Debug, Clone)]
pub struct ShellOutcome {
    /// Captured standard output (tail kept, full stream spilled when over the cap).
    pub stdout: CapturedStream,
    /// Captured standard error (same policy as stdout).
    pub stderr: CapturedStream,
    /// How the main process (the `bash -c` process) ended.
    pub termination: Termination,
    /// The deadline passed and the executor terminated the process group.
    pub timed_out: bool,
    /// The request's token was cancelled and the executor terminated the process group.
    pub cancelled: bool,
    /// The effective (clamped) timeout of the run, for the `[timed out after <ms>ms]` marker.
    pub timeout: Duration,
    /// Wall time from spawn to the end of output collection.
    pub elapsed: Duration,
    /// Process id of the main process (also its process-group id for the local executor).
    pub pid: u32,
}

impl ShellOutcome {
    /// True when either stream was truncated in memory.
    pub fn truncated(&self) -> bool {
        self.stdout.truncated || self.stderr.truncated
    }
}

/// Infrastructure failures of a run. A failing command is not one of these.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// The request itself is unusable (e.g. a NUL byte in the command).
    #[error("invalid shell request: {0}")]
    InvalidRequest(#[from] InvalidRequest),
    /// The working directory does not exist, is not a directory, or cannot be entered.
    #[error("working directory {path:?} is unusable: {reason}")]
    WorkingDirectory {
        /// The directory that was asked for.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        reason: WorkdirProblem,
    },
    /// The shell process could not be started.
    #[error("failed to start {program}: {source}")]
    Spawn {
        /// The program that was executed (e.g. `bash`).
        program: String,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for or signalling the process failed.
    #[error("shell process failure while {context}: {source}")]
    Process {
        /// What the executor was doing.
        context: &'static str,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
}

/// Why a request is unusable. The text (its `Display`) is model-actionable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRequest {
    /// The command contains a NUL byte (it cannot be a process argument).
    #[error("the command contains a NUL byte")]
    NulByte,
    /// The command is longer than one process argument may be (128 KiB on Linux).
    #[error(
        "the command ({bytes} bytes) is too long for one process argument; write long scripts to a file and run the file"
    )]
    TooLong {
        /// The command's length.
        bytes: usize,
    },
}

/// What is wrong with a run's working directory.
#[derive(Debug, thiserror::Error)]
pub enum WorkdirProblem {
    /// It exists but is not a directory.
    #[error("not a directory")]
    NotADirectory,
    /// It cannot be looked up (missing, or a parent without permission).
    #[error("{0}")]
    Unreadable(#[source] std::io::Error),
    /// It exists but cannot be entered (no search permission).
    #[error("cannot enter the directory: {0}")]
    NotEnterable(#[source] std::io::Error),
}

/// The shell service: runs one command per call in a fresh shell.
///
/// Provided as `dyn ShellExecutor` through the kernel; implementations must be safe to call
/// concurrently and must never leave processes of a run behind when `run` returns (within the
/// limits each implementation documents).
pub trait ShellExecutor: Send + Sync + 'static {
    /// A short name for logs and errors (e.g. `local`).
    fn name(&self) -> &str;

    /// Runs `request` to completion (exit, deadline or cancellation).
    fn run(&self, request: ShellRequest) -> BoxFuture<'_, Result<ShellOutcome, ShellError>>;
}

/// The kernel service key: `ctx.provide::<dyn ShellExecutor>(..)` / `ctx.dep::<dyn ShellExecutor>()`.
impl Service for dyn ShellExecutor {
    const NAME: &'static str = "shell";
}
