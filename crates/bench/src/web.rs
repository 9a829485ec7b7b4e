//! `dsh web` (issue 38), server side, on a 1,000-turn stored session:
//!
//! - **The tail**: `GET /v1/sessions/{id}/events?tailTurns=50` (what the page opens with) timed
//!   from connect to the last byte of its `snapshot` (the page draws the transcript then), and
//!   the bytes of the stream up to it; the same for the whole replay (no `tailTurns`, what the
//!   page used before) and for one page of earlier turns (`?before=SEQ&tailTurns=50`, "Show
//!   earlier"), read to its end.
//! - **The assets**: the page and every asset it loads, as the server sends them (no
//!   compression; budget: under 150 KB transferred).
//!
//! The browser's figures (first contentful paint, the last page drawn) come from the browser
//! test's report (`crates/cli/tests/all/web.rs` prints them); this bench drives no browser.
//!
//! The session: `dsh` writes two turns (a text answer; a `bash` call and a markdown answer with a
//! code block), then the second turn is repeated up to 1,000 turns, as the browser test does.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use dsh_testkit::Completion;

use crate::report::{Group, Row};
use crate::run::{World, run_dsh, session_log};

/// The generated session.
const SESSION_ID: &str = "bench-web";
/// Its turns (the issue's budget is for a 1,000-turn session).
const TURNS: usize = 1_000;
/// Turns the page opens with and fetches per "Show earlier".
const PAGE_TURNS: usize = 50;
/// Bound on one read: a hang fails the run instead of the bench.
const BOUND: Duration = Duration::from_secs(120);

/// A `dsh web --no-open --listen 127.0.0.1:0` of one world, with a stored token for the API;
/// killed on drop.
struct Web {
    child: Child,
    addr: String,
    token: String,
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Web {
    fn start(dsh: &Path, world: &World) -> Result<Self> {
        let out = run_dsh(
            dsh,
            world,
            &["serve", "token", "create", "--name", "bench"],
            false,
        )
        .context("creating a token")?;
        let token = out.stdout.trim().to_owned();
        ensure!(!token.is_empty(), "dsh serve token create printed no token");
        let mut child = world
            .piped(dsh)
            .args(["web", "--no-open", "--listen", "127.0.0.1:0"])
            .spawn()
            .context("spawning dsh web")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .context("reading dsh web's login link")?;
        let addr = line
            .trim()
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .with_context(|| format!("dsh web printed no URL: {line:?}"))?
            .to_owned();
        Ok(Self { child, addr, token })
    }

    /// Sends `GET path` with the token; the reader positioned at the body, and its status.
    fn get(&self, path: &str) -> Result<(u16, bool, BufReader<TcpStream>)> {
        let mut s = TcpStream::connect(&self.addr).context("connecting to dsh web")?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(BOUND))?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
            self.addr, self.token
        )?;
        let mut r = BufReader::new(s);
        let mut status_line = String::new();
        r.read_line(&mut status_line)?;
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("no status line: {status_line:?}"))?;
        let mut chunked = false;
        loop {
            let mut h = String::new();
            r.read_line(&mut h)?;
            if h.trim().is_empty() {
                break;
            }
            let lower = h.to_ascii_lowercase();
            if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
        }
        Ok((status, chunked, r))
    }

    /// A whole body.
    fn body(&self, path: &str) -> Result<Vec<u8>> {
        let (status, chunked, mut r) = self.get(path)?;
        ensure!(status == 200, "GET {path} answered {status}");
        let mut body = Vec::new();
        if chunked {
            while let Some(chunk) = next_chunk(&mut r)? {
                body.extend_from_slice(&chunk);
            }
        } else {
            r.read_to_end(&mut body)?;
        }
        Ok(body)
    }
}

/// One chunk of a chunked body (`None` at its end).
fn next_chunk(r: &mut BufReader<TcpStream>) -> Result<Option<Vec<u8>>> {
    let mut size = String::new();
    if r.read_line(&mut size)? == 0 {
        return Ok(None);
    }
    let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
        .with_context(|| format!("a bad chunk size {size:?}"))?;
    if n == 0 {
        return Ok(None);
    }
    let mut chunk = vec![0; n + 2];
    r.read_exact(&mut chunk)?;
    chunk.truncate(n);
    Ok(Some(chunk))
}

/// One read of an event stream: connect → the end of its `snapshot` event (or of the stream).
struct StreamRead {
    /// Connect → the last byte of the snapshot (or the stream's end), ms.
    ms: f64,
    /// Body bytes up to there.
    bytes: usize,
    /// Events up to there (the snapshot included).
    events: usize,
    /// The seq of the first committed event (the `id:` of the first event).
    first_seq: Option<u64>,
}

/// Reads `path` (an events URL) to the end of its snapshot, or to its end when it has none.
fn read_stream(web: &Web, path: &str) -> Result<StreamRead> {
    let t0 = Instant::now();
    let (status, chunked, mut r) = web.get(path)?;
    ensure!(status == 200, "GET {path} answered {status}");
    ensure!(chunked, "GET {path}: the event stream is not chunked");
    let mut body: Vec<u8> = Vec::new();
    let mut searched: usize = 0;
    let mut snapshot: Option<usize> = None;
    while let Some(chunk) = next_chunk(&mut r)? {
        body.extend_from_slice(&chunk);
        // The snapshot is the last event of the replay: its blank line ends it.
        if snapshot.is_none() {
            let from = searched.saturating_sub(32);
            snapshot = find(&body[from..], b"event: snapshot\n").map(|at| from + at);
        }
        if let Some(at) = snapshot
            && let Some(end) = find(&body[at..], b"\n\n")
        {
            body.truncate(at + end + 2);
            break;
        }
        searched = body.len();
    }
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let text = String::from_utf8_lossy(&body);
    let events = text.lines().filter(|l| l.starts_with("event: ")).count();
    let first_seq = text
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .and_then(|id| id.split('.').next())
        .and_then(|s| s.parse().ok());
    Ok(StreamRead {
        ms,
        bytes: body.len(),
        events,
        first_seq,
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Has `dsh` write the two-turn template and repeats its second turn up to `TURNS`.
fn long_session(dsh: &Path, world: &World) -> Result<(usize, u64)> {
    world.server.push(Completion::new().text("Hello.").reply());
    let args = serde_json::json!({"command": "echo paged", "description": "Echo"}).to_string();
    world
        .server
        .push(Completion::new().tool_call("bash", &args).reply());
    world.server.push(
        Completion::new()
            .text("Done: **paged**.\n\n```rust\nfn main() { println!(\"hi\"); }\n```\n")
            .reply(),
    );
    for prompt in ["Turn 1", "Turn 2"] {
        run_dsh(
            dsh,
            world,
            &["exec", "--session", SESSION_ID, prompt],
            false,
        )
        .context("writing the template session")?;
    }
    let log = crate::run::to_plain(&session_log(world.home.path())?)?;
    let turns = crate::resume::generate_turns(&log, TURNS)?;
    let bytes = std::fs::metadata(&log)?.len();
    Ok((turns, bytes))
}

/// The page and the assets it loads (from `index.html` and the modules' imports), bytes each.
fn assets(web: &Web) -> Result<Vec<(String, usize)>> {
    let index = web.body("/")?;
    let mut out = vec![("/".to_owned(), index.len())];
    let mut todo: Vec<String> = refs(&String::from_utf8_lossy(&index));
    while let Some(path) = todo.pop() {
        if out.iter().any(|(p, _)| *p == path) {
            continue;
        }
        let body = web.body(&path)?;
        todo.extend(refs(&String::from_utf8_lossy(&body)));
        out.push((path, body.len()));
    }
    Ok(out)
}

/// `/assets/NAME` references and `./NAME.js` module imports in a text.
fn refs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("/assets/") {
        let name: String = text[i + 8..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
            .collect();
        if !name.is_empty() {
            out.push(format!("/assets/{name}"));
        }
    }
    for (i, _) in text.match_indices("from './") {
        let name: String = text[i + 8..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
            .collect();
        if name.ends_with(".js") {
            out.push(format!("/assets/{name}"));
        }
    }
    out
}

/// The rows of the web group.
pub fn rows(dsh: &Path, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let world = World::new()?;
    let (turns, log_bytes) = long_session(dsh, &world)?;
    if turns != TURNS {
        bail!("the generated session has {turns} turns, expected {TURNS}");
    }
    let web = Web::start(dsh, &world)?;
    let events = format!("/v1/sessions/{SESSION_ID}/events");
    let tail_path = format!("{events}?tailTurns={PAGE_TURNS}");
    let (mut tail_ms, mut tail_kib, mut full_ms, mut full_kib, mut page_ms, mut page_kib) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut tail_events, mut full_events) = (0, 0);
    // One unmeasured read first: the page cache holds the log in every measured run.
    read_stream(&web, &tail_path)?;
    for i in 0..iterations.max(1) {
        eprintln!("dsh-bench: dsh web run {}/{iterations}", i + 1);
        let tail = read_stream(&web, &tail_path)?;
        let full = read_stream(&web, &events)?;
        let first = tail
            .first_seq
            .context("the tail carried no committed event")?;
        let page = read_stream(
            &web,
            &format!("{events}?before={first}&tailTurns={PAGE_TURNS}"),
        )?;
        ensure!(
            full.events > tail.events && page.events > 0,
            "the tail ({} events), the whole replay ({}) and a page ({}) do not add up",
            tail.events,
            full.events,
            page.events
        );
        tail_events = tail.events;
        full_events = full.events;
        tail_ms.push(tail.ms);
        tail_kib.push(tail.bytes as f64 / 1024.0);
        full_ms.push(full.ms);
        full_kib.push(full.bytes as f64 / 1024.0);
        page_ms.push(page.ms);
        page_kib.push(page.bytes as f64 / 1024.0);
    }
    let assets = assets(&web)?;
    let asset_kib = assets.iter().map(|(_, n)| *n).sum::<usize>() as f64 / 1024.0;
    let mut g = Group::new(
        rows,
        format!(
            "dsh web: a {TURNS}-turn stored session ({:.1} MB log), last {PAGE_TURNS} turns",
            log_bytes as f64 / 1e6
        ),
    );
    g.info(
        &format!("the tail (?tailTurns={PAGE_TURNS}): connect → its snapshot's last byte"),
        &tail_ms,
        "ms",
        1,
    );
    g.info(
        &format!("the tail: bytes sent up to its snapshot ({tail_events} events)"),
        &tail_kib,
        "KiB",
        1,
    );
    g.info(
        "the whole replay (no tailTurns): connect → its snapshot's last byte",
        &full_ms,
        "ms",
        1,
    );
    g.info(
        &format!("the whole replay: bytes sent up to its snapshot ({full_events} events)"),
        &full_kib,
        "KiB",
        1,
    );
    g.info(
        &format!("one page of earlier turns (?before=SEQ&tailTurns={PAGE_TURNS}), to its end"),
        &page_ms,
        "ms",
        1,
    );
    g.info("one page of earlier turns: bytes", &page_kib, "KiB", 1);
    g.limit(
        &format!(
            "the page and its assets, uncompressed ({})",
            assets
                .iter()
                .map(|(p, n)| format!("{p} {n} B"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        &[asset_kib],
        "KiB",
        1,
        150.0,
    );
    g.text(
        "first contentful paint, transcript drawn",
        "from the browser test's report (crates/cli/tests/all/web.rs prints them): this bench drives no browser",
    );
    Ok(())
}
