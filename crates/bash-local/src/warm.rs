//! Warm sandboxes: confinements kept alive between runs and reused.
//!
//! Starting a confinement (`bwrap`'s user, PID, mount and network namespaces, or the Landlock
//! launcher) costs several milliseconds per run, most of it in the kernel (namespace creation,
//! mount-tree copies and their RCU-synchronised teardown). A request that names a
//! [`ShellRequest::supervisor`] lets the executor start `wrapper… supervisor…` once, keep it
//! idle in a pool keyed by the exact wrapper and supervisor argv (so a new policy — mode,
//! roots, network — gets a new sandbox, never an old one), and hand it later runs over a
//! `SOCK_SEQPACKET` socket (`dsh_shell::supervisor`). The supervisor spawns the command on the
//! pipes the executor passes, reports its exit, and at the end of each run kills every process
//! the run left behind (it is the child subreaper of all of them), so a reused sandbox starts
//! clean and "a `setsid` daemon is gone when the call ends" holds as with a fresh sandbox.
//!
//! A run that finds no idle sandbox for its key starts one and runs in it (so every confined
//! run, the first included, is contained by a supervisor); afterwards it waits idle in the
//! pool. Concurrent runs therefore grow the pool up to one sandbox per concurrently running
//! call (at most `max_idle` are kept idle; the oldest is dropped first). A supervisor that
//! cannot start marks its key broken: that key takes the cold path (a fresh `wrapper…` spawn
//! per run, as without a supervisor) with a warning in the log, for the executor's lifetime.
//!
//! [`ShellRequest::supervisor`]: dsh_shell::ShellRequest::supervisor

use std::collections::{HashSet, VecDeque};
use std::ffi::OsString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use dsh_shell::supervisor::{FromSupervisor, MAX_REPLY_BYTES, RUN_FDS};
use rustix::io::Errno;
use rustix::net::{
    AddressFamily, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use tokio::io::Interest;
use tokio::net::UnixDatagram;
use tokio::process::{Child, Command};

use crate::program::resolve_program;

/// How long a new supervisor may take to say it is ready.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// What identifies interchangeable sandboxes: the launcher prefix (a pure function of the
/// policy) and the supervisor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    wrapper: Vec<OsString>,
    supervisor: Vec<OsString>,
}

impl Key {
    pub(crate) fn new(wrapper: &[OsString], supervisor: &[OsString]) -> Self {
        Self {
            wrapper: wrapper.to_vec(),
            supervisor: supervisor.to_vec(),
        }
    }
}

/// One running supervisor inside its confinement, idle or serving one run.
#[derive(Debug)]
pub(crate) struct Warm {
    key: Key,
    /// The `SOCK_SEQPACKET` socket, driven through tokio's datagram type (its `send`/`recv`
    /// are plain message calls; end of file reads as an empty message).
    sock: UnixDatagram,
    /// The launcher process (bwrap, or the Landlock launcher exec'ed into the supervisor).
    /// Not killed on drop: closing the socket makes the supervisor end what is left and exit,
    /// which under bwrap tears the namespace down.
    _child: Child,
}

fn io_err(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

impl Warm {
    /// Sends the encoded message `bytes` with `fds` attached.
    pub(crate) async fn send(&self, bytes: &[u8], fds: &[&OwnedFd]) -> io::Result<()> {
        let borrowed: Vec<_> = fds.iter().map(|fd| fd.as_fd()).collect();
        loop {
            self.sock.writable().await?;
            let sent = self.sock.try_io(Interest::WRITABLE, || {
                let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(RUN_FDS))];
                let mut control = SendAncillaryBuffer::new(&mut space);
                if !borrowed.is_empty() && !control.push(SendAncillaryMessage::ScmRights(&borrowed))
                {
                    return Err(io::Error::other("too many descriptors for one message"));
                }
                rustix::net::sendmsg(
                    &self.sock,
                    &[io::IoSlice::new(bytes)],
                    &mut control,
                    SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
                )
                .map_err(io_err)
            });
            match sent {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                other => return other.map(|_| ()),
            }
        }
    }

    /// True when the supervisor is still there and has nothing to say (an idle one never
    /// sends anything: a readable socket means end of file or a protocol error).
    fn idle_and_alive(&self) -> bool {
        let mut buf = [0u8; 1];
        matches!(self.sock.try_recv(&mut buf), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// The next message; `None` at end of file (the supervisor is gone).
    pub(crate) async fn recv(&self) -> io::Result<Option<FromSupervisor>> {
        let mut buf = [0u8; MAX_REPLY_BYTES];
        match self.sock.recv(&mut buf).await? {
            0 => Ok(None),
            n => FromSupervisor::decode(&buf[..n])
                .map(Some)
                .map_err(io::Error::other),
        }
    }
}

/// Starts `wrapper… supervisor…` with `env` (the scrubbed environment, no session facts) and
/// waits for it to be ready.
pub(crate) async fn start(key: Key, env: Vec<(OsString, OsString)>) -> io::Result<Warm> {
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(io_err)?;
    // A seqpacket socket behaves as a connected datagram socket for send/recv.
    let ours = std::os::unix::net::UnixDatagram::from(ours);
    ours.set_nonblocking(true)?;
    let (launcher, rest) = key
        .wrapper
        .split_first()
        .ok_or_else(|| io::Error::other("no launcher"))?;
    let launcher = resolve_program(Path::new(launcher), &env, Path::new("/"))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "launcher not found in PATH"))?;
    let mut child = Command::new(launcher)
        .args(rest)
        .args(&key.supervisor)
        .current_dir("/")
        .env_clear()
        .envs(env)
        // The socket is the supervisor's stdin: no descriptor mapping (and no fork) needed.
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    let stderr = child.stderr.take();
    let warm = Warm {
        key,
        sock: UnixDatagram::from_std(ours)?,
        _child: child,
    };
    let first = tokio::time::timeout(START_TIMEOUT, warm.recv()).await;
    match first {
        Ok(Ok(Some(FromSupervisor::Ready))) => Ok(warm),
        other => {
            let mut text = String::new();
            if let Some(mut stderr) = stderr {
                use tokio::io::AsyncReadExt;
                let _ = tokio::time::timeout(
                    Duration::from_secs(1),
                    (&mut stderr).take(4096).read_to_string(&mut text),
                )
                .await;
            }
            let what = match other {
                Ok(Ok(Some(msg))) => format!("unexpected first message {msg:?}"),
                Ok(Ok(None)) => "it exited".to_owned(),
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("not ready within {START_TIMEOUT:?}"),
            };
            Err(io::Error::other(format!("{what}: {}", text.trim())))
        }
    }
}

#[derive(Debug, Default)]
struct PoolState {
    idle: VecDeque<Warm>,
    broken: HashSet<Key>,
}

/// The idle warm sandboxes of one executor.
#[derive(Debug)]
pub(crate) struct Pool {
    state: Mutex<PoolState>,
    max_idle: usize,
}

impl Pool {
    /// A pool keeping at most `max_idle` idle sandboxes (0: warm sandboxes are off).
    pub(crate) fn new(max_idle: usize) -> Self {
        Self {
            state: Mutex::new(PoolState::default()),
            max_idle,
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether warm sandboxes are on.
    pub(crate) fn enabled(&self) -> bool {
        self.max_idle > 0
    }

    /// An idle sandbox for `key`, if one is ready. One whose supervisor went away while idle
    /// (its socket reads end of file) is dropped on the way.
    pub(crate) fn take(&self, key: &Key) -> Option<Warm> {
        let mut state = self.lock();
        loop {
            let at = state.idle.iter().position(|w| &w.key == key)?;
            let warm = state.idle.remove(at)?;
            if warm.idle_and_alive() {
                return Some(warm);
            }
            tracing::debug!("an idle warm sandbox went away; dropping it");
        }
    }

    /// Returns a sandbox whose run ended cleanly; the oldest idle one goes when the pool is
    /// full.
    pub(crate) fn give(&self, warm: Warm) {
        let mut state = self.lock();
        state.idle.push_back(warm);
        while state.idle.len() > self.max_idle {
            state.idle.pop_front();
        }
    }

    /// Whether sandboxes for `key` failed to start before.
    pub(crate) fn is_broken(&self, key: &Key) -> bool {
        self.lock().broken.contains(key)
    }

    /// Records that sandboxes for `key` do not start: its runs take the cold path.
    pub(crate) fn mark_broken(&self, key: Key, error: &io::Error) {
        tracing::warn!(
            %error,
            launcher = ?key.wrapper.first(),
            supervisor = ?key.supervisor,
            "the warm sandbox did not start; bash calls under this policy start a new sandbox each"
        );
        self.lock().broken.insert(key);
    }
}
