//! End-to-end tests of a front end: the real `dsh` binary with a temporary `DSH_HOME` against
//! the testkit's mock DeepSeek server.
//!
//! The binary is found by [`dsh_bin`]: `$DSH_BIN` when set, else the `dsh` of the test's own
//! target directory and profile (`target/debug/dsh` next to `target/debug/deps/<test>`), which
//! `cargo test --workspace` builds before it runs any test. A crate testing a front end (the
//! TUI, ACP, the SDK server) keeps its end-to-end tests next to itself with this module; run
//! them alone after `cargo build -p dsh-cli`.
// A test-only crate: failing loudly is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use dsh_testkit::MockServer;
use serde_json::Value;

const FAST_RETRIES: &str = "plugins:\n  - id: llm-retry\n    name: llm-retry\n    config:\n      default: { initialDelayMs: 1, maxDelayMs: 2000 }\n";

pub struct Env {
    pub home: tempfile::TempDir,
    pub work: tempfile::TempDir,
    pub server: Option<MockServer>,
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    /// A fresh home whose user layer makes retries fast (1 ms backoff; Retry-After up to 2 s).
    pub fn new() -> Self {
        let env = Self {
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
            server: Some(MockServer::start_blocking()),
        };
        std::fs::write(env.home.path().join("dsh.yaml"), FAST_RETRIES).unwrap();
        env
    }

    pub fn server(&self) -> &MockServer {
        self.server.as_ref().unwrap()
    }

    pub fn cwd(&self) -> PathBuf {
        self.work.path().canonicalize().unwrap()
    }

    /// `dsh` with the environment of this test: home, key, base URL, working directory.
    pub fn dsh(&self) -> Command {
        let mut c = Command::new(dsh_bin());
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("DSH_HOME", self.home.path())
            .env("DEEPSEEK_API_KEY", "sk-test-key")
            .current_dir(self.work.path())
            .stdin(Stdio::null());
        if let Some(s) = &self.server {
            c.env("DEEPSEEK_BASE_URL", s.base_url());
        }
        c
    }

    /// `dsh exec ARGS` run to its end, within [`RUN_LIMIT`].
    pub fn exec(&self, args: &[&str]) -> Output {
        output_within(self.dsh().arg("exec").args(args), RUN_LIMIT)
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.dsh()
            .arg("exec")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Writes a composition patch file and returns its path.
    pub fn patch(&self, name: &str, yaml: &str) -> PathBuf {
        let p = self.home.path().join(name);
        std::fs::write(&p, yaml).unwrap();
        p
    }

    /// The id of the only stored session (from its header line).
    pub fn session_id(&self) -> String {
        let files = session_files(&self.home.path().join("sessions"));
        assert_eq!(files.len(), 1, "expected one stored session: {files:?}");
        let text = log_text(&files[0]);
        let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        header["id"].as_str().unwrap().to_owned()
    }

    /// The events of the only stored session (parsed JSONL rows after the header).
    pub fn stored_events(&self) -> Vec<Value> {
        let files = session_files(&self.home.path().join("sessions"));
        assert_eq!(files.len(), 1, "expected one stored session: {files:?}");
        read_rows(&files[0])
    }
}

/// A reply that streams `text` and then stalls: no finish, no usage, no `[DONE]`.
pub fn stalled_text(text: &str) -> dsh_testkit::Reply {
    dsh_testkit::Reply::sse()
        .bytes(
            dsh_testkit::Completion::new()
                .text(text)
                .no_done()
                .no_finish()
                .no_usage()
                .to_bytes(),
        )
        .stall()
}

/// The plain JSONL text of a stored log (zstd frames decompressed).
pub fn log_text(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    if path.extension().is_some_and(|x| x == "zstd") {
        let (plain, torn) = dsh_session_jsonl::zstd::decompress_frames(&bytes).unwrap();
        assert!(!torn, "{} ends in a torn frame", path.display());
        return String::from_utf8(plain).unwrap();
    }
    String::from_utf8(bytes).unwrap()
}

/// Replaces the stored log at `path` (plain or zstd) by the plain JSONL `text`, as
/// `session.v4.jsonl` in the same directory (a plain log is continued in plain).
pub fn replace_log(path: &Path, text: impl AsRef<[u8]>) -> PathBuf {
    std::fs::remove_file(path).unwrap();
    let plain = path.with_file_name("session.v4.jsonl");
    std::fs::write(&plain, text).unwrap();
    plain
}

pub fn read_rows(path: &Path) -> Vec<Value> {
    log_text(path)
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every stored log (`*.jsonl`, `*.jsonl.zstd`) under `root`.
pub fn session_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".jsonl") || n.ends_with(".jsonl.zstd"))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// How long [`Env::exec`] and [`bounded`] let a process run: far beyond any test's run on a
/// loaded machine, so reaching it means the process hangs.
pub const RUN_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// [`output_within`] with [`RUN_LIMIT`].
pub fn bounded(cmd: &mut Command) -> Output {
    output_within(cmd, RUN_LIMIT)
}

/// Runs `cmd` to its end like [`Command::output`], but kills it and fails the test when it is
/// still running after `limit`: a process that hangs fails its test instead of hanging the suite.
pub fn output_within(cmd: &mut Command, limit: std::time::Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            // The pipes close with the process (unless a child of it still holds them).
            let said = rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .ok()
                .and_then(Result::ok)
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                .unwrap_or_default();
            panic!(
                "{:?} {:?} still ran after {limit:?} and was killed; its stderr:\n{said}",
                cmd.get_program(),
                cmd.get_args().collect::<Vec<_>>()
            );
        }
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

/// The `messages` of recorded request `i`.
pub fn request_messages(server: &MockServer, i: usize) -> Vec<Value> {
    server.request(i).unwrap().body_json().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone()
}

/// Reads one message written into the FIFO at `path` by a tool's shell; fails the test (rather
/// than hanging it) if nothing is written within a generous safety bound.
pub fn wait_fifo(path: &Path) -> String {
    let path = path.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut s = String::new();
        let r = std::fs::File::open(&path).and_then(|mut f| f.read_to_string(&mut s));
        let _ = tx.send(r.map(|_| s));
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the tool never started")
        .unwrap()
}

/// A FIFO in the work dir and bash tool arguments that write `started` into it and then sleep:
/// the test learns (through [`wait_fifo`]) that the tool is running.
pub fn blocking_bash(env: &Env, name: &str) -> (PathBuf, String) {
    let fifo = env.work.path().join(name);
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let args = format!(
        r#"{{"command":"echo started > {} && sleep 30","description":"Wait"}}"#,
        fifo.display()
    );
    (fifo, args)
}

/// Whether a request message is a runtime-context snapshot (the `sandbox:policy` section
/// appends one after the first prompt).
pub fn is_runtime_context(m: &Value) -> bool {
    m["role"] == "user"
        && m["content"]
            .as_str()
            .is_some_and(|t| t.starts_with("Current runtime context."))
}

/// The `dsh` binary the end-to-end tests run (see the module docs).
pub fn dsh_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("DSH_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> -> target/<profile>/dsh
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps");
    let p = profile_dir.join("dsh");
    assert!(
        p.is_file(),
        "{} is missing: build it first with `cargo build -p dsh-cli` (or run `cargo test --workspace`), \
         or set DSH_BIN",
        p.display()
    );
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_that_ends_gives_its_output() {
        let out = output_within(
            Command::new("sh").args(["-c", "echo out; echo err >&2"]),
            RUN_LIMIT,
        );
        assert_eq!(
            (stdout(&out), stderr(&out)),
            ("out\n".into(), "err\n".into())
        );
    }

    #[test]
    #[should_panic(expected = "was killed")]
    fn a_process_that_hangs_fails_the_test() {
        output_within(
            Command::new("sleep").arg("600"),
            std::time::Duration::from_millis(100),
        );
    }
}
