//! The interactive UI's budgets on the real binary in a pseudo-terminal (portable-pty, the
//! screen read through vt100), against the mock: spawn to first frame, key-to-screen with a
//! 10,000-line transcript, a streamed 100 KB answer (50 KB vs 100 KB: linear total work), peak
//! RSS with that transcript, and CPU while idle.

use std::io::{Read, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use dsh_testkit::{Completion, Usage};
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};

use crate::report::{Group, Row};
use crate::run::World;

const DEADLINE: Duration = Duration::from_secs(120);
const COLS: u16 = 120;
const ROWS: u16 = 40;
const NZ_COLS: std::num::NonZeroU16 = std::num::NonZeroU16::new(COLS).unwrap();
const NZ_ROWS: std::num::NonZeroU16 = std::num::NonZeroU16::new(ROWS).unwrap();
const DSR: &[u8] = b"\x1b[6n";

struct Screen {
    parser: vt100::Parser,
    closed: bool,
}

/// The real `dsh` in a pseudo-terminal.
struct Pty {
    child: Box<dyn Child + Send + Sync>,
    _master: Box<dyn MasterPty + Send>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    screen: Arc<(Mutex<Screen>, Condvar)>,
}

impl Pty {
    fn spawn(dsh: &std::path::Path, world: &World, args: &[&str]) -> Result<Pty> {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| anyhow!("openpty: {e}"))?;
        // The scripted replies are served in order: the model-made title's side request would
        // take one, so titles come from the first prompt here.
        let titles_off = world.home.path().join("titles-off.yaml");
        std::fs::write(
            &titles_off,
            "plugins:\n  - id: session-title\n    name: session-title\n    config:\n      llm: false\n",
        )?;
        let mut cmd = CommandBuilder::new(dsh);
        cmd.arg("--patch");
        cmd.arg(&titles_off);
        cmd.args(args);
        cmd.env_clear();
        cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        cmd.env("HOME", world.home.path());
        cmd.env("DSH_HOME", world.home.path());
        cmd.env("DEEPSEEK_API_KEY", "sk-bench");
        cmd.env("DEEPSEEK_BASE_URL", world.server.base_url());
        cmd.env("TERM", "xterm-256color");
        cmd.cwd(&world.work);
        let child = pair
            .slave
            .spawn_command(cmd)
            .map_err(|e| anyhow!("spawning dsh in a pty: {e}"))?;
        drop(pair.slave);
        let mut reader = pair
            .master
            .try_clone_reader()
            .map_err(|e| anyhow!("pty reader: {e}"))?;
        let writer: Arc<Mutex<Box<dyn Write + Send>>> = Arc::new(Mutex::new(
            pair.master
                .take_writer()
                .map_err(|e| anyhow!("pty writer: {e}"))?,
        ));
        let screen = Arc::new((
            Mutex::new(Screen {
                parser: vt100::Parser::new(NZ_ROWS, NZ_COLS, 0),
                closed: false,
            }),
            Condvar::new(),
        ));
        let (s, w) = (screen.clone(), writer.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            let mut matched = 0usize;
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let bytes = &buf[..n];
                let Ok(mut st) = s.0.lock() else { break };
                // Answer cursor-position queries as a terminal would, at the point of the query.
                let mut from = 0;
                for (i, b) in bytes.iter().enumerate() {
                    matched = if *b == DSR[matched] {
                        matched + 1
                    } else if *b == DSR[0] {
                        1
                    } else {
                        0
                    };
                    if matched == DSR.len() {
                        matched = 0;
                        st.parser.process(&bytes[from..=i]);
                        from = i + 1;
                        let (row, col) = st.parser.screen().cursor_position();
                        if let Ok(mut w) = w.lock() {
                            let _ =
                                w.write_all(format!("\x1b[{};{}R", row + 1, col + 1).as_bytes());
                        }
                    }
                }
                st.parser.process(&bytes[from..]);
                s.1.notify_all();
            }
            if let Ok(mut st) = s.0.lock() {
                st.closed = true;
            }
            s.1.notify_all();
        });
        Ok(Pty {
            child,
            _master: pair.master,
            writer,
            screen,
        })
    }

    /// Waits until the visible screen satisfies `pred`; returns when it first did.
    fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> Result<Instant> {
        let deadline = Instant::now() + DEADLINE;
        let (lock, cv) = &*self.screen;
        let mut st = lock.lock().map_err(|_| anyhow!("screen lock poisoned"))?;
        loop {
            if pred(&st.parser.screen().contents()) {
                return Ok(Instant::now());
            }
            let now = Instant::now();
            if now >= deadline || st.closed {
                bail!(
                    "timed out waiting for {what}; screen:\n{}",
                    st.parser.screen().contents()
                );
            }
            st = cv
                .wait_timeout(st, deadline - now)
                .map_err(|_| anyhow!("screen lock poisoned"))?
                .0;
        }
    }

    fn send(&self, keys: &str) -> Result<Instant> {
        let mut w = self.writer.lock().map_err(|_| anyhow!("writer poisoned"))?;
        let t = Instant::now();
        w.write_all(keys.as_bytes())?;
        w.flush()?;
        Ok(t)
    }

    fn pid(&self) -> Result<u32> {
        self.child.process_id().context("no pid of dsh")
    }

    /// Ctrl-C (clears what is typed), Ctrl-D on the empty composer, then the exit.
    fn quit(mut self) -> Result<()> {
        self.send("\x03")?;
        self.wait("the empty composer", |s| s.contains("Ask dsh anything"))?;
        self.send("\x04")?;
        let status = self.child.wait()?;
        if !status.success() {
            bail!("dsh exited with {status:?}");
        }
        Ok(())
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// `VmHWM` (peak RSS) of `pid`, KiB.
fn peak_rss_kib(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// utime + stime of `pid` in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn idle(s: &str) -> bool {
    s.contains("Ask dsh anything") && !s.contains("● working")
}

/// A markdown answer of about `bytes`: paragraphs of a long line each.
fn answer(bytes: usize) -> String {
    let para = "Some streamed **markdown** with `code` and words to wrap around the line. ";
    let mut text = String::new();
    let mut n = 0;
    while text.len() < bytes {
        text.push_str(para);
        n += 1;
        if n % 4 == 0 {
            text.push_str("\n\n");
        }
    }
    text.push_str("\n\nEND-OF-ANSWER");
    text
}

/// Spawn to the first frame.
fn first_frame(dsh: &std::path::Path) -> Result<f64> {
    let world = World::new()?;
    let start = Instant::now();
    let pty = Pty::spawn(dsh, &world, &[])?;
    let at = pty.wait("the first frame", |s| s.contains("Ask dsh anything"))?;
    pty.quit()?;
    Ok((at - start).as_secs_f64() * 1e3)
}

/// Prompt to the whole answer on screen, for an answer of `bytes` streamed in 16-char deltas.
fn stream(dsh: &std::path::Path, bytes: usize) -> Result<f64> {
    let world = World::new()?;
    world.server.push(
        Completion::new()
            .text(&answer(bytes))
            .chars_per_delta(16)
            .usage(Usage::new(1000, 50))
            .reply(),
    );
    let pty = Pty::spawn(dsh, &world, &[])?;
    pty.wait("the first frame", |s| s.contains("Ask dsh anything"))?;
    let start = pty.send("go\r")?;
    let at = pty.wait("the end of the answer", |s| {
        s.contains("END-OF-ANSWER") && idle(s)
    })?;
    pty.quit()?;
    Ok((at - start).as_secs_f64() * 1e3)
}

/// A foreground sub-agent's live card: prompt to the card showing the child's finished bash
/// call (two model round trips and a bash run included), then Ctrl+O to the expanded card.
fn live_card(dsh: &std::path::Path) -> Result<(f64, f64)> {
    let world = World::new()?;
    let gate = dsh_testkit::Gate::new();
    world.server.push_all([
        Completion::new()
            .tool_call(
                "subagent",
                r#"{"description":"Scan the repo","prompt":"look around"}"#,
            )
            .usage(Usage::new(1000, 20))
            .reply(),
        Completion::new()
            .tool_call(
                "bash",
                r#"{"command":"echo child-step","description":"Step"}"#,
            )
            .usage(Usage::new(1000, 20))
            .reply(),
        dsh_testkit::Reply::sse()
            .gate(&gate)
            .bytes(Completion::new().text("child found it").to_bytes()),
        Completion::new()
            .text("Parent done.")
            .usage(Usage::new(1000, 20))
            .reply(),
    ]);
    let pty = Pty::spawn(dsh, &world, &[])?;
    pty.wait("the first frame", |s| s.contains("Ask dsh anything"))?;
    let start = pty.send("delegate\r")?;
    let card = pty.wait("the live card", |s| {
        s.lines()
            .any(|l| l.contains("⧉ Scan the repo") && l.contains("1 tool") && !l.contains('▸'))
    })?;
    let sent = pty.send("\x0f")?;
    let expanded = pty.wait("the expanded card", |s| {
        s.contains("    ● bash echo child-step")
    })?;
    gate.open();
    pty.wait("the end of the turn", |s| {
        s.contains("Parent done.") && idle(s)
    })?;
    pty.quit()?;
    Ok((
        (card - start).as_secs_f64() * 1e3,
        (expanded - sent).as_secs_f64() * 1e3,
    ))
}

/// Plan mode: prompt to the plan's accept prompt on screen (one model round trip), then `y` to
/// the accepted card.
fn plan_prompt(dsh: &std::path::Path) -> Result<(f64, f64)> {
    let world = World::new()?;
    world.server.push_all([
        Completion::new()
            .tool_call(
                "exit_plan_mode",
                &serde_json::json!({"plan": "## Steps\n\n1. Read the code\n2. Change it"})
                    .to_string(),
            )
            .usage(Usage::new(1000, 20))
            .reply(),
        Completion::new()
            .text("Carrying it out.")
            .usage(Usage::new(1000, 20))
            .reply(),
    ]);
    let pty = Pty::spawn(dsh, &world, &[])?;
    pty.wait("the first frame", |s| s.contains("Ask dsh anything"))?;
    pty.send("\x1b[Z")?;
    pty.wait("plan mode on", |s| s.contains("◇ plan mode on"))?;
    let start = pty.send("plan it\r")?;
    let asked = pty.wait("the plan prompt", |s| {
        s.contains("⚠ accept this plan?") && s.contains("2. Change it")
    })?;
    let sent = pty.send("y")?;
    let accepted = pty.wait("the accepted plan", |s| s.contains("plan accepted"))?;
    pty.wait("the end of the turn", |s| {
        s.contains("Carrying it out.") && idle(s)
    })?;
    pty.quit()?;
    Ok((
        (asked - start).as_secs_f64() * 1e3,
        (accepted - sent).as_secs_f64() * 1e3,
    ))
}

/// The TUI rows.
pub fn rows(
    dsh: &std::path::Path,
    quick: bool,
    iterations: u32,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let n = if quick { 1 } else { iterations.max(3) } as usize;
    let mut g = Group::new(rows, "tui");
    let mut first = Vec::new();
    for _ in 0..n {
        first.push(first_frame(dsh)?);
    }
    g.limit("spawn to first frame (pty)", &first, "ms", 1, 30.0);

    // A 10,000-line transcript (a fenced block: one screen line per source line), then keys.
    let world = World::new()?;
    let mut code = String::from("```\n");
    for i in 0..10_000 {
        code.push_str(&format!("line {i} of the long transcript\n"));
    }
    code.push_str("```\n\nEND-OF-HISTORY");
    world.server.push(
        Completion::new()
            .text(&code)
            .chars_per_delta(4096)
            .usage(Usage::new(1000, 50))
            .reply(),
    );
    let pty = Pty::spawn(dsh, &world, &["show it"])?;
    pty.wait("the 10,000 lines", |s| {
        s.contains("END-OF-HISTORY") && idle(s)
    })?;
    let pid = pty.pid()?;
    // Idle: no redraw, no CPU.
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(if quick { 1 } else { 3 }));
    let after = cpu_ticks(pid);
    let mut keys = Vec::new();
    let mut typed = String::new();
    for i in 0..if quick { 20 } else { 200 } {
        let c = char::from(b'a' + (i % 26) as u8);
        typed.push(c);
        let want = format!("› {typed}");
        let sent = pty.send(&c.to_string())?;
        let seen = pty.wait("the typed key", |s| s.contains(&want))?;
        keys.push((seen - sent).as_secs_f64() * 1e3);
        if typed.len() >= 60 {
            // Clear the composer (Ctrl-C once clears it), keep typing.
            pty.send("\x03")?;
            pty.wait("the cleared composer", |s| s.contains("Ask dsh anything"))?;
            typed.clear();
        }
    }
    g.limit(
        "key-to-screen with a 10,000-line transcript",
        &keys,
        "ms",
        2,
        16.0,
    );
    let mut sorted = keys.clone();
    sorted.sort_by(f64::total_cmp);
    if let Some(p99) = sorted.get(sorted.len() * 99 / 100) {
        g.text("key-to-screen p99", &format!("{p99:.2} ms"));
    }
    // Issue 32: no worse than before the protocol work (21.0 MB on 2026-12-03); the earlier
    // 40 MB let a 25.7 MB figure pass.
    match peak_rss_kib(pid) {
        Some(kib) => g.limit(
            "peak RSS with that transcript",
            &[kib / 1024.0],
            "MB",
            1,
            21.0,
        ),
        None => g.text("peak RSS with that transcript", "unreadable"),
    }
    match (before, after) {
        (Some(b), Some(a)) => g.exact(
            "CPU while idle (clock ticks)",
            "0 (≤ 1)",
            &format!("{}", a - b),
            a - b <= 1,
        ),
        _ => g.text("CPU while idle", "unreadable"),
    }
    pty.quit()?;

    let (mut half, mut full) = (Vec::new(), Vec::new());
    for _ in 0..n {
        half.push(stream(dsh, 50 * 1024)?);
        full.push(stream(dsh, 100 * 1024)?);
    }
    g.info("streamed 50 KB answer, prompt to last line", &half, "ms", 0);
    g.info(
        "streamed 100 KB answer, prompt to last line",
        &full,
        "ms",
        0,
    );
    // A ratio of two timings is a timing budget, not an exact one: one noisy sample of each in
    // a quick run (3.02 seen once in CI) must not fail the run; a quadratic renderer (≈ 4) is
    // "over", and fails beyond the wide margin in a full run.
    let ratio = crate::stats::Stat::median_of(&full) / crate::stats::Stat::median_of(&half);
    g.limit_as(
        "100 KB / 50 KB time (linear ≈ 2)",
        &[ratio],
        "×",
        2,
        3.0,
        "under 3 × (median)",
    );

    let (mut card, mut expand) = (Vec::new(), Vec::new());
    let (mut asked, mut accepted) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let (c, e) = live_card(dsh)?;
        card.push(c);
        expand.push(e);
        let (a, y) = plan_prompt(dsh)?;
        asked.push(a);
        accepted.push(y);
    }
    g.info(
        "sub-agent live card: prompt to the child's finished call on it",
        &card,
        "ms",
        0,
    );
    g.limit(
        "sub-agent live card: Ctrl+O to the expanded card",
        &expand,
        "ms",
        2,
        16.0,
    );
    g.info("plan mode: prompt to the accept prompt", &asked, "ms", 0);
    g.info("plan mode: y to the accepted card", &accepted, "ms", 1);
    Ok(())
}
