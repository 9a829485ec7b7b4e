//! Helpers shared by the test modules.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use dsh_bash_local::{LocalShell, LocalShellOptions};
use dsh_shell::{ShellExecutor, ShellOutcome, ShellRequest};

/// Safety net for waits that should end far sooner.
pub const SAFETY: Duration = Duration::from_secs(60);

/// Options with short grace and drain windows so termination tests stay quick, and a base
/// environment with a planted secret.
pub fn options(spill: &Path) -> LocalShellOptions {
    let mut base: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(n, _)| n != "DEEPSEEK_API_KEY")
        .collect();
    base.push(("DEEPSEEK_API_KEY".into(), "sk-planted-secret".into()));
    base.push(("DSH_TEST_VISIBLE".into(), "no".into()));
    base.push(("PLAIN_VISIBLE".into(), "yes".into()));
    LocalShellOptions {
        kill_grace: Duration::from_millis(300),
        drain_window: Duration::from_millis(200),
        spill_dir: Some(spill.to_path_buf()),
        base_env: Some(base),
        ..LocalShellOptions::default()
    }
}

/// A shell with [`options`].
pub fn shell(spill: &Path) -> LocalShell {
    LocalShell::new(options(spill))
}

/// Runs `command` in `cwd` with a safety-net timeout around the whole run.
pub async fn run(shell: &LocalShell, request: ShellRequest) -> ShellOutcome {
    tokio::time::timeout(SAFETY, shell.run(request))
        .await
        .expect("run did not finish within the safety net")
        .expect("run failed")
}

/// True when `pid` exists and is not a zombie (a killed orphan stays a zombie until its new
/// parent reaps it; that is dead for our purposes).
pub fn alive(pid: i32) -> bool {
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    if kill(Pid::from_raw(pid), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let rest = &stat[stat.rfind(')').unwrap() + 1..];
            let state = rest.split_ascii_whitespace().next().unwrap();
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

/// Parses the first line of `text` as a pid.
pub fn pid_in(text: &str) -> i32 {
    text.lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {text:?}"))
}
