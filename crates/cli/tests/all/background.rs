//! Background sessions on one machine: `dsh exec --bg` starts (or finds) the per-user server on
//! `$DSH_HOME/run/serve.sock` and returns the session's id at once; `dsh ps`, `dsh stop`; a
//! killed server's socket is replaced; an idle server exits; concurrent starters share one
//! server. Real processes against the testkit model; every wait polls a condition with a
//! deadline.

#![allow(clippy::print_stderr)]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::{Env, log_text, session_files, stalled_text, stderr, stdout};

const DEADLINE: Duration = Duration::from_secs(90);

/// A test's home with its background server killed at the end (whatever pid the run directory
/// names last).
struct Bg {
    env: Env,
    idle: &'static str,
}

impl Drop for Bg {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl Bg {
    fn new() -> Self {
        Self::with_idle("120s")
    }

    fn with_idle(idle: &'static str) -> Self {
        Bg {
            env: Env::new(),
            idle,
        }
    }

    fn run_dir(&self) -> PathBuf {
        self.env.home.path().join("run")
    }

    fn socket(&self) -> PathBuf {
        self.run_dir().join("serve.sock")
    }

    fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.run_dir().join("serve.pid"))
            .ok()
            .and_then(|p| p.trim().parse().ok())
    }

    fn dsh(&self, args: &[&str]) -> Output {
        self.env
            .dsh()
            .env("DSH_BG_IDLE_EXIT", self.idle)
            // The server a command starts inherits this: it says when open streams keep it.
            .env("DSH_LOG", "warn,dsh_serve::idle=info")
            .args(args)
            .output()
            .unwrap()
    }

    /// `dsh exec --bg TASK`: exit 0 and one id on stdout.
    fn start(&self, task: &str) -> String {
        let out = self.dsh(&["exec", "--bg", task]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let id = stdout(&out).trim().to_owned();
        assert!(!id.is_empty() && !id.contains('\n'), "{id:?}");
        id
    }

    /// `dsh ps --json --all`.
    fn ps(&self) -> Value {
        let out = self.dsh(&["ps", "--json", "--all"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_str(&stdout(&out)).unwrap()
    }

    /// The `ps` row of session `id`.
    fn row(&self, id: &str) -> Option<Value> {
        self.ps()["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .cloned()
    }

    /// Polls `ps` until session `id`'s row satisfies `ok`; the row.
    fn wait_row(&self, id: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let row = self.row(id);
            if let Some(r) = row.as_ref().filter(|r| ok(r)) {
                return r.clone();
            }
            assert!(
                start.elapsed() < DEADLINE,
                "session {id} never became {what}: {row:?}\nserver log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's composition asks before anything not read-only.
    fn untrusted(&self) {
        let home = self.env.home.path().join("dsh.yaml");
        let mut yaml = std::fs::read_to_string(&home).unwrap();
        yaml.push_str(
            "  - id: approval\n    name: approval\n    config:\n      policy: untrusted\n",
        );
        std::fs::write(&home, yaml).unwrap();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.run_dir().join("serve.log")).unwrap_or_default()
    }

    /// The stored log text of session `id`.
    fn stored(&self, id: &str) -> String {
        session_files(&self.env.home.path().join("sessions"))
            .iter()
            .map(|f| log_text(f))
            .find(|t| t.lines().next().is_some_and(|h| h.contains(id)))
            .unwrap_or_default()
    }
}

/// Polls `ok` until it holds (or fails the test after the deadline).
fn wait(what: &str, ok: impl Fn() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < DEADLINE, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn is_idle_after(turns: u64) -> impl Fn(&Value) -> bool {
    move |r| r["state"] == "idle" && r["turns"].as_u64() == Some(turns)
}

#[test]
fn exec_bg_prints_the_id_at_once_and_the_task_completes_in_the_background() {
    let bg = Bg::new();
    bg.env
        .server()
        .push(Completion::new().text("background answer").reply());
    // No server yet: ps says so.
    let out = bg.dsh(&["ps"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("no background server is running"),
        "{}",
        stderr(&out)
    );
    assert_eq!(bg.ps()["running"], false);
    // A token exists (TCP servers of this home need one); the socket asks none.
    let out = bg.dsh(&["serve", "token", "create"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let t = Instant::now();
    let id = bg.start("do it");
    eprintln!(
        "exec --bg to id (server started): {} ms",
        t.elapsed().as_millis()
    );
    let row = bg.wait_row(&id, "idle after its turn", is_idle_after(1));
    assert_eq!(row["cwd"], bg.env.cwd().display().to_string());
    assert_eq!(row["doing"]["kind"], "idle");
    wait("the answer stored", || {
        bg.stored(&id).contains("background answer")
    });
    // Owner-only files.
    let mode = |p: PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(bg.run_dir()), 0o700);
    assert_eq!(mode(bg.socket()), 0o600);
    // An idle session is listed with --all only; the text form has a header.
    let out = bg.dsh(&["ps"]);
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    let out = bg.dsh(&["ps", "--all"]);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("ID"), "{text}");
    assert!(lines[1].starts_with(&id), "{text}");
    assert!(lines[1].contains("idle"), "{text}");

    // A second task finds the running server (same pid) and prints its id quickly.
    bg.env
        .server()
        .push(Completion::new().text("second").reply());
    let pid = bg.pid();
    let t = Instant::now();
    let second = bg.start("again");
    eprintln!(
        "exec --bg to id (server running): {} ms",
        t.elapsed().as_millis()
    );
    assert_eq!(bg.pid(), pid);
    assert_ne!(second, id);
    bg.wait_row(&second, "idle after its turn", is_idle_after(1));
}

#[test]
fn ps_lists_a_session_waiting_for_an_approval_first() {
    let bg = Bg::new();
    bg.untrusted();
    bg.env.server().push(
        Completion::new()
            .tool_call(
                "bash",
                r#"{"command":"echo from-the-tool","description":"Say it"}"#,
            )
            .reply(),
    );
    let waiting = bg.start("needs a tool");
    let row = bg.wait_row(&waiting, "waiting for approval", |r| {
        r["state"] == "waiting-for-approval"
    });
    assert_eq!(row["doing"]["kind"], "approval", "{row}");
    assert!(
        row["doing"]["tool"]
            .as_str()
            .unwrap()
            .contains("echo from-the-tool"),
        "{row}"
    );
    // A newer session that is working.
    bg.env.server().push(stalled_text("still streaming"));
    let working = bg.start("stream something");
    bg.wait_row(&working, "answering", |r| r["doing"]["kind"] == "answering");

    let ps = bg.ps();
    let ids: Vec<&str> = ps["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [waiting.as_str(), working.as_str()], "{ps}");
    let out = bg.dsh(&["ps"]);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[1].starts_with(&waiting), "{text}");
    assert!(lines[1].contains("waiting"), "{text}");
    assert!(lines[1].contains("approve? "), "{text}");
    assert!(lines[2].starts_with(&working), "{text}");
    assert!(lines[2].contains("answering"), "{text}");
    // stop --all interrupts both.
    let out = bg.dsh(&["stop", "--all"]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", stderr(&out), bg.ps());
    assert_eq!(stdout(&out).lines().count(), 2, "{}", stdout(&out));
    bg.wait_row(&waiting, "idle", |r| r["state"] == "idle");
    bg.wait_row(&working, "idle", |r| r["state"] == "idle");
}

#[test]
fn stop_interrupts_a_running_turn() {
    let bg = Bg::new();
    bg.env.server().push(stalled_text("partial answer"));
    let id = bg.start("talk for a long time");
    bg.wait_row(&id, "answering", |r| {
        r["state"] == "working" && r["doing"]["kind"] == "answering"
    });
    // A unique prefix names it.
    let out = bg.dsh(&["stop", &id[..id.len() - 2]]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("stopped {id}\n"));
    bg.wait_row(&id, "idle", |r| r["state"] == "idle");
    wait("the interrupted turn stored", || {
        let log = bg.stored(&id);
        log.contains("partial answer") && log.contains("interrupted")
    });
    // An idle session: nothing to stop. An unknown id: a usage error.
    let out = bg.dsh(&["stop", &id]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("nothing to stop"), "{}", stderr(&out));
    let out = bg.dsh(&["stop", "no-such-session"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no open session `no-such-session`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_killed_server_s_stale_socket_is_replaced() {
    let bg = Bg::new();
    bg.env.server().push(Completion::new().text("one").reply());
    let first = bg.start("one");
    bg.wait_row(&first, "idle", is_idle_after(1));
    let pid = bg.pid().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let socket = bg.socket();
    wait("the killed server stops answering", || {
        std::os::unix::net::UnixStream::connect(&socket).is_err()
    });
    assert!(socket.exists(), "kill -9 leaves the socket file behind");
    let out = bg.dsh(&["ps"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("no background server is running"));
    let out = bg.dsh(&["stop", "--all"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no background server is running"));
    // The next task starts a new server on the same path.
    bg.env.server().push(Completion::new().text("two").reply());
    let second = bg.start("two");
    assert_ne!(bg.pid(), Some(pid));
    bg.wait_row(&second, "idle", is_idle_after(1));
}

#[test]
fn an_idle_server_exits_and_leaves_its_sessions_flushed_and_unlocked() {
    let bg = Bg::with_idle("1s");
    bg.env
        .server()
        .push(Completion::new().text("done quickly").reply());
    let id = bg.start("quick");
    bg.wait_row(&id, "idle", is_idle_after(1));
    // A client following the session (an open event stream) keeps the server: it is still
    // there after its idle time passed.
    let mut follow = bg
        .env
        .dsh()
        .args(["attach", &id])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(follow.stdout.take().unwrap()));
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let end = line.starts_with("-- turn 1 completed");
        seen.push(line);
        if end {
            break;
        }
    }
    assert_eq!(seen, ["> quick", "done quickly", "-- turn 1 completed"]);
    // The server says when its idle time passed with the follower's stream still open.
    wait("the idle time passes with a follower", || {
        bg.log().contains("staying for the requests in flight")
    });
    let socket = bg.socket();
    assert!(
        std::os::unix::net::UnixStream::connect(&socket).is_ok(),
        "the server left while a client followed a session:\n{}",
        bg.log()
    );
    follow.kill().unwrap();
    follow.wait().unwrap();
    // No client and no work from now on: the server goes, removing its socket.
    wait("the idle server exits", || !socket.exists());
    assert!(
        bg.log().contains("idle for 1000ms, stopping"),
        "{}",
        bg.log()
    );
    assert!(bg.stored(&id).contains("done quickly"));
    // The session is closed: a local exec continues it (its lock was released).
    bg.env
        .server()
        .push(Completion::new().text("continued").reply());
    let out = bg.dsh(&["exec", "--resume", &id, "more"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "continued\n");
}

#[test]
fn two_concurrent_starters_share_one_server() {
    let bg = Bg::new();
    bg.env.server().push(Completion::new().text("a").reply());
    bg.env.server().push(Completion::new().text("b").reply());
    let spawn = |task: &str| {
        bg.env
            .dsh()
            .env("DSH_BG_IDLE_EXIT", bg.idle)
            .args(["exec", "--bg", task])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("first"), spawn("second"));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    assert_eq!(b.status.code(), Some(0), "{}", stderr(&b));
    let (ida, idb) = (stdout(&a).trim().to_owned(), stdout(&b).trim().to_owned());
    assert_ne!(ida, idb);
    // Both sessions are open in the one server that answers the socket.
    bg.wait_row(&ida, "idle", is_idle_after(1));
    bg.wait_row(&idb, "idle", is_idle_after(1));
}

/// A tmux server of one test (`-L`), killed on drop.
struct Tmux {
    name: String,
    home: PathBuf,
}

impl Tmux {
    fn cmd(&self) -> std::process::Command {
        let mut c = std::process::Command::new("tmux");
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("DSH_HOME", &self.home)
            .env("TERM", "xterm-256color")
            .args(["-L", &self.name, "-f", "/dev/null"]);
        c
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().unwrap();
        assert!(out.status.success(), "tmux {args:?}: {}", stderr(&out));
        stdout(&out)
    }

    /// Polls the pane until it satisfies `ok`; what it showed.
    fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.run(&["capture-pane", "-p", "-t", "t"]);
            if ok(&screen) {
                return screen;
            }
            assert!(start.elapsed() < DEADLINE, "never {what}:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

#[test]
fn attach_opens_the_tui_on_a_background_session_and_its_approval_is_answered_there() {
    let bg = Bg::new();
    bg.untrusted();
    bg.env.server().push_all([
        Completion::new()
            .tool_call(
                "bash",
                r#"{"command":"echo approved-when-attached","description":"Say it"}"#,
            )
            .reply(),
        Completion::new().text("Done after attaching.").reply(),
    ]);
    let id = bg.start("needs a tool");
    bg.wait_row(&id, "waiting for approval", |r| {
        r["state"] == "waiting-for-approval"
    });
    let tmux = Tmux {
        name: format!("dsh-bg-attach-{}", std::process::id()),
        home: bg.env.home.path().to_owned(),
    };
    let attach = format!(
        "cd '{}' && exec '{}' attach '{}'",
        bg.env.cwd().display(),
        crate::support::dsh_bin().display(),
        &id[..id.len() - 3]
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "200",
        "-y",
        "50",
        &attach,
    ]);
    tmux.wait("the approval question in the UI", |s| {
        s.contains("allow bash?") && s.contains("echo approved-when-attached")
    });
    tmux.run(&["send-keys", "-t", "t", "-l", "y"]);
    tmux.wait("the turn's end in the UI", |s| {
        s.contains("Done after attaching.") && !s.contains("● working")
    });
    // The session ran on in the server: idle there, its tool run once.
    bg.wait_row(&id, "idle after its turn", is_idle_after(1));
    wait("the tool's result stored", || {
        bg.stored(&id).contains(r"approved-when-attached\n")
    });
}

/// `dsh exec --bg --sandbox read-only`: the background session keeps the mode it was started
/// with (a write in its own working directory, which the server's default would allow, is
/// refused), pinned in its log.
#[test]
fn exec_bg_runs_the_session_in_the_sandbox_mode_it_names() {
    let bg = Bg::new();
    let target = bg.env.cwd().join("bg.txt");
    bg.env.server().push_all([
        Completion::new()
            .tool_call(
                "write",
                &serde_json::json!({"file_path": target, "content": "written"}).to_string(),
            )
            .reply(),
        Completion::new().text("refused").reply(),
    ]);
    let out = bg.dsh(&["exec", "--bg", "--sandbox", "read-only", "write it"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = stdout(&out).trim().to_owned();
    bg.wait_row(&id, "idle after its turn", is_idle_after(1));
    wait("the refusal stored", || bg.stored(&id).contains("refused"));
    assert!(!target.exists(), "a read-only session wrote");
    let log = bg.stored(&id);
    assert!(log.contains("read-only"), "the mode is not pinned: {log}");
}
