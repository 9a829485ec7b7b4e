//! Running `dsh` against an in-process mock server with a fresh `DSH_HOME`, optionally under the
//! measuring probe (this binary re-executed as `dsh-bench __probe`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dsh_testkit::MockServer;
use serde::{Deserialize, Serialize};

/// The API key every run uses (the mock does not check it).
const API_KEY: &str = "sk-bench";

/// A temporary home, a temporary working directory and a mock server: one `dsh` run's world.
pub struct World {
    /// `DSH_HOME` (and `HOME`): sessions are stored under `sessions/` here.
    pub home: tempfile::TempDir,
    work_dir: tempfile::TempDir,
    /// The canonical working directory the run starts in.
    pub work: PathBuf,
    /// The scripted DeepSeek-shaped server (its own thread and runtime).
    pub server: MockServer,
}

impl World {
    /// A fresh world with an empty reply queue.
    pub fn new() -> Result<Self> {
        let home = tempfile::tempdir().context("creating a temporary DSH_HOME")?;
        let fifo = home.path().join(RSS_FIFO);
        let made = Command::new("mkfifo")
            .arg("-m")
            .arg("666")
            .arg(&fifo)
            .status()
            .context("running mkfifo")?;
        if !made.success() {
            bail!("mkfifo {} failed ({made})", fifo.display());
        }
        let work_dir = tempfile::tempdir().context("creating a temporary working directory")?;
        let work = work_dir
            .path()
            .canonicalize()
            .context("resolving the temporary working directory")?;
        Ok(Self {
            home,
            work_dir,
            work,
            server: MockServer::start_blocking(),
        })
    }

    /// The temporary working directory as created (not canonicalised).
    pub fn work_dir(&self) -> &Path {
        self.work_dir.path()
    }

    /// `program` with this world's environment: nothing inherited but `PATH`.
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("DSH_HOME", self.home.path())
            .env("DEEPSEEK_API_KEY", API_KEY)
            .env("DEEPSEEK_BASE_URL", self.server.base_url())
            .current_dir(&self.work)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }
}

impl World {
    /// `program` with this world's environment and piped stdin/stdout (stderr discarded): a
    /// long-lived front end (`dsh --profile sdk`, `dsh acp`) driven over its stdio.
    pub fn piped(&self, program: &Path) -> Command {
        let mut c = self.command(program);
        c.stdin(Stdio::piped()).stderr(Stdio::null());
        c
    }
}

/// The FIFO in a world's home on which [`RssServer`] answers (the bench's `RSS_COMMAND` reads
/// it as `$HOME/.dsh-bench-rss`).
pub const RSS_FIFO: &str = ".dsh-bench-rss";

/// Numbers the `/proc/PID/smaps` copies taken when `DSH_BENCH_SMAPS` names a directory.
static SMAPS_DUMPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Answers each reader of a world's RSS FIFO with the `VmHWM`/`VmRSS` lines of the running
/// dsh's own `/proc/PID/status`. A command in dsh's sandbox cannot read them itself: `bwrap`
/// gives it a PID namespace of its own, where `$PPID` is the warm sandbox's supervisor and dsh
/// is not visible at all.
struct RssServer {
    stop: Arc<AtomicBool>,
    fifo: PathBuf,
    thread: std::thread::JoinHandle<()>,
}

impl RssServer {
    /// Serves for the process `child` spawned by [`run_dsh`] (the probe when `probed`: dsh is
    /// then its only child).
    fn start(fifo: PathBuf, child: u32, probed: bool) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, fifo) = (stop.clone(), fifo.clone());
            std::thread::spawn(move || {
                // Opening for writing waits for a reader (a command's `cat`, or `stop`).
                while let Ok(mut w) = std::fs::OpenOptions::new().write(true).open(&fifo) {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let pid = if probed {
                        only_child(child)
                    } else {
                        Some(child)
                    };
                    let status = pid
                        .and_then(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
                        .unwrap_or_default();
                    let lines: String = status
                        .lines()
                        .filter(|l| l.starts_with("VmHWM:") || l.starts_with("VmRSS:"))
                        .map(|l| format!("{l}\n"))
                        .collect();
                    let _ = std::io::Write::write_all(&mut w, lines.as_bytes());
                    // A copy of the mappings at this probe, for looking into where the pages are.
                    if let (Some(dir), Some(p)) = (std::env::var_os("DSH_BENCH_SMAPS"), pid) {
                        let n = SMAPS_DUMPS.fetch_add(1, Ordering::SeqCst);
                        let to = PathBuf::from(dir).join(format!("smaps.{p}.{n:03}"));
                        let _ = std::fs::copy(format!("/proc/{p}/smaps"), &to);
                        let _ = dump_pagemap(p, &to.with_extension(format!("{n:03}.pagemap")));
                    }
                }
            })
        };
        Self { stop, fifo, thread }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        if !self.thread.is_finished() {
            // Releases the thread's pending open (it sees `stop` and returns).
            let _ = std::fs::File::open(&self.fifo);
        }
        let _ = self.thread.join();
    }
}

/// Kills a process (`SIGKILL`) that is still running when its limit passes.
struct Watchdog {
    done: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<bool>,
}

impl Watchdog {
    fn start(pid: u32, limit: Duration) -> Self {
        let (done, ended) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            if ended.recv_timeout(limit) != Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                return false;
            }
            let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            true
        });
        Self { done, thread }
    }

    /// Ends the watch once the process was reaped: whether it had to be killed.
    fn stop(self) -> bool {
        let _ = self.done.send(());
        self.thread.join().unwrap_or(false)
    }
}

/// The first child of process `pid` (`/proc/PID/task/PID/children`).
fn only_child(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// What the probe reports about the child it ran.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeReport {
    /// Wall time from spawn to reaped exit, nanoseconds.
    pub wall_ns: u64,
    /// Peak resident set size of the largest process in the child's tree, KiB
    /// (`getrusage(RUSAGE_CHILDREN).ru_maxrss`).
    pub max_rss_kib: i64,
    /// Bytes passed to `write(2)`-family calls by the child and its reaped descendants
    /// (`wchar` of `/proc/self/io` after the wait), if readable.
    pub wchar: Option<u64>,
    /// The child's exit code (`None`: killed by a signal).
    pub exit_code: Option<i32>,
}

/// How one `dsh` run went.
#[derive(Debug)]
pub struct RunOutput {
    /// Just before the bench spawned the process (the probe, when probed).
    pub spawned_at: Instant,
    /// Wall time: the probe's own spawn-to-exit time when probed, else the bench's.
    pub wall: Duration,
    /// The probe's measurements (`None` when not probed).
    pub probe: Option<ProbeReport>,
    /// Captured standard output of `dsh`.
    pub stdout: String,
}

/// Runs `dsh args..` in `world`; with `probe`, under `dsh-bench __probe` for wall time, peak RSS
/// and write volume. Fails when `dsh` exits non-zero, with its stderr.
pub fn run_dsh(dsh: &Path, world: &World, args: &[&str], probe: bool) -> Result<RunOutput> {
    run_dsh_limited(dsh, world, args, probe, None)
}

/// [`run_dsh`] without the probe, killed (`SIGKILL`) when it runs past `limit`: a composition
/// that never starts fails its row instead of hanging the bench. The deadline is kept by a
/// thread of the bench, not by a `timeout` process in front of `dsh`: that one's own fork and
/// exec (~0.6 ms) landed inside a spawn → first request figure.
pub fn run_dsh_within(
    dsh: &Path,
    world: &World,
    args: &[&str],
    limit: Duration,
) -> Result<RunOutput> {
    run_dsh_limited(dsh, world, args, false, Some(limit))
}

fn run_dsh_limited(
    dsh: &Path,
    world: &World,
    args: &[&str],
    probe: bool,
    limit: Option<Duration>,
) -> Result<RunOutput> {
    let report_file = tempfile::NamedTempFile::new().context("creating the probe report file")?;
    let mut cmd = if probe {
        let me = std::env::current_exe().context("locating the dsh-bench binary for the probe")?;
        let mut c = world.command(&me);
        c.arg("__probe").arg(report_file.path()).arg(dsh);
        c
    } else {
        world.command(dsh)
    };
    cmd.args(args);
    let spawned_at = Instant::now();
    let child = cmd
        .spawn()
        .with_context(|| format!("running {}", dsh.display()))?;
    let rss = RssServer::start(world.home.path().join(RSS_FIFO), child.id(), probe);
    let watchdog = limit.map(|limit| Watchdog::start(child.id(), limit));
    let out = child.wait_with_output();
    let overran = watchdog.is_some_and(Watchdog::stop);
    rss.stop();
    if overran {
        bail!(
            "`dsh {}` ran past its {:?} limit and was killed",
            args.join(" "),
            limit.unwrap_or_default()
        );
    }
    let out = out.with_context(|| format!("running {}", dsh.display()))?;
    let bench_wall = spawned_at.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let probe = if probe {
        let text =
            std::fs::read_to_string(report_file.path()).context("reading the probe report")?;
        let report: ProbeReport = serde_json::from_str(&text).with_context(|| {
            format!(
                "the probe wrote no report (status {}): {stderr}",
                out.status
            )
        })?;
        if report.exit_code != Some(0) {
            bail!(
                "`dsh {}` exited with {:?}: {stderr}",
                args.join(" "),
                report.exit_code
            );
        }
        Some(report)
    } else {
        None
    };
    if !out.status.success() {
        bail!("`dsh {}` failed ({}): {stderr}", args.join(" "), out.status);
    }
    let wall = probe
        .as_ref()
        .map_or(bench_wall, |p| Duration::from_nanos(p.wall_ns));
    Ok(RunOutput {
        spawned_at,
        wall,
        probe,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    })
}

/// The probe: `dsh-bench __probe REPORT PROGRAM ARGS..` runs PROGRAM (inheriting stdio and
/// environment), waits for it, and writes a [`ProbeReport`] as JSON to REPORT. Measuring in a
/// separate process keeps `RUSAGE_CHILDREN` (a maximum over every child ever reaped) about this
/// one run.
pub fn probe_main(args: &[String]) -> Result<()> {
    let [report, program, rest @ ..] = args else {
        bail!("usage: dsh-bench __probe REPORT PROGRAM [ARGS..]");
    };
    let start = Instant::now();
    let status = Command::new(program)
        .args(rest)
        .status()
        .with_context(|| format!("spawning {program}"))?;
    let wall = start.elapsed();
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .context("getrusage(RUSAGE_CHILDREN)")?;
    let wchar = std::fs::read_to_string("/proc/self/io").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("wchar:"))
            .and_then(|v| v.trim().parse().ok())
    });
    let out = ProbeReport {
        wall_ns: u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX),
        max_rss_kib: usage.max_rss(),
        wchar,
        exit_code: status.code(),
    };
    std::fs::write(report, serde_json::to_vec(&out)?)
        .with_context(|| format!("writing the probe report {report}"))?;
    Ok(())
}

/// Every regular file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The only stored session log (plain `.jsonl` or `.jsonl.zstd`) under `home/sessions`.
pub fn session_log(home: &Path) -> Result<PathBuf> {
    let logs: Vec<PathBuf> = files_under(&home.join("sessions"))
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".jsonl") || n.ends_with(".jsonl.zstd"))
        })
        .collect();
    match logs.as_slice() {
        [one] => Ok(one.clone()),
        other => bail!("expected one stored session log, found {}", other.len()),
    }
}

/// The plain JSONL text of a stored log (zstd frames decompressed).
pub fn log_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let plain = if path.extension().is_some_and(|x| x == "zstd") {
        dsh_session_jsonl::zstd::decompress_frames(&bytes)
            .with_context(|| format!("decompressing {}", path.display()))?
            .0
    } else {
        bytes
    };
    String::from_utf8(plain).with_context(|| format!("{} is not UTF-8", path.display()))
}

/// Turns the stored log at `path` into a plain `session.v4.jsonl` beside it (a plain log is
/// continued in plain); returns the plain path.
pub fn to_plain(path: &Path) -> Result<PathBuf> {
    if path.extension().is_none_or(|x| x != "zstd") {
        return Ok(path.to_path_buf());
    }
    let text = log_text(path)?;
    let plain = path.with_file_name("session.v4.jsonl");
    std::fs::write(&plain, text).with_context(|| format!("writing {}", plain.display()))?;
    std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
    Ok(plain)
}

/// The present bits of every page of `pid`'s mappings (from `/proc/PID/pagemap`), one line a
/// mapping: `start end perms name` and a string of `1`/`0`.
fn dump_pagemap(pid: u32, to: &Path) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let mut pm = std::fs::File::open(format!("/proc/{pid}/pagemap"))?;
    let mut out = String::new();
    for line in maps.lines() {
        let mut it = line.split_whitespace();
        let (Some(range), Some(perms)) = (it.next(), it.next()) else {
            continue;
        };
        let name = it.nth(3).unwrap_or("");
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        let pages = ((b - a) / 4096) as usize;
        let mut buf = vec![0u8; pages * 8];
        pm.seek(SeekFrom::Start(a / 4096 * 8))?;
        if pm.read_exact(&mut buf).is_err() {
            continue;
        }
        let bits: String = buf
            .chunks(8)
            .map(|c| if c[7] & 0x80 != 0 { '1' } else { '0' })
            .collect();
        out.push_str(&format!("{a:x} {b:x} {perms} {name} {bits}\n"));
    }
    std::fs::write(to, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_past_its_limit_is_killed_and_named() {
        let world = World::new().unwrap();
        let err = run_dsh_within(
            Path::new("sleep"),
            &world,
            &["30"],
            Duration::from_millis(200),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("ran past its 200ms limit and was killed"),
            "{err}"
        );
    }

    #[test]
    fn a_run_within_its_limit_is_not_killed() {
        let world = World::new().unwrap();
        let out =
            run_dsh_within(Path::new("echo"), &world, &["hi"], Duration::from_secs(20)).unwrap();
        assert_eq!(out.stdout, "hi\n");
    }
}
