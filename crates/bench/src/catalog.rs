//! The session catalog (issue 35) on a generated corpus: 10,000 sessions of 100 events
//! (1,000,000 events) written as dsh writes them (zstd, one frame per step), then a full
//! rebuild, searches, lists, stats, per-step indexing and the catalog's size against the logs'.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use dsh_catalog::SqliteCatalog;
use dsh_catalog_api::{Filter, GroupBy, SearchQuery};
use dsh_session::SessionPersistence;
use dsh_session_jsonl::JsonlStore;
use dsh_session_jsonl::naming::{encode_segment, project_dir};
use serde_json::json;

use crate::report::Group;
use crate::run::{World, files_under, run_dsh, session_log};
use crate::scenario::{Scenario, ScenarioRun, Variant};

/// A deterministic generator (64-bit LCG; the corpus is the same on every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A word rank, skewed to the frequent ones (roughly Zipf-like).
    fn rank(&mut self, n: usize) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((u * u * u) * n as f64) as usize
    }
}

const WORDS: usize = 20_000;

/// Words of a tool result (~2.6 KB: the head of a file read or a test run's output).
const RESULT_WORDS: usize = 400;
/// Words of a tool result in the lean corpus (a size figure only).
const LEAN_RESULT_WORDS: usize = 60;

fn vocabulary() -> Vec<String> {
    const SYL: [&str; 24] = [
        "ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "en", "pa", "dor", "fi", "gu", "hel",
        "io", "jak", "qua", "ster", "ul", "wen", "xi", "yor", "zed", "bri",
    ];
    let mut g = Lcg(7);
    let mut out = Vec::with_capacity(WORDS);
    let mut seen = std::collections::HashSet::new();
    while out.len() < WORDS {
        let n = 2 + g.below(3);
        let w: String = (0..n).map(|_| SYL[g.below(SYL.len())]).collect();
        if seen.insert(w.clone()) {
            out.push(w);
        }
    }
    out
}

fn sentence(g: &mut Lcg, words: &[String], n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(&words[g.rank(words.len())]);
    }
    s
}

/// The packed stream records of a reply, as dsh logs them: one chunk per word with its delay.
fn stream(reasoning: &str, text: &str, time: i64) -> serde_json::Value {
    let words = |s: &str| -> Vec<String> { s.split_inclusive(' ').map(str::to_owned).collect() };
    let (r, t) = (words(reasoning), words(text));
    json!([
        {"type":"chunk","time":time,"chunk":{"type":"block-start","index":0,"blockType":"reasoning"}},
        {"type":"reasoning-chunks","time0":time,"index":0,"dt":vec![1; r.len()],"texts":r},
        {"type":"chunk","time":time,"chunk":{"type":"block-start","index":1,"blockType":"text"}},
        {"type":"text-chunks","time0":time,"index":1,"dt":vec![1; t.len()],"texts":t},
        {"type":"chunk","time":time,"chunk":{"type":"block-end","index":0,"block":{"type":"reasoning","text":reasoning}}},
        {"type":"chunk","time":time,"chunk":{"type":"block-end","index":1,"block":{"type":"text","text":text}}},
        {"type":"chunk","time":time,"chunk":{"type":"usage","usage":{"inputTokens":900,"outputTokens":250,"cacheReadTokens":12000}}},
        {"type":"chunk","time":time,"chunk":{"type":"finish","reason":"stop"}}
    ])
}

/// Sizes of the generated corpus.
struct Corpus {
    sessions: usize,
    events: usize,
    log_bytes: u64,
    write_ms: f64,
}

/// Writes `sessions` zstd logs of 102 events under `home/sessions`; tool results of
/// `result_words` words.
fn generate(home: &Path, sessions: usize, result_words: usize) -> Result<Corpus> {
    let words = vocabulary();
    let root = home.join("sessions");
    let mut g = Lcg(42);
    let now = dsh_session::now_ms();
    let start = Instant::now();
    let (mut events, mut bytes) = (0usize, 0u64);
    for s in 0..sessions {
        let id = format!("session-{s:05}");
        let cwd = format!("/home/u/project-{}", s % 50);
        let created = now - 60 * 86_400_000 + (s as i64) * (60 * 86_400_000 / sessions as i64);
        let model = if s % 3 == 0 {
            "deepseek-reasoner"
        } else {
            "deepseek-chat"
        };
        let mut text = json!({"type":"session","version":4,"id":id,"createdAt":created,
            "cwd":cwd,"isSeeded":false,"delegationDepth":0})
        .to_string();
        text.push('\n');
        let mut seq = 0u64;
        let mut row = |v: serde_json::Value, text: &mut String| {
            let mut v = v;
            v["seq"] = json!(seq);
            v["time"] = json!(created + seq as i64 * 1_000);
            seq += 1;
            text.push_str(&v.to_string());
            text.push('\n');
        };
        let src = json!({"kind":"model","provider":"deepseek-official","model":model});
        let usage = json!({"inputTokens":900,"outputTokens":250,"cacheReadTokens":12_000});
        // What every dsh log starts with: the system prompt (~6 KB) and the request header
        // with the tool schemas (~4 KB), once per session.
        let persona = sentence(&mut Lcg(1), &words, 900);
        let tools: Vec<serde_json::Value> = (0..12u64)
            .map(|i| {
                json!({"name":format!("tool_{i}"),"description":sentence(&mut Lcg(i), &words, 40),
                "parameters":{"type":"object","properties":{"path":{"type":"string"}}}})
            })
            .collect();
        for turn in 1..=9u64 {
            if turn == 1 {
                row(
                    json!({"type":"system/message","data":{"turn":1,"step":1,"message":{
                    "role":"system","content":[{"type":"text","text":persona}],
                    "source":{"kind":"system-prompt"},"id":"sys"}},"surfaceOp":"append"}),
                    &mut text,
                );
                row(
                    json!({"type":"request/header","data":{"header":{"config":{
                    "provider":"deepseek-official","model":model},"tools":tools},
                    "reason":"initial","startsSeries":true}}),
                    &mut text,
                );
            }
            let prompt = sentence(&mut g, &words, 25);
            let path = format!("src/{}/{}.rs", words[g.below(2_000)], words[g.below(5_000)]);
            let command = format!(
                "cargo test -p {} {}",
                words[g.below(500)],
                words[g.rank(WORDS)]
            );
            let result = format!(
                "{path}:{}: {}",
                g.below(900),
                sentence(&mut g, &words, result_words)
            );
            let reply = sentence(&mut g, &words, 80);
            let thinking = sentence(&mut g, &words, 60);
            let thinking2 = sentence(&mut g, &words, 40);
            let call = format!("call-{turn}");
            row(json!({"type":"turn/start","data":{"turn":turn}}), &mut text);
            row(
                json!({"type":"step/start","data":{"turn":turn,"step":1}}),
                &mut text,
            );
            row(
                json!({"type":"user/message","data":{"content":[{"type":"text","text":prompt}],
                "source":{"kind":"user"},"role":"user","id":format!("u{turn}")},
                "surfaceOp":"append"}),
                &mut text,
            );
            let args = json!({"command": command, "path": path}).to_string();
            row(
                json!({"type":"assistant/message","data":{"turn":turn,"step":1,"message":{
                "role":"assistant","content":[{"type":"reasoning","text":thinking2},{"type":"tool-call","id":call,"name":"bash",
                "arguments":args}],"source":src,"id":format!("a{turn}")},"usage":usage,
                "stream":stream(&thinking2, &args, created)},"surfaceOp":"append"}),
                &mut text,
            );
            row(
                json!({"type":"tool/call","data":{"turn":turn,"step":1,"callId":call,
                "name":"bash","arguments":args}}),
                &mut text,
            );
            row(
                json!({"type":"tool/result","data":{"turn":turn,"step":1,"message":{
                "role":"tool","source":{"kind":"tool","callId":call},"toolCallId":call,
                "content":[{"type":"text","text":result}],"isError":false,
                "id":format!("r{turn}")}},"surfaceOp":"append"}),
                &mut text,
            );
            row(
                json!({"type":"step/end","data":{"turn":turn,"step":1}}),
                &mut text,
            );
            row(
                json!({"type":"step/start","data":{"turn":turn,"step":2}}),
                &mut text,
            );
            row(
                json!({"type":"assistant/message","data":{"turn":turn,"step":2,"message":{
                "role":"assistant","content":[{"type":"reasoning","text":thinking},{"type":"text","text":reply}],"source":src,
                "id":format!("b{turn}")},"usage":usage,"stream":stream(&thinking, &reply, created)},"surfaceOp":"append"}),
                &mut text,
            );
            row(
                json!({"type":"step/end","data":{"turn":turn,"step":2}}),
                &mut text,
            );
            row(
                json!({"type":"turn/end","data":{"turn":turn,"reason":{"kind":"completed"}}}),
                &mut text,
            );
        }
        row(
            json!({"type":"session/title","data":{"title":sentence(&mut g, &words, 5),
            "source":{"kind":"fallback"}}}),
            &mut text,
        );
        events += seq as usize;
        let dir = root.join(project_dir(Some(&cwd))).join(encode_segment(&id));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let zstd = dsh_session_jsonl::zstd::encode_per_step(&text);
        bytes += zstd.len() as u64;
        std::fs::write(dir.join("session.v4.jsonl.zstd"), zstd)?;
    }
    Ok(Corpus {
        sessions,
        events,
        log_bytes: bytes,
        write_ms: start.elapsed().as_secs_f64() * 1e3,
    })
}

/// `write(2)` bytes per session byte of the 20-step bash scenario (the full report's figure,
/// alone): dsh reports the session to the catalog's live table as it runs, so those commits
/// are among these bytes; the catalog's full-text rows are written by the next reader, whose
/// bytes are shown apart.
pub fn write_rows(dsh: &Path, iterations: u32, rows: &mut Vec<crate::report::Row>) -> Result<()> {
    let scenario = Scenario::new("bash", Variant::Bash, 20);
    let runs = (0..iterations.max(1))
        .map(|_| scenario.run(dsh))
        .collect::<Result<Vec<_>>>()?;
    let amp: Vec<f64> = runs.iter().map(ScenarioRun::write_amplification).collect();
    let mut grp = Group::new(rows, "writes (bash, 20 steps)");
    if amp.iter().all(|a| a.is_nan()) {
        grp.text(
            "write(2) bytes per session byte",
            "not available (`/proc/self/io` unreadable)",
        );
    } else {
        grp.limit(
            "write(2) bytes per session byte (HTTP bodies, stdout excluded)",
            &amp,
            "×",
            2,
            1.5,
        );
    }
    let dir: Vec<f64> = runs.iter().map(|r| r.session_dir_bytes as f64).collect();
    grp.info("session directory bytes", &dir, "B", 0);
    // The same with a catalog already there (any home where sessions were listed once).
    let seed = tempfile::tempdir()?;
    generate(seed.path(), 200, LEAN_RESULT_WORDS)?;
    let seeded = seed.path().join("catalog.sqlite");
    {
        let cat = SqliteCatalog::open(&seeded)?.with_log_root(seed.path().join("sessions"));
        cat.rebuild(&JsonlStore::new(seed.path().join("sessions")), &mut |_| {})?;
        cat.checkpoint()?;
    }
    let steady = (0..iterations.max(1))
        .map(|_| steady_run(dsh, &scenario, &seeded))
        .collect::<Result<Vec<_>>>()?;
    let amp: Vec<f64> = steady.iter().map(|s| s.0).collect();
    grp.limit(
        "the same, with a catalog of 200 sessions in the home",
        &amp,
        "×",
        2,
        1.5,
    );
    let reader: Vec<f64> = steady.iter().map(|s| s.1).collect();
    grp.info(
        "catalog bytes the next reader writes indexing the session, per session byte",
        &reader,
        "×",
        2,
    );
    Ok(())
}

/// One run of `scenario` in a home holding a copy of the catalog at `seeded`: its write
/// amplification, as [`ScenarioRun::write_amplification`] counts it, and the bytes the next
/// reader's reconciliation writes to the catalog (WAL) indexing the session, per session byte.
fn steady_run(dsh: &Path, scenario: &Scenario, seeded: &Path) -> Result<(f64, f64)> {
    let world = World::new()?;
    let catalog = world.home.path().join("catalog.sqlite");
    std::fs::copy(seeded, &catalog).context("copying the seeded catalog")?;
    world.server.push_all(scenario.replies());
    let out = run_dsh(dsh, &world, &["exec", "Run the steps, then report."], true)?;
    let steps = scenario.steps + 1;
    let http: usize = world
        .server
        .wait_for_finished_blocking(steps, std::time::Duration::from_secs(10))
        .context("the requests did not finish")?
        .iter()
        .filter(|r| r.is_chat())
        .map(|r| r.body.len())
        .sum();
    let wchar = out
        .probe
        .and_then(|p| p.wchar)
        .context("the probe could not read wchar")?;
    let log = session_log(world.home.path())?;
    let dir_bytes: u64 = log.parent().map_or(0, |d| {
        files_under(d)
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    });
    // The run reported its session to the live table; the next reader indexes it.
    let cat = SqliteCatalog::open(&catalog)?;
    let live = cat.live()?;
    anyhow::ensure!(
        live.len() == 1 && live[0].state == dsh_catalog_api::LiveState::Ended,
        "the live table holds {live:?}"
    );
    let wal = |p: &Path| {
        let mut w = p.as_os_str().to_owned();
        w.push("-wal");
        std::fs::metadata(Path::new(&w)).map_or(0, |m| m.len())
    };
    // The reader's share: the run's log indexed into the catalog (the seeded sessions' logs
    // are not in this home, so a reconciliation would forget them; index the one log).
    let store = JsonlStore::new(world.home.path().join("sessions"));
    let listed = store.list()?;
    anyhow::ensure!(listed.len() == 1, "{} logs in the home", listed.len());
    let before = wal(&catalog);
    cat.index_log(&store, &listed[0])?;
    let reader = wal(&catalog).saturating_sub(before);
    let indexed = cat.list(&Filter::default())?.len();
    anyhow::ensure!(
        indexed == 201,
        "the catalog holds {indexed} sessions, not 201"
    );
    Ok((
        (wchar as f64 - http as f64 - out.stdout.len() as f64) / dir_bytes.max(1) as f64,
        reader as f64 / dir_bytes.max(1) as f64,
    ))
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// The `catalog` rows: `quick` uses 1,000 sessions (100,000 events).
pub fn rows(quick: bool, iterations: u32, rows: &mut Vec<crate::report::Row>) -> Result<()> {
    let sessions = if quick { 1_000 } else { 10_000 };
    let tmp = tempfile::tempdir()?;
    let home = tmp.path();
    eprintln!("dsh-bench: catalog: generating {sessions} sessions");
    let corpus = generate(home, sessions, RESULT_WORDS)?;
    let store = JsonlStore::new(home.join("sessions"));
    let path = home.join("catalog.sqlite");
    eprintln!("dsh-bench: catalog: full rebuild");
    let cat = SqliteCatalog::open(&path)?.with_log_root(home.join("sessions"));
    let start = Instant::now();
    let rebuilt = cat.rebuild(&store, &mut |_| {})?;
    let rebuild_s = ms(start) / 1e3;
    cat.checkpoint()?;
    let catalog_bytes = cat.file_size();
    // Listing an unchanged home as `dsh sessions list` does (reconcile, then the query): the
    // first pass after the rebuild
    // may read the directories written last (their times were too recent to trust), the
    // next ones look at the recent and reported sessions only.
    let mut again = dsh_catalog::Reconciled::default();
    let mut reconcile_ms = Vec::new();
    for _ in 0..6 {
        let start = Instant::now();
        again = cat.reconcile(&store, &mut |_| {})?;
        cat.list(&Filter {
            limit: Some(50),
            ..Default::default()
        })?;
        reconcile_ms.push(ms(start));
    }
    let first_reconcile_ms = reconcile_ms.remove(0);
    let sweeping = SqliteCatalog::open(&path)?
        .with_log_root(home.join("sessions"))
        .with_sweep_every(std::time::Duration::ZERO);
    let start = Instant::now();
    let swept = sweeping.reconcile(&store, &mut |_| {})?;
    let sweep_ms = ms(start);
    drop(sweeping);
    let start = Instant::now();
    let listed = store.list()?.len();
    let list_logs_ms = ms(start);

    // Queries: mid-frequency and rare words, prefixes, phrases, a path, with and without a
    // project filter.
    let words = vocabulary();
    let mut g = Lcg(99);
    let mut queries: Vec<SearchQuery> = Vec::new();
    for i in 0..60 {
        let text = match i % 6 {
            0 => words[300 + g.below(2_000)].clone(),
            1 => words[5_000 + g.below(15_000)].clone(),
            2 => format!("{}*", &words[g.below(5_000)][..4]),
            3 => format!("\"{} {}\"", words[g.rank(3_000)], words[g.rank(3_000)]),
            4 => format!("src/{}", words[g.below(2_000)]),
            _ => format!("{} {}", words[g.rank(WORDS)], words[g.rank(WORDS)]),
        };
        let cwd = (i % 2 == 1).then(|| format!("/home/u/project-{}", g.below(50)));
        queries.push(SearchQuery {
            text,
            filter: Filter {
                cwd,
                ..Default::default()
            },
        });
    }
    let mut search = Vec::new();
    let mut hits = 0usize;
    for _ in 0..iterations.max(1) {
        for q in &queries {
            let start = Instant::now();
            hits += cat.search(q)?.len();
            search.push(ms(start));
        }
    }
    let frequent = SearchQuery {
        text: words[0].clone(),
        ..Default::default()
    };
    let mut frequent_ms = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        cat.search(&frequent)?;
        frequent_ms.push(ms(start));
    }
    let mut list50 = Vec::new();
    let mut list_all = Vec::new();
    let mut list_project = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        cat.list(&Filter {
            limit: Some(50),
            ..Default::default()
        })?;
        list50.push(ms(start));
        let start = Instant::now();
        let all = cat.list(&Filter::default())?;
        list_all.push(ms(start));
        anyhow::ensure!(all.len() == sessions, "listed {} of {sessions}", all.len());
        let start = Instant::now();
        cat.list(&Filter {
            cwd: Some("/home/u/project-7".into()),
            ..Default::default()
        })?;
        list_project.push(ms(start));
    }
    let mut stats = Vec::new();
    for _ in 0..10 {
        for by in [GroupBy::Day, GroupBy::Model, GroupBy::Project] {
            let start = Instant::now();
            cat.stats(by, &Filter::default())?;
            stats.push(ms(start));
        }
    }
    // Indexing: a new session's turns (two steps, 11 events each): the writer's live-table
    // reports, and a reader indexing them into the full catalog.
    let (steps, step_ms, reader_ms) = index_steps(&cat, home)?;

    // The same with short tool results: the catalog's share grows as the logs hold less that
    // is not indexed.
    let lean_dir = tempfile::tempdir()?;
    let lean = generate(lean_dir.path(), 1_000, LEAN_RESULT_WORDS)?;
    let lean_cat = SqliteCatalog::open(lean_dir.path().join("catalog.sqlite"))?
        .with_log_root(lean_dir.path().join("sessions"));
    lean_cat.rebuild(
        &JsonlStore::new(lean_dir.path().join("sessions")),
        &mut |_| {},
    )?;
    lean_cat.checkpoint()?;
    let lean_ratio = lean_cat.file_size() as f64 / lean.log_bytes as f64;

    let mut grp = Group::new(rows, "catalog");
    grp.text(
        "corpus",
        &format!(
            "{} sessions, {} events, logs {:.1} MB zstd (generated in {:.1} s)",
            corpus.sessions,
            corpus.events,
            corpus.log_bytes as f64 / 1e6,
            corpus.write_ms / 1e3
        ),
    );
    grp.limit_as(
        "full rebuild (2 threads: decode, write)",
        &[rebuild_s],
        "s",
        1,
        if quick { 6.0 } else { 60.0 },
        &format!("under {} s", if quick { 6 } else { 60 }),
    );
    grp.text(
        "rebuild throughput",
        &format!(
            "{:.0} events/s ({} logs, {} events indexed)",
            rebuilt.events as f64 / rebuild_s,
            rebuilt.read,
            rebuilt.events
        ),
    );
    let ratio = catalog_bytes as f64 / corpus.log_bytes as f64;
    grp.exact(
        "catalog size / logs (zstd)",
        "under 30%",
        &format!(
            "{:.1}% ({:.1} MB)",
            ratio * 100.0,
            catalog_bytes as f64 / 1e6
        ),
        ratio < 0.30,
    );
    grp.text(
        "catalog size / logs, tool results of 60 words",
        &format!(
            "{:.1}% (1,000 sessions, logs {:.1} MB)",
            lean_ratio * 100.0,
            lean.log_bytes as f64 / 1e6
        ),
    );
    grp.limit("search p50 (60 queries, mixed)", &search, "ms", 2, 20.0);
    let mut sorted = search.clone();
    sorted.sort_by(f64::total_cmp);
    let p95 = sorted[(sorted.len() * 95 / 100).min(sorted.len() - 1)];
    grp.text(
        "search p95 / hits",
        &format!(
            "{p95:.2} ms / {:.1} hits per query",
            hits as f64 / search.len() as f64
        ),
    );
    grp.info("search of the most frequent word", &frequent_ms, "ms", 1);
    grp.limit("list, newest 50", &list50, "ms", 2, 10.0);
    grp.info(&format!("list, all {sessions}"), &list_all, "ms", 1);
    grp.info("list, one project", &list_project, "ms", 2);
    grp.limit("stats by day/model/project", &stats, "ms", 2, 50.0);
    grp.limit(
        &format!(
            "indexing in the running session, per step (its thread's live-table reports: 2 \
             commits per turn of 2 steps; {steps} steps)"
        ),
        &step_ms,
        "ms",
        3,
        0.1,
    );
    grp.info(
        "a reader indexing those turns into the catalog, per step (one commit per turn)",
        &reader_ms,
        "ms",
        3,
    );
    grp.limit(
        &format!(
            "list of the newest 50 with its reconcile, nothing changed (`dsh sessions list`): \
             incremental, {} logs looked at",
            again.logs
        ),
        &reconcile_ms,
        "ms",
        2,
        10.0,
    );
    grp.text(
        "reconcile: first pass after the rebuild / full sweep (at most once a minute)",
        &format!(
            "{first_reconcile_ms:.1} ms / {sweep_ms:.1} ms ({} logs, {} read again)",
            swept.logs, swept.read
        ),
    );
    grp.text(
        "for comparison: SessionPersistence::list (every header)",
        &format!(
            "{list_logs_ms:.1} ms ({listed} logs, {} read again)",
            again.read
        ),
    );
    Ok(())
}

/// 200 steps (100 turns of 2) of a new session: what the writing process does for them (two
/// live-table reports per turn) and what a reader does indexing them into `cat` (one batch
/// per turn); each turn's time per step, writer's and reader's.
fn index_steps(cat: &SqliteCatalog, home: &Path) -> Result<(usize, Vec<f64>, Vec<f64>)> {
    let words = vocabulary();
    let mut g = Lcg(5);
    let dir = home.join("steps");
    std::fs::create_dir_all(&dir)?;
    let store = JsonlStore::new(&dir);
    let mut text = String::new();
    let header = json!({"type":"session","version":4,"id":"steps","createdAt":0,"cwd":"/w",
        "isSeeded":false,"delegationDepth":0});
    text.push_str(&header.to_string());
    text.push('\n');
    let mut seq = 0u64;
    let mut bounds = vec![0usize];
    for turn in 1..=100u64 {
        for step in 1..=2u64 {
            let mut rows = Vec::new();
            if step == 1 {
                rows.push(json!({"type":"turn/start","data":{"turn":turn}}));
                rows.push(
                    json!({"type":"user/message","data":{"content":[{"type":"text",
                    "text":sentence(&mut g, &words, 25)}],"source":{"kind":"user"},
                    "role":"user","id":format!("u{turn}")},"surfaceOp":"append"}),
                );
            }
            rows.push(json!({"type":"step/start","data":{"turn":turn,"step":step}}));
            rows.push(
                json!({"type":"assistant/message","data":{"turn":turn,"step":step,
                "message":{"role":"assistant","content":[{"type":"text",
                "text":sentence(&mut g, &words, 80)}],"source":{"kind":"model",
                "provider":"deepseek-official","model":"deepseek-chat"},
                "id":format!("a{turn}-{step}")},"usage":{"inputTokens":900,"outputTokens":250},
                "stream":[]},"surfaceOp":"append"}),
            );
            rows.push(
                json!({"type":"tool/result","data":{"turn":turn,"step":step,"message":{
                "role":"tool","source":{"kind":"tool","callId":"c"},"toolCallId":"c",
                "content":[{"type":"text","text":sentence(&mut g, &words, 60)}],
                "isError":false,"id":format!("r{turn}-{step}")}},"surfaceOp":"append"}),
            );
            rows.push(json!({"type":"step/end","data":{"turn":turn,"step":step}}));
            if step == 2 {
                rows.push(json!({"type":"turn/end","data":{"turn":turn,
                    "reason":{"kind":"completed"}}}));
            }
            for mut r in rows {
                r["seq"] = json!(seq);
                r["time"] = json!(seq as i64);
                seq += 1;
                text.push_str(&r.to_string());
                text.push('\n');
            }
        }
        // The plugin commits once per turn (at the flush after its `turn/end`).
        bounds.push(seq as usize);
    }
    let sdir = dir.join(project_dir(Some("/w"))).join("steps");
    std::fs::create_dir_all(&sdir)?;
    std::fs::write(sdir.join("session.v4.jsonl"), text)?;
    let log = store.open_read("steps")?;
    // The writer: the plugin's thread reports each turn's start and end to the live table.
    let live = dsh_catalog::LiveTable::open(&dsh_catalog::live_path(&home.join("catalog.sqlite")))?;
    let mut writer = Vec::new();
    for turn in 1..bounds.len() as u64 {
        let start = Instant::now();
        for state in [
            dsh_catalog_api::LiveState::Working,
            dsh_catalog_api::LiveState::Idle,
        ] {
            live.report(&[dsh_catalog::Report {
                id: "steps".into(),
                cwd: "/w".into(),
                started_ms: 0,
                turn,
                state,
                at_ms: dsh_session::now_ms(),
            }])?;
        }
        // Per step: a turn here has two.
        writer.push(ms(start) / 2.0);
    }
    // A reader catching up: the session's turns indexed into the full catalog, one
    // transaction per turn (a reconciliation after each turn; the worst case).
    let mut reader = Vec::new();
    for w in bounds.windows(2) {
        let batch = &log.events[w[0]..w[1]];
        let start = Instant::now();
        cat.index_events(&log.header, batch)?;
        reader.push(ms(start) / 2.0);
    }
    Ok((2 * (bounds.len() - 1), writer, reader))
}
