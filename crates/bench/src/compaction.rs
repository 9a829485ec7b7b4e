//! Compaction (issue 14): a long tool session in a 32k-token window through the release `dsh`
//! (compactions, tokens before/after, the summary request's reused prefix), and the CPU-side
//! overhead of one compaction on a 1 MB history, in process, without the model call.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use dsh_compaction::TokenMeter;
use dsh_compaction::compact::snapshot;
use dsh_compaction::events::{CompactionSummary, CompactionTokens, ShadowedRange};
use dsh_compaction::prune::{PrunerConfig, prune_plan};
use dsh_compaction::summary::checkpoint_message;
use dsh_llm::ContentBlock;
use dsh_session::data::UserMessage;
use dsh_session::{NewEvent, SessionLog};
use dsh_testkit::validate::common_prefix_len;
use dsh_testkit::{Completion, MockServer, RecordedRequest, Usage};

use crate::report::{Group, Row};
use crate::run::{World, run_dsh, session_log};

const WINDOW: &str = "plugins:\n  - id: deepseek\n    name: deepseek\n    config:\n      models:\n        - { id: deepseek-flash, contextWindow: 32000, defaultMaxTokens: 4096 }\n";
const INSTRUCTION: &str = "You are now acting as a compaction engine";

fn is_summary(req: &RecordedRequest) -> bool {
    req.body_json().ok().is_some_and(|b| {
        b["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .is_some_and(|c| c.starts_with(INSTRUCTION))
    })
}

/// `steps` bash calls printing `bytes` characters each (every 7th 12,000 when `vary`), then a
/// final answer; usage reported as body bytes / 4 with the mock's prefix-cache stand-in.
fn script(server: &MockServer, steps: usize, bytes: usize, vary: bool) {
    let counter = Arc::new(AtomicUsize::new(0));
    server.set_responder(move |req| {
        let usage = Usage::new(req.body.len() as u64 / 4, 30)
            .cache_hit(req.cached_prefix_bytes as u64 / 4);
        if is_summary(req) {
            return Completion::new()
                .text("1. Primary Request and Intent\n- run the steps\n6. Current Work\n- stepping")
                .usage(usage)
                .reply();
        }
        let step = counter.fetch_add(1, Ordering::SeqCst);
        if step >= steps {
            return Completion::new().text("DONE").usage(usage).reply();
        }
        let n = if vary && step % 7 == 3 { 12_000 } else { bytes };
        let args = format!(
            r#"{{"command":"echo step-{step}; head -c {n} /dev/zero | tr '\\0' 'x'","description":"Step {step}"}}"#
        );
        Completion::new().tool_call("bash", &args).usage(usage).reply()
    });
}

/// Figures of one compacting run.
struct LongRun {
    wall_ms: f64,
    compactions: usize,
    prunes: usize,
    tokens_before: Vec<f64>,
    tokens_after: Vec<f64>,
    /// Common byte prefix of each summary body with the request before it / that request.
    raw_prefix: Vec<f64>,
    /// The same counting the identical tool declarations (part of the cached prompt).
    prompt_prefix: Vec<f64>,
}

fn long_run(dsh: &std::path::Path, steps: usize) -> Result<LongRun> {
    let world = World::new()?;
    let patch = world.home.path().join("window.yaml");
    std::fs::write(&patch, WINDOW).context("writing the window patch")?;
    script(&world.server, steps, 2_500, true);
    let patch = patch.display().to_string();
    let out = run_dsh(
        dsh,
        &world,
        &["exec", "--patch", &patch, "Run the steps"],
        false,
    )?;
    if out.stdout.trim() != "DONE" {
        bail!("the compacting run ended with {:?}", out.stdout);
    }
    let text = crate::run::log_text(&session_log(world.home.path())?)?;
    let (mut compactions, mut prunes) = (0, 0);
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for line in text.lines().skip(1) {
        let row: serde_json::Value = serde_json::from_str(line)?;
        match row["type"].as_str() {
            Some("compaction/summary") => compactions += 1,
            Some("compaction/prune") => prunes += 1,
            Some("dsh/compaction-tokens") => {
                let t: CompactionTokens = serde_json::from_value(row["data"].clone())?;
                before.push(t.tokens_before as f64);
                after.push(t.tokens_after as f64);
            }
            _ => {}
        }
    }
    let reqs: Vec<RecordedRequest> = world
        .server
        .requests()
        .into_iter()
        .filter(|r| r.is_chat())
        .collect();
    let (mut raw, mut prompt) = (Vec::new(), Vec::new());
    for i in 1..reqs.len() {
        if !is_summary(&reqs[i]) {
            continue;
        }
        let (prev, cur) = (&reqs[i - 1], &reqs[i]);
        let common = common_prefix_len(&prev.body, &cur.body);
        let tools = match (prev.body_json(), cur.body_json()) {
            (Ok(a), Ok(b)) if a["tools"] == b["tools"] => a["tools"].to_string().len(),
            _ => 0,
        };
        raw.push(common as f64 / prev.body.len() as f64);
        prompt.push(((common + tools) as f64 / prev.body.len() as f64).min(1.0));
    }
    Ok(LongRun {
        wall_ms: out.wall.as_secs_f64() * 1e3,
        compactions,
        prunes,
        tokens_before: before,
        tokens_after: after,
        raw_prefix: raw,
        prompt_prefix: prompt,
    })
}

/// A stored history of about `bytes` (steps of 10 KB outputs, no compaction), read back.
fn history(dsh: &std::path::Path, bytes: usize) -> Result<SessionLog> {
    let world = World::new()?;
    script(&world.server, bytes / 10_000, 10_000, false);
    run_dsh(dsh, &world, &["exec", "Run the steps"], false)?;
    let path = session_log(world.home.path())?;
    let raw = crate::run::log_text(&path)?.into_bytes();
    let decoded = dsh_session::codec::decode_jsonl(&raw, 4, &path.display().to_string(), "bench")
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    decoded.replay().map_err(|e| anyhow::anyhow!("{e}"))
}

/// One compaction's work without the model call: meter, snapshot, selection, the summary
/// request's messages, the pruner's plan, the commit of summary + replacement, and the
/// meter after. Returns milliseconds and (history bytes, tokens before, tokens after).
fn overhead(log: &SessionLog) -> Result<(f64, u64, u64)> {
    let meter = TokenMeter::default();
    let mut log = log.clone();
    let t = Instant::now();
    let snap = snapshot(&log, &meter, &[]);
    let span = snap
        .select(5_120)
        .context("the generated history has nothing to compact")?;
    let messages = snap.summary_messages(span);
    let pruned = prune_plan(&log, &PrunerConfig::default(), &meter);
    let shadowed: Vec<u64> = snap.nodes[span.start..=span.end]
        .iter()
        .map(|n| n.seq)
        .collect();
    let range = ShadowedRange {
        start: shadowed[0],
        end: shadowed[shadowed.len() - 1],
    };
    let summary = vec![ContentBlock::text(
        "1. Primary Request and Intent\n- (none)",
    )];
    let ev = log
        .append(NewEvent::plugin(&CompactionSummary {
            compaction_id: "bench".into(),
            source_command_id: None,
            summary: summary.clone(),
            raw_output: Some(summary.clone()),
            llm_stream_call: Some(true),
            shadowed_range: range,
            shadowed_seqs: shadowed.clone(),
            shadowed_token_count: snap.nodes[span.start..=span.end]
                .iter()
                .map(|n| n.tokens)
                .sum(),
            provider: "deepseek".into(),
            model: "deepseek-flash".into(),
            max_tokens: Some(8192),
            usage: None,
        })?)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut sources = vec![ev.seq()];
    sources.extend(&shadowed);
    let checkpoint = checkpoint_message("m-bench".into(), "bench", None, &summary);
    log.append(
        NewEvent::core(UserMessage(Arc::new(checkpoint)))
            .replacing(range.start, range.end)
            .with_sources(sources),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let after = meter.measure(&log, &[]).tokens;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    std::hint::black_box((messages.len(), pruned.len()));
    Ok((ms, snap.tokens_before, after))
}

/// Runs the compaction figures and adds their rows.
pub fn rows(
    dsh: &std::path::Path,
    quick: bool,
    iterations: u32,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let steps = if quick { 40 } else { 200 };
    let runs = (0..iterations.min(3))
        .map(|_| long_run(dsh, steps))
        .collect::<Result<Vec<_>>>()?;
    let group = format!("compaction: {steps} bash steps in a 32k window");
    let mut g = Group::new(rows, group);
    g.info(
        "wall time",
        &runs.iter().map(|r| r.wall_ms).collect::<Vec<_>>(),
        "ms",
        0,
    );
    g.info(
        "compactions",
        &runs
            .iter()
            .map(|r| r.compactions as f64)
            .collect::<Vec<_>>(),
        "",
        0,
    );
    g.info(
        "pruned tool results",
        &runs.iter().map(|r| r.prunes as f64).collect::<Vec<_>>(),
        "",
        0,
    );
    let all =
        |f: fn(&LongRun) -> &Vec<f64>| runs.iter().flat_map(|r| f(r).clone()).collect::<Vec<f64>>();
    g.info(
        "tokens before a compaction (metered)",
        &all(|r| &r.tokens_before),
        "tokens",
        0,
    );
    g.info(
        "tokens after a compaction (metered)",
        &all(|r| &r.tokens_after),
        "tokens",
        0,
    );
    let prompt = all(|r| &r.prompt_prefix);
    let min = prompt.iter().copied().fold(f64::INFINITY, f64::min);
    g.exact(
        "summary request: reused prompt of the previous request (min)",
        "at least 0.95",
        &format!("{min:.4}"),
        min >= 0.95,
    );
    g.info(
        "summary request: common body byte prefix / previous body",
        &all(|r| &r.raw_prefix),
        "",
        4,
    );
    let log = history(dsh, if quick { 200_000 } else { 1_000_000 })?;
    let bytes: usize = log.events().iter().map(|e| e.data_json().len()).sum();
    let samples = (0..if quick { 3 } else { 20 })
        .map(|_| overhead(&log))
        .collect::<Result<Vec<_>>>()?;
    let mut g = Group::new(
        rows,
        format!("compaction overhead: {:.1} MB history", bytes as f64 / 1e6),
    );
    g.limit(
        "one compaction without the model call",
        &samples.iter().map(|s| s.0).collect::<Vec<_>>(),
        "ms",
        2,
        5.0,
    );
    g.info(
        "tokens before",
        &samples.iter().map(|s| s.1 as f64).collect::<Vec<_>>(),
        "tokens",
        0,
    );
    g.info(
        "tokens after",
        &samples.iter().map(|s| s.2 as f64).collect::<Vec<_>>(),
        "tokens",
        0,
    );
    Ok(())
}
