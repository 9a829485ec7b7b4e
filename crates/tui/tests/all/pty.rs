//! The harness of the end-to-end tests: the real `dsh` binary (`dsh_bin()`) in a
//! pseudo-terminal (portable-pty), its screen read through a terminal emulator (vt100), against
//! the testkit server. Every wait is on the screen's contents or on recorded requests (a
//! condition variable signalled per read, with a generous deadline), never a sleep.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use dsh_test_harness::e2e::{Env, dsh_bin};
use dsh_testkit::{Completion, Reply, Usage};
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};

pub(crate) const DEADLINE: Duration = Duration::from_secs(60);
const DSR: &[u8] = b"\x1b[6n";

struct Screen {
    parser: vt100::Parser,
    /// Everything the program wrote, as text (the scrollback too).
    raw: String,
    closed: bool,
}

pub(crate) struct Tui {
    child: Box<dyn Child + Send + Sync>,
    /// The terminal's side of the pty (`None` once hung up).
    master: Option<Box<dyn MasterPty + Send>>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    screen: Arc<(Mutex<Screen>, Condvar)>,
    /// Set to make the reader drop its end of the pty after its next read ([`Tui::hang_up`]).
    hanging_up: Arc<AtomicBool>,
}

impl Tui {
    pub(crate) fn spawn(env: &Env, args: &[&str], cols: u16, rows: u16) -> Tui {
        Self::spawn_with(env, args, cols, rows, &[])
    }

    pub(crate) fn spawn_with(
        env: &Env,
        args: &[&str],
        cols: u16,
        rows: u16,
        vars: &[(&str, &str)],
    ) -> Tui {
        let mut cmd = CommandBuilder::new(dsh_bin());
        cmd.arg("--patch");
        cmd.arg(Self::titles_off(env));
        cmd.args(args);
        Self::spawn_cmd(env, cmd, cols, rows, vars)
    }

    /// `bash -c script` in the pty, with `$DSH` the binary and `$TITLES_OFF` the patch that turns
    /// the title side request off (so `"$DSH" --patch "$TITLES_OFF" …` runs dsh as `spawn` does).
    pub(crate) fn spawn_shell(
        env: &Env,
        script: &str,
        cols: u16,
        rows: u16,
        vars: &[(&str, &str)],
    ) -> Tui {
        let mut cmd = CommandBuilder::new("bash");
        cmd.args(["--norc", "--noprofile", "-c", script]);
        let titles = Self::titles_off(env);
        let dsh = dsh_bin();
        let mut all: Vec<(&str, &str)> = vec![
            ("DSH", dsh.to_str().unwrap()),
            ("TITLES_OFF", titles.to_str().unwrap()),
        ];
        all.extend_from_slice(vars);
        Self::spawn_cmd(env, cmd, cols, rows, &all)
    }

    /// The scripted replies are served in order; the TUI's model-title side request would take
    /// one of them, so these tests turn it off (titles are tested in `titles`).
    fn titles_off(env: &Env) -> std::path::PathBuf {
        env.patch(
            "titles-off.yaml",
            "plugins:\n  - id: session-title\n    name: session-title\n    config:\n      llm: false\n",
        )
    }

    fn spawn_cmd(
        env: &Env,
        mut cmd: CommandBuilder,
        cols: u16,
        rows: u16,
        vars: &[(&str, &str)],
    ) -> Tui {
        let pty = native_pty_system();
        let pair = pty
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        cmd.env_clear();
        cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        cmd.env("HOME", env.home.path());
        cmd.env("DSH_HOME", env.home.path());
        cmd.env("DEEPSEEK_API_KEY", "sk-test-key");
        cmd.env("DEEPSEEK_BASE_URL", env.server().base_url());
        cmd.env("TERM", "xterm-256color");
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.cwd(env.work.path());
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer: Arc<Mutex<Box<dyn Write + Send>>> =
            Arc::new(Mutex::new(pair.master.take_writer().unwrap()));
        let screen = Arc::new((
            Mutex::new(Screen {
                parser: vt100::Parser::new(nz(rows), nz(cols), 0),
                raw: String::new(),
                closed: false,
            }),
            Condvar::new(),
        ));
        let (s, w) = (screen.clone(), writer.clone());
        let hanging_up = Arc::new(AtomicBool::new(false));
        let hang = hanging_up.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            // Progress through a cursor-position query (`ESC [ 6 n`), kept across reads.
            let mut matched = 0usize;
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let bytes = &buf[..n];
                let mut st = s.0.lock().unwrap();
                // Answer cursor-position queries (crossterm asks when it opens or resizes the
                // inline viewport) as a terminal would, at the point of the query.
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
                        let answer = format!("\x1b[{};{}R", row + 1, col + 1);
                        let _ = w.lock().unwrap().write_all(answer.as_bytes());
                    }
                }
                st.parser.process(&bytes[from..]);
                st.raw.push_str(&String::from_utf8_lossy(bytes));
                s.1.notify_all();
                if hang.load(Ordering::SeqCst) {
                    break;
                }
            }
            s.0.lock().unwrap().closed = true;
            s.1.notify_all();
        });
        Tui {
            child,
            master: Some(pair.master),
            writer,
            screen,
            hanging_up,
        }
    }

    /// Everything the program wrote so far, as text.
    pub(crate) fn raw(&self) -> String {
        self.screen.0.lock().unwrap().raw.clone()
    }

    /// The emulator's modes: (cursor hidden, alternate screen, bracketed paste).
    pub(crate) fn modes(&self) -> (bool, bool, bool) {
        let st = self.screen.0.lock().unwrap();
        let s = st.parser.screen();
        (s.hide_cursor(), s.alternate_screen(), s.bracketed_paste())
    }

    /// Waits for the program's exit; returns its status.
    pub(crate) fn wait_exit(&mut self) -> portable_pty::ExitStatus {
        let screen = self.contents();
        wait_exit(&mut self.child, &screen)
    }

    /// The visible screen as text.
    pub(crate) fn contents(&self) -> String {
        self.screen.0.lock().unwrap().parser.screen().contents()
    }

    /// Waits until the visible screen satisfies `pred`; returns it.
    pub(crate) fn wait_screen(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        let (lock, cv) = &*self.screen;
        let mut st = lock.lock().unwrap();
        loop {
            let text = st.parser.screen().contents();
            if pred(&text) {
                return text;
            }
            let now = Instant::now();
            let raw_tail: String = {
                let chars: Vec<char> = st.raw.chars().collect();
                chars[chars.len().saturating_sub(3000)..].iter().collect()
            };
            assert!(
                now < deadline && !st.closed,
                "timed out waiting for {what}; screen:\n{text}\n--- output tail (escaped):\n{raw_tail:?}"
            );
            st = cv.wait_timeout(st, deadline - now).unwrap().0;
        }
    }

    pub(crate) fn wait_for(&self, needle: &str) -> String {
        self.wait_screen(needle, |s| s.contains(needle))
    }

    pub(crate) fn send(&self, keys: &str) {
        let mut w = self.writer.lock().unwrap();
        w.write_all(keys.as_bytes()).unwrap();
        w.flush().unwrap();
    }

    pub(crate) fn resize(&self, cols: u16, rows: u16) {
        self.screen
            .0
            .lock()
            .unwrap()
            .parser
            .screen_mut()
            .set_size(nz(rows), nz(cols));
        self.master
            .as_ref()
            .expect("the terminal was hung up")
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
    }

    /// Closes the terminal (its window closed): every descriptor of the pty's terminal side
    /// goes, so the program's reads and writes fail from now on. Waits for the exit and returns
    /// its status.
    pub(crate) fn hang_up(mut self) -> portable_pty::ExitStatus {
        let screen = self.contents();
        // The reader holds a descriptor of its own: it lets it go after its next read, which a
        // resize brings (the program redraws).
        self.hanging_up.store(true, Ordering::SeqCst);
        let (cols, rows) = {
            let st = self.screen.0.lock().unwrap();
            let (rows, cols) = st.parser.screen().size();
            (cols.get(), rows.get())
        };
        self.resize(cols + 1, rows);
        {
            let (lock, cv) = &*self.screen;
            let mut st = lock.lock().unwrap();
            let deadline = Instant::now() + DEADLINE;
            while !st.closed {
                assert!(Instant::now() < deadline, "the reader did not let go");
                st = cv.wait_timeout(st, deadline - Instant::now()).unwrap().0;
            }
        }
        self.master = None;
        self.writer = Arc::new(Mutex::new(Box::new(std::io::sink())));
        wait_exit(&mut self.child, &screen)
    }

    pub(crate) fn wait_exit_ok(mut self) {
        let screen = self.contents();
        let status = wait_exit(&mut self.child, &screen);
        assert!(status.success(), "dsh exited with {status:?}");
    }

    /// Ctrl-D on the empty composer; waits for the exit and returns all output.
    pub(crate) fn quit(mut self) -> String {
        self.send("\x04");
        let screen = self.contents();
        let status = wait_exit(&mut self.child, &screen);
        let (lock, cv) = &*self.screen;
        let mut st = lock.lock().unwrap();
        let deadline = Instant::now() + DEADLINE;
        while !st.closed && Instant::now() < deadline {
            st = cv.wait_timeout(st, Duration::from_secs(1)).unwrap().0;
        }
        assert!(status.success(), "dsh exited with {status:?}:\n{}", st.raw);
        st.raw.clone()
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// Waits for the exit (a helper thread; the deadline fails the test instead of hanging it).
fn wait_exit(child: &mut Box<dyn Child + Send + Sync>, screen: &str) -> portable_pty::ExitStatus {
    let mut killer = child.clone_killer();
    let pid = child.process_id();
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if done_rx.recv_timeout(DEADLINE).is_err() {
            let _ = killer.kill();
            let _ = tx.send(pid);
        }
    });
    let status = child.wait().unwrap();
    let _ = done_tx.send(());
    assert!(
        rx.try_recv().is_err(),
        "dsh did not exit after quitting; screen:\n{screen}"
    );
    status
}

fn nz(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap()
}

pub(crate) fn text_reply(text: &str) -> Reply {
    Completion::new()
        .text(text)
        .chars_per_delta(7)
        .usage(Usage::new(1000, 50).cache_hit(800))
        .reply()
}

pub(crate) fn tool_reply(name: &str, args: &str) -> Reply {
    Completion::new()
        .tool_call(name, args)
        .usage(Usage::new(900, 20).cache_hit(500))
        .reply()
}
