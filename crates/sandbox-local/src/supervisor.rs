//! The warm sandbox supervisor (`dsh sandbox serve`, and the standalone `dsh-sandbox-serve`):
//! started once inside a confinement (bwrap's namespaces, or under the Landlock launcher), it
//! runs one command at a time for the shell executor (`dsh_shell::supervisor` protocol on the
//! `SOCK_SEQPACKET` socket it gets as its stdin), so a confined call costs a spawn instead of a
//! whole new confinement.
//!
//! It is the **child subreaper** of everything it starts: a process that leaves its group or
//! session (`setsid`) and is orphaned is re-parented to the supervisor, not to the host's init,
//! so after each call the supervisor can end the call's whole tree (SIGTERM, grace, then SIGKILL
//! to its children until it has none). Under bwrap's PID namespace that also means no process of
//! the call is left in the namespace. It is not dumpable, so a command cannot open its socket or
//! read its memory through `/proc/<pid>/`. End of file on the socket (the executor dropped the
//! sandbox, or dsh exited) kills what is left and ends the supervisor.

use std::fs::File;
use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dsh_shell::supervisor::{
    DecodeError, FromSupervisor, MAX_REQUEST_BYTES, RUN_FDS, RunSpec, ToSupervisor,
};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendFlags, recvmsg};
use rustix::process::{
    DumpableBehavior, Pid, PidfdFlags, Signal, WaitOptions, getpid, kill_process, pidfd_open,
    set_child_subreaper, set_dumpable_behavior, wait,
};

/// Why the supervisor stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// Its stdin is not a usable socket, or preparing it failed.
    #[error("the supervisor socket (stdin) is unusable: {0}")]
    Socket(#[source] io::Error),
    /// `PR_SET_CHILD_SUBREAPER` failed: the supervisor could not contain the call's processes.
    #[error("cannot become the child subreaper: {0}")]
    Subreaper(#[source] io::Error),
    /// The executor sent bytes that are not a message.
    #[error("bad message from the executor: {0}")]
    Decode(#[from] DecodeError),
    /// Sending or receiving failed.
    #[error("supervisor socket I/O failed: {0}")]
    Io(#[source] io::Error),
}

fn io_err(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// Serves the executor on the socket that is this process's stdin until end of file.
pub fn serve_stdin() -> Result<(), SupervisorError> {
    let sock = rustix::io::fcntl_dupfd_cloexec(io::stdin().as_fd(), 3)
        .map_err(|e| SupervisorError::Socket(io_err(e)))?;
    let null = File::open("/dev/null").map_err(SupervisorError::Socket)?;
    rustix::stdio::dup2_stdin(&null).map_err(|e| SupervisorError::Socket(io_err(e)))?;
    set_child_subreaper(Some(getpid())).map_err(|e| SupervisorError::Subreaper(io_err(e)))?;
    // Best effort: without it a command could open our socket through /proc/<pid>/fd.
    let _ = set_dumpable_behavior(DumpableBehavior::NotDumpable);
    let mut supervisor = Supervisor { sock, main: None };
    supervisor.send(&FromSupervisor::Ready)?;
    let result = supervisor.serve();
    supervisor.reset(Duration::ZERO);
    result
}

/// The command of the current call, until its exit is reported.
struct Main {
    pid: Pid,
    /// Readable once the process exits (`None` on kernels without `pidfd_open`: then the
    /// supervisor polls with a short timeout).
    pidfd: Option<OwnedFd>,
}

struct Supervisor {
    sock: OwnedFd,
    main: Option<Main>,
}

impl Supervisor {
    fn send(&self, msg: &FromSupervisor) -> Result<(), SupervisorError> {
        let bytes = msg.encode();
        loop {
            match rustix::net::send(&self.sock, &bytes, SendFlags::NOSIGNAL) {
                Ok(_) => return Ok(()),
                Err(Errno::INTR) => continue,
                Err(e) => return Err(SupervisorError::Io(io_err(e))),
            }
        }
    }

    fn serve(&mut self) -> Result<(), SupervisorError> {
        let mut buf = vec![0u8; MAX_REQUEST_BYTES + 1];
        loop {
            if !self.wait_for_message()? {
                continue;
            }
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(RUN_FDS))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let received = loop {
                match recvmsg(
                    &self.sock,
                    &mut [IoSliceMut::new(&mut buf)],
                    &mut control,
                    RecvFlags::CMSG_CLOEXEC,
                ) {
                    Ok(r) => break r,
                    Err(Errno::INTR) => continue,
                    Err(e) => return Err(SupervisorError::Io(io_err(e))),
                }
            };
            let mut fds: Vec<OwnedFd> = Vec::new();
            for message in control.drain() {
                if let RecvAncillaryMessage::ScmRights(passed) = message {
                    fds.extend(passed);
                }
            }
            if received.bytes == 0 {
                // End of file: the executor is gone.
                return Ok(());
            }
            let len = received.bytes.min(buf.len());
            match ToSupervisor::decode(&buf[..len])? {
                ToSupervisor::Run(spec) => self.run(spec, fds)?,
                ToSupervisor::Reset { grace } => {
                    let leftovers = self.reset(grace);
                    self.send(&FromSupervisor::ResetDone { leftovers })?;
                }
            }
        }
    }

    /// Waits until the socket has something (true) or a wake-up passed (false); reaps every
    /// child that ended meanwhile and reports the main one.
    fn wait_for_message(&mut self) -> Result<bool, SupervisorError> {
        let readable = {
            let mut fds = vec![PollFd::new(&self.sock, PollFlags::IN)];
            let mut timeout = Timespec {
                tv_sec: 1,
                tv_nsec: 0,
            };
            if let Some(main) = &self.main {
                match &main.pidfd {
                    Some(pidfd) => fds.push(PollFd::new(pidfd, PollFlags::IN)),
                    None => {
                        timeout = Timespec {
                            tv_sec: 0,
                            tv_nsec: 2_000_000,
                        }
                    }
                }
            }
            match poll(&mut fds, Some(&timeout)) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => return Err(SupervisorError::Io(io_err(e))),
            }
            !fds[0].revents().is_empty()
        };
        self.reap_ready()?;
        Ok(readable)
    }

    /// Reaps every child that has ended (without blocking); reports the main one's exit.
    fn reap_ready(&mut self) -> Result<(), SupervisorError> {
        loop {
            match wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => self.reaped(pid, status.as_raw())?,
                Ok(None) | Err(Errno::CHILD) => return Ok(()),
                Err(Errno::INTR) => continue,
                Err(e) => return Err(SupervisorError::Io(io_err(e))),
            }
        }
    }

    fn reaped(&mut self, pid: Pid, status: i32) -> Result<(), SupervisorError> {
        if self.main.as_ref().is_some_and(|m| m.pid == pid) {
            self.main = None;
            self.send(&FromSupervisor::Exited { status })?;
        }
        Ok(())
    }

    fn run(&mut self, spec: RunSpec, fds: Vec<OwnedFd>) -> Result<(), SupervisorError> {
        if self.main.is_some() {
            return self.send(&FromSupervisor::SpawnFailed {
                errno: Errno::BUSY.raw_os_error(),
                message: "the previous command is still running".into(),
            });
        }
        let Ok([stdin, stdout, stderr]) = <[OwnedFd; RUN_FDS]>::try_from(fds) else {
            return self.send(&FromSupervisor::SpawnFailed {
                errno: Errno::INVAL.raw_os_error(),
                message: "a run needs exactly three descriptors (stdin, stdout, stderr)".into(),
            });
        };
        let spawned = spawn(&spec, stdin, stdout, stderr);
        match spawned {
            Ok(child) => {
                let pid = Pid::from_child(&child);
                // The std handle is dropped without waiting: the supervisor reaps with
                // wait(2) itself, orphans included.
                drop(child);
                let pidfd = pidfd_open(pid, PidfdFlags::empty()).ok();
                self.main = Some(Main { pid, pidfd });
                self.send(&FromSupervisor::Started {
                    pid: pid.as_raw_nonzero().get().unsigned_abs(),
                })
            }
            Err(error) => self.send(&FromSupervisor::SpawnFailed {
                errno: error.raw_os_error().unwrap_or(0),
                message: format!("failed to start {}: {error}", spec.program.display()),
            }),
        }
    }

    /// Ends the call: SIGTERM to the whole tree, up to `grace` for it to exit, then SIGKILL to
    /// the children until none is left (orphans are re-parented to us and killed in turn).
    /// Reports the main process if it ends here. Returns how many processes were running.
    fn reset(&mut self, grace: Duration) -> u32 {
        let _ = self.reap_ready();
        let running = descendants();
        let leftovers = u32::try_from(running.len()).unwrap_or(u32::MAX);
        if running.is_empty() && self.main.is_none() && no_children() {
            return 0;
        }
        if !grace.is_zero() {
            signal_tree(Signal::TERM);
            let deadline = Instant::now() + grace;
            let mut pause = Duration::from_micros(200);
            while Instant::now() < deadline {
                let _ = self.reap_ready();
                if no_children() {
                    return leftovers;
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(25));
            }
        }
        let mut pause = Duration::from_micros(100);
        loop {
            for child in children(None) {
                let _ = kill_process(child, Signal::KILL);
            }
            match wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => {
                    // Best effort: the executor may already be gone.
                    let _ = self.reaped(pid, status.as_raw());
                    pause = Duration::from_micros(100);
                }
                Ok(None) => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(5));
                }
                Err(Errno::INTR) => {}
                Err(_) => break,
            }
        }
        self.main = None;
        leftovers
    }
}

fn spawn(
    spec: &RunSpec,
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
) -> io::Result<std::process::Child> {
    Command::new(&spec.program)
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(n, v)| (n, v)))
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0)
        .spawn()
}

/// True when this process has no child left (live or zombie).
fn no_children() -> bool {
    matches!(
        rustix::process::waitid(
            rustix::process::WaitId::All,
            rustix::process::WaitIdOptions::EXITED
                | rustix::process::WaitIdOptions::NOHANG
                | rustix::process::WaitIdOptions::NOWAIT
        ),
        Err(Errno::CHILD)
    )
}

/// Sends `signal` to every descendant of this process.
fn signal_tree(signal: Signal) {
    for pid in descendants() {
        let _ = kill_process(pid, signal);
    }
}

/// Every descendant of this process (breadth first).
fn descendants() -> Vec<Pid> {
    let mut out = children(None);
    let mut i = 0;
    while i < out.len() {
        let next = children(Some(out[i]));
        for pid in next {
            if !out.contains(&pid) {
                out.push(pid);
            }
        }
        i += 1;
    }
    out
}

/// The children of `pid` (`None`: this process), from `/proc/<pid>/task/*/children`, or by
/// scanning `/proc/*/stat` where the kernel has no `children` files.
fn children(pid: Option<Pid>) -> Vec<Pid> {
    let base = match pid {
        Some(pid) => format!("/proc/{}", pid.as_raw_nonzero()),
        None => "/proc/self".to_owned(),
    };
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(Path::new(&base).join("task")) else {
        return out;
    };
    let mut found_file = false;
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            found_file = true;
            out.extend(
                text.split_ascii_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .filter_map(Pid::from_raw),
            );
        }
    }
    if !found_file {
        let parent = pid.unwrap_or_else(getpid).as_raw_nonzero().get();
        out = children_by_scan(parent);
    }
    out
}

fn children_by_scan(parent: i32) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 1..];
            let ppid: i32 = rest.split_ascii_whitespace().nth(1)?.parse().ok()?;
            (ppid == parent).then_some(pid)
        })
        .filter_map(Pid::from_raw)
        .collect()
}
