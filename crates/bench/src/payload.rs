//! Large payload: one step whose tool-call arguments are a `write` of several megabytes.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use dsh_testkit::Completion;
use serde::Serialize;

use crate::run::{World, files_under, run_dsh, session_log};

/// Characters per streamed delta of the arguments.
pub const CHARS_PER_DELTA: usize = 256;
/// The file the `write` call creates.
const FILE: &str = "payload.txt";

/// Figures from one large-payload run.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PayloadRun {
    /// Bytes of the `write` call's arguments (the JSON text the model streamed).
    pub payload_bytes: usize,
    /// Bytes of the `content` written.
    pub content_bytes: usize,
    /// Peak RSS of the run, MiB.
    pub peak_rss_mib: f64,
    /// Wall time of the run, ms.
    pub wall_ms: f64,
    /// Size of the session log (`.jsonl`), bytes.
    pub log_bytes: u64,
    /// Every file in the session directory, bytes.
    pub session_dir_bytes: u64,
    /// Body size of the request after the step (it replays the arguments), bytes.
    pub second_request_bytes: usize,
    /// Whether the file on disk is the content, byte for byte.
    pub file_matches: bool,
    /// Peak RSS of a fresh one-turn text session of the same binary, MiB (the base the
    /// payload's memory comes on top of: code pages, runtime, composition).
    pub fresh_rss_mib: f64,
}

/// `bytes` bytes of numbered text lines.
fn content(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 80);
    let mut n = 0usize;
    while out.len() < bytes {
        n += 1;
        out.push_str(&format!(
            "line {n:07}: the quick brown fox jumps over the lazy dog, \"quoted\" and \\ slashed\n"
        ));
    }
    out.truncate(bytes);
    out
}

/// One run with a `write` of `bytes` bytes of content.
pub fn run(dsh: &Path, bytes: usize) -> Result<PayloadRun> {
    let world = World::new()?;
    let text = content(bytes);
    let args = serde_json::json!({ "file_path": FILE, "content": text }).to_string();
    world.server.push(
        Completion::new()
            .chars_per_delta(CHARS_PER_DELTA)
            .tool_call_with_id("call_00_benchpayload0000000001", "write", &args)
            .reply(),
    );
    world
        .server
        .push(Completion::new().text("Written.").reply());
    let out = run_dsh(dsh, &world, &["exec", "Write the payload file"], true)
        .context("the large-payload run")?;
    let reqs = world
        .server
        .wait_for_finished_blocking(2, Duration::from_secs(10))
        .context("the large-payload run: fewer than 2 responses ended")?;
    ensure!(
        reqs.len() == 2 && reqs.iter().all(|r| r.status == 200),
        "the large-payload run: {} requests",
        reqs.len()
    );
    let written = std::fs::read(world.work.join(FILE)).unwrap_or_default();
    let fresh = World::new()?;
    fresh.server.push(Completion::new().text("Hello.").reply());
    let base = run_dsh(dsh, &fresh, &["exec", "Say hello"], true)
        .context("the large-payload run's fresh session")?;
    let log = session_log(world.home.path())?;
    let log_bytes = std::fs::metadata(&log)?.len();
    let session_dir_bytes = log.parent().map_or(log_bytes, |d| {
        files_under(d)
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    });
    Ok(PayloadRun {
        payload_bytes: args.len(),
        content_bytes: text.len(),
        peak_rss_mib: out
            .probe
            .map_or(f64::NAN, |p| p.max_rss_kib as f64 / 1024.0),
        wall_ms: out.wall.as_secs_f64() * 1e3,
        log_bytes,
        session_dir_bytes,
        second_request_bytes: reqs[1].body.len(),
        file_matches: written == text.as_bytes(),
        fresh_rss_mib: base
            .probe
            .map_or(f64::NAN, |p| p.max_rss_kib as f64 / 1024.0),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn content_has_the_asked_size_and_escapes() {
        let c = super::content(1000);
        assert_eq!(c.len(), 1000);
        assert!(c.starts_with("line 0000001: "));
        let json = serde_json::json!({ "content": c }).to_string();
        assert!(json.contains("\\\"quoted\\\"") && json.contains("\\\\ slashed\\n"));
    }
}
