//! Two UIs attached to one session of a `dsh serve` (on a unix socket, against the testkit
//! model), each in its own tmux pane: a prompt typed in one streams in both; an approval asked
//! is answered in the second and the first sees it resolved; a conversation rewind in one moves
//! both to the fork. Every wait polls
//! `tmux capture-pane` until a deadline.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dsh_test_harness::e2e::{Env, dsh_bin, request_messages};

use crate::pty::{DEADLINE, text_reply, tool_reply};

/// Between two looks at a pane (the wait itself is bounded by [`DEADLINE`]).
const POLL: Duration = Duration::from_millis(50);

/// Numbers the tmux servers of this process.
static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A tmux server of this test alone (`-L`), killed on drop.
struct Tmux {
    name: String,
    home: PathBuf,
}

impl Tmux {
    fn new(env: &Env) -> Tmux {
        Tmux {
            // One server per test (tests of this process run at once).
            name: format!(
                "dsh-attach-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
            home: env.home.path().to_owned(),
        }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
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
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What pane `pane` shows now.
    fn capture(&self, pane: &str) -> String {
        self.run(&["capture-pane", "-p", "-t", pane])
    }

    /// Polls pane `pane` until it satisfies `pred`; returns what it showed.
    fn wait(&self, pane: &str, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let screen = self.capture(pane);
            if pred(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what} in pane {pane}:\n{screen}"
            );
            std::thread::sleep(POLL);
        }
    }

    /// Types `text` into pane `pane` (literally), then Enter when `enter`.
    fn send(&self, pane: &str, text: &str, enter: bool) {
        self.run(&["send-keys", "-t", pane, "-l", text]);
        if enter {
            self.run(&["send-keys", "-t", pane, "Enter"]);
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

/// A running `dsh serve --unix`; killed on drop.
struct Served {
    child: Child,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `dsh serve --unix SOCKET` asking approval for every call that is not read-only; returns once
/// the socket answers.
fn serve(env: &Env, socket: &Path) -> Served {
    let child = env
        .dsh()
        .arg("serve")
        .arg("--unix")
        .arg(socket)
        .args(["--ask-for-approval", "untrusted"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let served = Served { child };
    let deadline = Instant::now() + DEADLINE;
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        assert!(
            Instant::now() < deadline,
            "dsh serve did not bind {socket:?}"
        );
        std::thread::sleep(POLL);
    }
    served
}

/// The id in a welcome's `session ID · /help for commands` line.
fn session_id(screen: &str) -> String {
    screen
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("session ")
                .and_then(|r| r.split_whitespace().next())
                .filter(|id| id.starts_with("session-"))
        })
        .unwrap_or_else(|| panic!("no session line: {screen}"))
        .to_owned()
}

#[test]
fn two_tuis_attached_to_one_session_stream_alike_and_share_an_approval() {
    let env = Env::new();
    env.server().push_all([
        text_reply("Hello from the model, streamed to both panes."),
        tool_reply(
            "bash",
            r#"{"command":"echo approved-in-two","description":"Say"}"#,
        ),
        text_reply("Done after the approval."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("serve.sock");
    let _served = serve(&env, &socket);
    let tmux = Tmux::new(&env);
    let dsh = dsh_bin();
    let attach = format!(
        "cd '{}' && exec '{}' --attach 'unix:{}'",
        env.work.path().display(),
        dsh.display(),
        socket.display()
    );
    // The first UI creates the session; the second attaches to it by id.
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "220",
        "-y",
        "50",
        &attach,
    ]);
    let one = "t:0.0";
    // The welcome line, not the composer's placeholder (`Ask dsh anything · /help for
    // commands`), which is drawn first.
    let screen = tmux.wait(one, "the first UI's session", |s| {
        shown_id(s).is_some() && s.contains("Ask dsh anything")
    });
    let id = session_id(&screen);
    tmux.run(&["split-window", "-h", "-t", one, &format!("{attach} '{id}'")]);
    let two = "t:0.1";
    tmux.wait(two, "the second UI on the same session", |s| {
        s.contains(&format!("session {id}")) && s.contains("Ask dsh anything")
    });

    // A prompt typed in the first streams in both.
    tmux.send(one, "say hello", true);
    for pane in [one, two] {
        let screen = tmux.wait(pane, "the streamed answer", |s| {
            s.contains("Hello from the model, streamed to both panes.") && !s.contains("● working")
        });
        assert!(screen.contains("› say hello"), "{pane}: {screen}");
    }

    // An approval asked: both panes show the question; the second answers it.
    tmux.send(one, "run the echo", true);
    for pane in [one, two] {
        tmux.wait(pane, "the approval question", |s| {
            s.contains("⚠ allow bash?") && s.contains("echo approved-in-two")
        });
    }
    tmux.send(two, "y", false);
    // The first sees it resolved: the decision, no question left, the turn going on.
    let screen = tmux.wait(one, "the resolution in the first UI", |s| {
        s.contains("✓ bash allowed once")
            && !s.contains("⚠ allow bash?")
            && s.contains("Done after the approval.")
            && !s.contains("● working")
    });
    assert!(screen.contains("● bash echo approved-in-two"), "{screen}");
    let screen = tmux.wait(two, "the end of the turn in the second UI", |s| {
        s.contains("Done after the approval.") && !s.contains("● working")
    });
    assert!(screen.contains("✓ bash allowed once"), "{screen}");
    assert!(!screen.contains("⚠ allow bash?"), "{screen}");
    assert_eq!(env.server().request_count(), 3);
    // The call ran once, on the server.
    let events = env.stored_events();
    let results = events.iter().filter(|e| e["type"] == "tool/result").count();
    assert_eq!(results, 1, "{events:?}");
}

/// The id in a pane's last `session ID · /help for commands` line (the session shown now).
fn shown_id(screen: &str) -> Option<String> {
    screen
        .lines()
        .rev()
        .find_map(|l| {
            l.trim()
                .strip_prefix("session ")
                .filter(|r| r.contains("/help for commands"))
                .and_then(|r| r.split_whitespace().next())
        })
        .map(str::to_owned)
}

#[test]
fn a_rewind_in_one_of_two_attached_uis_moves_both_to_the_fork() {
    let env = Env::new();
    env.server().push_all([
        text_reply("One done."),
        text_reply("Two done."),
        text_reply("Three done."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("serve.sock");
    let _served = serve(&env, &socket);
    let tmux = Tmux::new(&env);
    let attach = format!(
        "cd '{}' && exec '{}' --attach 'unix:{}'",
        env.work.path().display(),
        dsh_bin().display(),
        socket.display()
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "220",
        "-y",
        "50",
        &attach,
    ]);
    let one = "t:0.0";
    let screen = tmux.wait(one, "the first UI's session", |s| {
        shown_id(s).is_some() && s.contains("Ask dsh anything")
    });
    let old = session_id(&screen);
    tmux.run(&[
        "split-window",
        "-h",
        "-t",
        one,
        &format!("{attach} '{old}'"),
    ]);
    let two = "t:0.1";
    tmux.wait(two, "the second UI on the same session", |s| {
        s.contains(&format!("session {old}")) && s.contains("Ask dsh anything")
    });
    for (prompt, answer) in [("say one", "One done."), ("say two", "Two done.")] {
        tmux.send(one, prompt, true);
        for pane in [one, two] {
            tmux.wait(pane, answer, |s| {
                s.contains(answer) && !s.contains("● working")
            });
        }
    }

    // The first UI rewinds the conversation; both end on the fork, told by the old session.
    tmux.send(one, "/rewind 2 conversation yes", true);
    let mut forks = Vec::new();
    for pane in [one, two] {
        let screen = tmux.wait(pane, "the fork's UI", |s| {
            s.contains("↪ continued in session-")
                && shown_id(s).is_some_and(|id| id != old && s.contains("Ask dsh anything"))
        });
        forks.push(shown_id(&screen).unwrap());
    }
    assert_eq!(forks[0], forks[1], "{forks:?}");
    let fork = &forks[0];

    // The second UI's next prompt runs in the fork, shown in both, without the dropped turn.
    let requests = env.server().request_count();
    tmux.send(two, "say three", true);
    for pane in [one, two] {
        let screen = tmux.wait(pane, "the fork's new turn", |s| {
            s.contains("Three done.") && !s.contains("● working")
        });
        assert_eq!(shown_id(&screen).as_ref(), Some(fork), "{pane}: {screen}");
    }
    let sent = serde_json::to_string(&request_messages(env.server(), requests)).unwrap();
    assert!(
        sent.contains("say one") && sent.contains("say three"),
        "{sent}"
    );
    assert!(!sent.contains("say two"), "{sent}");
}
