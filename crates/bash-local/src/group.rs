//! Process-group signalling and liveness.
//!
//! Every run is its own process group (the `bash` process is the leader, pgid = its pid).
//! Killing the group reaches every descendant that did not leave it (`setsid`, `setpgid`).
//!
//! Liveness: `killpg(pgid, 0)` succeeds while any member exists, *including zombies* (a killed
//! background process stays a zombie until its new parent reaps it, and we are not that
//! parent). On Linux the members are therefore looked up in `/proc` and zombies count as dead;
//! elsewhere the `killpg` answer is used as is.

use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::time::Instant;

/// Sends `signal` to the group. Returns false when the group no longer exists.
pub(crate) fn signal_group(pgid: i32, signal: Signal) -> bool {
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        Err(error) => {
            tracing::warn!(pgid, %signal, %error, "signalling the process group failed");
            true
        }
    }
}

/// True while the group has at least one member that is not a zombie.
pub(crate) fn group_alive(pgid: i32) -> bool {
    match killpg(Pid::from_raw(pgid), None) {
        Err(Errno::ESRCH) => false,
        // EPERM means members exist that we may not signal: they are alive.
        Ok(()) | Err(_) => live_member_in_proc(pgid).unwrap_or(true),
    }
}

/// Scans `/proc` for a non-zombie process whose process group is `pgid`. `None` when `/proc`
/// cannot be read (not Linux, or no procfs mounted).
fn live_member_in_proc(pgid: i32) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // The process may vanish between readdir and read: treat that as gone.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((state, pgrp)) = parse_stat(&stat)
            && pgrp == pgid
            && state != 'Z'
            && state != 'X'
        {
            return Some(true);
        }
    }
    Some(false)
}

/// State and process group from a `/proc/<pid>/stat` line:
/// `pid (comm) state ppid pgrp ...`, where `comm` may itself contain `)` and spaces.
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// The identity of the pipe behind our file descriptor `fd` (`pipe:[<inode>]` on Linux).
pub(crate) fn pipe_id(fd: i32) -> Option<String> {
    let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    let target = target.to_str()?;
    target.starts_with("pipe:").then(|| target.to_owned())
}

/// Processes other than this one that hold any of the pipes in `ids` open: processes that
/// left the run's process group (`setsid`) but still write to its output. Linux only (empty
/// elsewhere).
pub(crate) fn pipe_holders(ids: &[String]) -> Vec<i32> {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut holders = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name == me || !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(pid) = name.parse::<i32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .ok()
                .and_then(|t| t.to_str().map(|t| ids.iter().any(|id| id == t)))
                .unwrap_or(false)
        });
        if holds {
            holders.push(pid);
        }
    }
    holders
}

/// True while `pid` exists and is not a zombie.
fn pid_alive(pid: i32) -> bool {
    if kill(Pid::from_raw(pid), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => parse_stat(&stat).is_some_and(|(state, _)| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

/// SIGTERM to each of `pids`, up to `grace` for them to die, then SIGKILL to the survivors.
pub(crate) async fn terminate_pids(pids: &[i32], grace: Duration) {
    for pid in pids {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    let mut pause = Duration::from_millis(1);
    while pids.iter().any(|p| pid_alive(*p)) && Instant::now() < deadline {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(25));
    }
    for pid in pids {
        if pid_alive(*pid) {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
    }
}

/// Waits (polling with backoff) until the group has no live member or `deadline` passes.
/// Returns true when the group is gone.
pub(crate) async fn wait_group_gone(pgid: i32, deadline: Instant) -> bool {
    let mut pause = Duration::from_millis(1);
    loop {
        if !group_alive(pgid) {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_millis(25));
    }
}

/// The model-visible name of a signal number, e.g. `SIGTERM`.
pub(crate) fn signal_name(signal: i32) -> String {
    Signal::try_from(signal)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| signal.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_hostile_comm() {
        assert_eq!(
            parse_stat("123 (a) b) c) S 1 4567 4567 0 -1"),
            Some(('S', 4567))
        );
        assert_eq!(parse_stat("9 (zz) Z 1 9 9"), Some(('Z', 9)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn names_signals() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(12345), "12345");
    }
}
