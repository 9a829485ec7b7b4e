//! The per-user background server: `dsh serve --unix $DSH_HOME/run/serve.sock --idle-exit D`,
//! started on demand by `dsh exec --bg`, found again by later commands, gone when idle.
//!
//! `$DSH_HOME/run/` (mode 0700) holds the socket (0600: the file modes are the access control,
//! no token), `serve.lock` (an exclusive `flock` held while a server is started: two starters
//! end up with one server), `serve.pid` (the pid of the last server started) and `serve.log`
//! (the server's stdout and stderr). A socket nobody answers on (a killed server's) is stale
//! and replaced.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use dsh_serve::RemoteClient;

use crate::Failure;

/// How long the background server stays without clients and work, unless
/// [`IDLE_ENV`] says otherwise.
pub(crate) const DEFAULT_IDLE: Duration = Duration::from_secs(300);

/// The environment variable that sets the idle time of a server `exec --bg` starts
/// (`300ms`, `90s`, `10m`, `1h`; a bare number is seconds).
pub(crate) const IDLE_ENV: &str = "DSH_BG_IDLE_EXIT";

/// How long a starter waits for a new server to answer.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest socket path a `sockaddr_un` holds (108 bytes with its NUL on Linux).
const MAX_SOCKET_PATH: usize = 107;

/// The files of the background server.
#[derive(Clone, Debug)]
pub(crate) struct Paths {
    pub(crate) dir: PathBuf,
    pub(crate) socket: PathBuf,
    pub(crate) lock: PathBuf,
    pub(crate) pid: PathBuf,
    pub(crate) log: PathBuf,
}

/// The background server's files under `$DSH_HOME/run`.
pub(crate) fn paths() -> Paths {
    let dir = crate::home::dsh_home().join("run");
    Paths {
        socket: dir.join("serve.sock"),
        lock: dir.join("serve.lock"),
        pid: dir.join("serve.pid"),
        log: dir.join("serve.log"),
        dir,
    }
}

/// A duration that cannot be read.
#[derive(Debug)]
pub(crate) struct BadDuration(String);

impl std::fmt::Display for BadDuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` is not a duration (examples: 300ms, 90s, 10m, 1h; a bare number is seconds)",
            self.0
        )
    }
}

impl std::error::Error for BadDuration {}

/// Reads `300ms`, `90s`, `10m`, `1h` or a bare number of seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, BadDuration> {
    let t = s.trim();
    let bad = || BadDuration(s.to_owned());
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let ms = match unit.trim() {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => None,
    }
    .ok_or_else(bad)?;
    Ok(Duration::from_millis(ms))
}

/// The spelling [`parse_duration`] reads back.
pub(crate) fn format_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// The idle time for a server started now: `$DSH_BG_IDLE_EXIT` or [`DEFAULT_IDLE`].
fn idle_time() -> Result<Duration, Failure> {
    match std::env::var(IDLE_ENV) {
        Ok(v) if !v.trim().is_empty() => {
            parse_duration(&v).map_err(|e| Failure::usage(anyhow!("{IDLE_ENV}: {e}")))
        }
        _ => Ok(DEFAULT_IDLE),
    }
}

/// Whether a server answers on `socket`.
pub(crate) fn answers(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

/// A client of the server on `socket`.
pub(crate) fn client(socket: &Path) -> Result<RemoteClient, Failure> {
    RemoteClient::unix(socket).map_err(|e| Failure::run(anyhow!("{e}")))
}

/// The running background server's client, if one answers.
pub(crate) fn running() -> Result<Option<RemoteClient>, Failure> {
    let p = paths();
    if !answers(&p.socket) {
        return Ok(None);
    }
    client(&p.socket).map(Some)
}

/// The error of a command that needs a running server.
pub(crate) fn none_running() -> Failure {
    Failure::run(anyhow!(
        "no background server is running (`dsh exec --bg \"task\"` starts one)"
    ))
}

/// The running background server's client, starting a server first when none answers.
/// Returns whether this call started it.
pub(crate) async fn ensure() -> Result<(RemoteClient, bool), Failure> {
    let p = paths();
    if answers(&p.socket) {
        return Ok((client(&p.socket)?, false));
    }
    let idle = idle_time()?;
    let started = {
        let p = p.clone();
        tokio::task::spawn_blocking(move || start(&p, idle))
            .await
            .map_err(|e| Failure::run(anyhow!("starting the background server failed: {e}")))??
    };
    Ok((client(&p.socket)?, started))
}

/// The run directory, owner-only.
fn run_dir(p: &Paths) -> Result<(), Failure> {
    let io = |what: &str, e: std::io::Error| {
        Failure::run(anyhow!("cannot {what} {}: {e}", p.dir.display()))
    };
    std::fs::create_dir_all(&p.dir).map_err(|e| io("create", e))?;
    std::fs::set_permissions(&p.dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| io("restrict", e))?;
    Ok(())
}

/// Starts a server under the start lock unless one answers by then. Returns whether it
/// started one.
fn start(p: &Paths, idle: Duration) -> Result<bool, Failure> {
    if p.socket.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(Failure::usage(anyhow!(
            "the background server's socket path {} is longer than a unix socket allows \
             ({MAX_SOCKET_PATH} bytes); set DSH_HOME to a shorter directory",
            p.socket.display()
        )));
    }
    run_dir(p)?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&p.lock)
        .map_err(|e| Failure::run(anyhow!("cannot open {}: {e}", p.lock.display())))?;
    // Held until this function returns: a concurrent starter waits here, then finds the
    // server this one started.
    lock.lock()
        .map_err(|e| Failure::run(anyhow!("cannot lock {}: {e}", p.lock.display())))?;
    if answers(&p.socket) {
        return Ok(false);
    }
    if p.socket.exists() {
        tracing::info!(socket = %p.socket.display(), "replacing a stale socket");
        let _ = std::fs::remove_file(&p.socket);
    }
    let log = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&p.log)
        .map_err(|e| Failure::run(anyhow!("cannot open {}: {e}", p.log.display())))?;
    let err_log = log
        .try_clone()
        .map_err(|e| Failure::run(anyhow!("{}: {e}", p.log.display())))?;
    let exe = std::env::current_exe()
        .map_err(|e| Failure::run(anyhow!("cannot find the dsh binary: {e}")))?;
    let mut child = Command::new(exe)
        .arg("serve")
        .arg("--unix")
        .arg(&p.socket)
        .arg("--idle-exit")
        .arg(format_duration(idle))
        // No project's directory: sessions name their own working directories.
        .current_dir(&p.dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err_log)
        // Its own process group: the terminal's Ctrl-C does not reach it.
        .process_group(0)
        .spawn()
        .map_err(|e| Failure::run(anyhow!("cannot start the background server: {e}")))?;
    let _ = std::fs::write(&p.pid, format!("{}\n", child.id()));
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if answers(&p.socket) {
            tracing::debug!(pid = child.id(), "background server started");
            return Ok(true);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Failure::run(anyhow!(
                "the background server exited at start ({status}); its log ({}):\n{}",
                p.log.display(),
                log_tail(&p.log)
            )));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err(Failure::run(anyhow!(
                "the background server did not answer within {} s; its log ({}):\n{}",
                START_TIMEOUT.as_secs(),
                p.log.display(),
                log_tail(&p.log)
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The last lines of the server's log.
fn log_tail(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// The identity of the socket file a server bound (to remove only its own at exit).
pub(crate) fn socket_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Removes the socket at `path` if it is still the one `identity` names.
pub(crate) fn remove_socket(path: &Path, identity: Option<(u64, u64)>) {
    if identity.is_some() && socket_identity(path) == identity {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("300ms").unwrap(), Duration::from_millis(300));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5 days").is_err());
        assert!(parse_duration("-1s").is_err());
        let d = Duration::from_millis(1500);
        assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
    }
}
