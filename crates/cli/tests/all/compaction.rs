//! Compaction end to end: a 200-step tool session in a 32k window keeps going, compacting
//! several times; every summary request reuses the previous request's bytes; the requests of a
//! series stay append-only; resume derives the compacted history.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_testkit::validate::{common_prefix_len, dsh_rule_violations};
use dsh_testkit::{Completion, MockServer, RecordedRequest, Usage};
use serde_json::Value;

use crate::support::*;

const STEPS: usize = 200;

/// A 32k-token window for the default model, and a small default output cap.
const BASE_TOOLS: &str = "plugins:\n  - { id: subagents, name: subagents, disabled: true }\n  - { id: tool-subagent, name: tool-subagent, disabled: true }\n  - { id: jobs, name: jobs, disabled: true }\n  - { id: tool-jobs, name: tool-jobs, disabled: true }\n";
const WINDOW: &str = "plugins:\n  - id: deepseek\n    name: deepseek\n    config:\n      models:\n        - { id: deepseek-flash, contextWindow: 32000, defaultMaxTokens: 4096 }\n";

fn is_summary(req: &RecordedRequest) -> bool {
    let body = req.body_json().unwrap();
    let last = body["messages"].as_array().unwrap().last().cloned();
    last.is_some_and(|m| {
        m["role"] == "user"
            && m["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("You are now acting as a compaction engine"))
    })
}

const SUMMARY: &str = "1. Primary Request and Intent\n- run the numbered steps\n2. Key Technical Concepts\n- (none)\n3. Files and Code\n- (none)\n4. Errors and Fixes\n- (none)\n5. Pending Jobs\n- (none)\n6. Current Work\n- stepping\n7. Next Step\n- next step\n8. Critical Context\n- (none)";

/// The scripted model: `STEPS` bash calls (every 7th prints more than the pruner's
/// threshold), then a final answer; summary requests get a summary. Usage is reported from
/// the body size (4 bytes per token) with the testkit's prefix-cache stand-in.
fn script(server: &MockServer) -> Arc<AtomicUsize> {
    let steps = Arc::new(AtomicUsize::new(0));
    let counter = steps.clone();
    server.set_responder(move |req| {
        let prompt = req.body.len() as u64 / 4;
        let usage = Usage::new(prompt, 30).cache_hit(req.cached_prefix_bytes as u64 / 4);
        if is_summary(req) {
            return Completion::new().text(SUMMARY).usage(usage).reply();
        }
        let step = counter.fetch_add(1, Ordering::SeqCst);
        if step >= STEPS {
            return Completion::new().text("ALL DONE").usage(usage).reply();
        }
        let bytes = if step % 7 == 3 { 12_000 } else { 2_500 };
        let args = format!(
            r#"{{"command":"echo step-{step}-start; head -c {bytes} /dev/zero | tr '\\0' 'x'; echo; echo step-{step}-end","description":"Step {step}"}}"#
        );
        Completion::new().tool_call("bash", &args).usage(usage).reply()
    });
    steps
}

#[test]
#[allow(clippy::print_stderr)]
fn a_200_step_session_in_a_32k_window_completes_compacting_several_times() {
    let env = Env::new();
    let window = env.patch("window.yaml", WINDOW);
    // The raw byte-prefix bound below holds for the base tool set: tool declarations follow the
    // messages in the body, so more tools lower it. The delegation tools are off here.
    let base_tools = env.patch("base-tools.yaml", BASE_TOOLS);
    script(env.server());
    let out = env.exec(&[
        "--json",
        "--session",
        "long",
        "--patch",
        window.to_str().unwrap(),
        "--patch",
        base_tools.to_str().unwrap(),
        "Run the steps",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events = env.stored_events();
    assert_eq!(
        kinds(&json)
            .iter()
            .filter(|k| k.starts_with("compaction/"))
            .count(),
        kinds(&events)
            .iter()
            .filter(|k| k.starts_with("compaction/"))
            .count(),
        "--json shows every compaction event"
    );
    let last_text = events
        .iter()
        .rev()
        .find(|e| e["type"] == "assistant/message")
        .unwrap()["data"]["message"]["content"][0]["text"]
        .clone();
    assert_eq!(last_text, "ALL DONE");
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "compaction/end")
        .collect();
    let summaries = events
        .iter()
        .filter(|e| e["type"] == "compaction/summary")
        .count();
    assert!(summaries >= 3, "only {summaries} compactions");
    assert_eq!(ends.len(), summaries, "every bracket landed");
    assert!(
        ends.iter().all(|e| e["data"].get("error").is_none()),
        "{ends:?}"
    );
    let prunes = events
        .iter()
        .filter(|e| e["type"] == "compaction/prune")
        .count();
    assert!(prunes >= 1, "the pruner never ran");
    let tokens: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "dsh/compaction-tokens")
        .collect();
    assert_eq!(tokens.len(), summaries);
    for t in &tokens {
        let (b, a) = (
            t["data"]["tokensBefore"].as_u64().unwrap(),
            t["data"]["tokensAfter"].as_u64().unwrap(),
        );
        assert!(b > 25_600 && a < b / 2, "before {b}, after {a}");
    }

    // Which conversation requests start a series: a request/header since the previous request.
    let mut starts = Vec::new();
    let mut header = false;
    for e in &events {
        match e["type"].as_str().unwrap() {
            "request/header" => header = true,
            "assistant/message" => {
                starts.push(header);
                header = false;
            }
            _ => {}
        }
    }
    let requests: Vec<RecordedRequest> = env
        .server()
        .requests()
        .into_iter()
        .filter(|r| r.is_chat())
        .collect();
    let conversation: Vec<&RecordedRequest> = requests.iter().filter(|r| !is_summary(r)).collect();
    assert_eq!(conversation.len(), STEPS + 1);
    assert_eq!(starts.len(), conversation.len());
    for (k, req) in conversation.iter().enumerate().skip(1) {
        if !starts[k] {
            let v = dsh_rule_violations(&req.body, Some(&conversation[k - 1].body));
            assert!(v.is_empty(), "request {k}: {v:?}");
        }
    }
    let series = starts.iter().filter(|s| **s).count();
    assert!(series > summaries, "each compaction starts a series");

    // Each summary request is the previous request plus the instruction.
    let mut ratios = Vec::new();
    let mut raws = Vec::new();
    for (i, req) in requests.iter().enumerate() {
        if !is_summary(req) {
            continue;
        }
        let prev = &requests[i - 1];
        assert!(!is_summary(prev));
        let (pm, sm) = (prev.body_json().unwrap(), req.body_json().unwrap());
        let (pm, sm) = (
            pm["messages"].as_array().unwrap(),
            sm["messages"].as_array().unwrap(),
        );
        assert!(
            sm.len() > pm.len() && sm[..pm.len()] == pm[..],
            "summary request {i} rewrote history"
        );
        // Byte prefix of the bodies; and the prompt's reuse, which also counts the identical
        // tool declarations (serialised after `messages` in the body, but part of the
        // provider's cached prompt).
        let common = common_prefix_len(&prev.body, &req.body);
        let raw = common as f64 / prev.body.len() as f64;
        let (pb, sb) = (prev.body_json().unwrap(), req.body_json().unwrap());
        assert_eq!(
            pb["tools"], sb["tools"],
            "the summary request offers the same tools"
        );
        let tools = serde_json::to_string(&pb["tools"]).unwrap().len();
        let ratio = (common + tools) as f64 / prev.body.len() as f64;
        raws.push(raw);
        ratios.push(ratio);
        assert!(
            raw >= 0.9,
            "summary request {i} reuses only {raw:.3} of the previous body"
        );
        assert!(
            ratio >= 0.95,
            "summary request {i} reuses only {ratio:.3} of the previous prompt"
        );
        // The request after it opens with the checkpoint.
        let next = requests[i + 1].body_json().unwrap();
        let checkpoint = next["messages"][1]["content"].as_str().unwrap();
        assert!(
            checkpoint.starts_with("This is an automatically generated checkpoint"),
            "{checkpoint}"
        );
        assert!(checkpoint.contains(SUMMARY));
    }
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    let raw_min = raws.iter().copied().fold(f64::INFINITY, f64::min);
    eprintln!(
        "compactions: {summaries}, prunes: {prunes}, reused prompt: min {min:.4}, mean {mean:.4}; raw body prefix: min {raw_min:.4}"
    );

    // The transcript shows the compactions.
    let show = env
        .dsh()
        .args(["sessions", "show", "long"])
        .output()
        .unwrap();
    let text = stdout(&show);
    assert!(
        text.contains("compaction: ~") && text.contains(" → ~"),
        "{text}"
    );
    assert!(text.contains("pruned tool result #"), "{text}");

    // Resume derives the compacted history: the first steps are gone, the checkpoint is there.
    env.server().clear_responder();
    env.server().push(Completion::new().text("resumed").reply());
    let out = env.exec(&[
        "--resume",
        "long",
        "--patch",
        window.to_str().unwrap(),
        "And now?",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "resumed\n");
    let last = env
        .server()
        .requests()
        .into_iter()
        .filter(|r| r.is_chat())
        .last()
        .unwrap();
    let body = last.body_text();
    assert!(!body.contains("step-0-start"), "a shadowed step came back");
    assert!(body.contains("<compacted-summary>"));
    assert!(body.contains(&format!("step-{}-end", STEPS - 1)));
}

/// A bash call printing `bytes` characters between two markers.
fn big_step(step: usize, bytes: usize) -> Completion {
    let args = format!(
        r#"{{"command":"echo step-{step}-start; head -c {bytes} /dev/zero | tr '\\0' 'y'; echo; echo step-{step}-end","description":"Step {step}"}}"#
    );
    Completion::new().tool_call("bash", &args)
}

/// Usage as a provider would report it for `req` (4 bytes per token).
fn usage_of(req: &RecordedRequest) -> Usage {
    Usage::new(req.body.len() as u64 / 4, 30)
}

#[test]
fn a_context_overflow_compacts_maximally_and_retries_once() {
    let env = Env::new();
    let s = env.server();
    s.push(big_step(0, 6000).reply());
    s.push(big_step(1, 6000).reply());
    s.push(dsh_testkit::deepseek::context_exceeded());
    s.push(Completion::new().text(SUMMARY).reply());
    s.push(Completion::new().text("RECOVERED").reply());
    let out = env.exec(&["Go"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "RECOVERED\n");
    let reqs = s.requests();
    assert!(is_summary(&reqs[3]));
    // The summary request is the overflowing request plus the instruction.
    let (over, summary) = (request_messages(s, 2), request_messages(s, 3));
    assert_eq!(summary[..over.len()], over[..]);
    // The retry kept only the newest unit (the second call and its result) verbatim.
    let retry = request_messages(s, 4);
    let text = serde_json::to_string(&retry).unwrap();
    assert!(
        text.contains("<compacted-summary>") && !text.contains("step-0-start"),
        "{text}"
    );
    assert!(text.contains("step-1-end"), "{text}");
    let events = env.stored_events();
    let ks = kinds(&events);
    let start = ks.iter().position(|k| k == "compaction/start").unwrap();
    let attempt = ks.iter().position(|k| k == "assistant/attempt").unwrap();
    assert!(
        attempt < start,
        "the failed attempt is logged before the bracket: {ks:?}"
    );
}

#[test]
fn a_second_overflow_ends_the_turn_with_the_error() {
    let env = Env::new();
    let s = env.server();
    s.push(big_step(0, 6000).reply());
    s.push(big_step(1, 6000).reply());
    s.push(dsh_testkit::deepseek::context_exceeded());
    s.push(Completion::new().text(SUMMARY).reply());
    s.push(dsh_testkit::deepseek::context_exceeded());
    let out = env.exec(&["Go"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("CONTEXT_WINDOW_EXCEEDED"), "{err}");
    assert_eq!(s.request_count(), 5, "one compaction, one retry, no more");
}

#[test]
fn a_failed_summary_keeps_the_history_and_says_why() {
    let env = Env::new();
    let window = env.patch("window.yaml", WINDOW);
    let steps = Arc::new(AtomicUsize::new(0));
    let counter = steps.clone();
    env.server().set_responder(move |req| {
        if is_summary(req) {
            return dsh_testkit::deepseek::server_error();
        }
        let step = counter.fetch_add(1, Ordering::SeqCst);
        if step >= 14 {
            return Completion::new().text("DONE").usage(usage_of(req)).reply();
        }
        big_step(step, 8000).usage(usage_of(req)).reply()
    });
    let out = env.exec(&["--patch", window.to_str().unwrap(), "Go"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "DONE\n");
    let events = env.stored_events();
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "compaction/end")
        .collect();
    assert!(!failed.is_empty());
    for e in &failed {
        let why = e["data"]["error"].as_str().unwrap();
        assert!(
            why.contains("summary failed") && why.contains("SERVER"),
            "{why}"
        );
    }
    assert!(!kinds(&events).iter().any(|k| k == "compaction/summary"));
    // Nothing was replaced: every conversation request byte-extends the previous one.
    let conversation: Vec<RecordedRequest> = env
        .server()
        .requests()
        .into_iter()
        .filter(|r| r.is_chat() && !is_summary(r))
        .collect();
    for w in conversation.windows(2) {
        let v = dsh_rule_violations(&w[1].body, Some(&w[0].body));
        assert!(v.is_empty(), "{v:?}");
    }
}

#[test]
fn sigint_during_a_compaction_closes_the_bracket_and_resume_continues() {
    let env = Env::new();
    let window = env.patch("window.yaml", WINDOW);
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let tx = std::sync::Mutex::new(tx);
    let counter = AtomicUsize::new(0);
    env.server().set_responder(move |req| {
        if is_summary(req) {
            let _ = tx.lock().unwrap().send(());
            return dsh_testkit::Reply::sse().stall_head();
        }
        big_step(counter.fetch_add(1, Ordering::SeqCst), 8000)
            .usage(usage_of(req))
            .reply()
    });
    let mut child = env.spawn(&[
        "--session",
        "cut",
        "--patch",
        window.to_str().unwrap(),
        "Go",
    ]);
    rx.recv_timeout(std::time::Duration::from_secs(120))
        .expect("no summary request");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let events = env.stored_events();
    let ks = kinds(&events);
    let start = ks.iter().rposition(|k| k == "compaction/start").unwrap();
    assert_eq!(ks[start + 1], "compaction/end", "{ks:?}");
    let why = events[start + 1]["data"]["error"].as_str().unwrap();
    assert!(why.contains("cancelled"), "{why}");
    assert_eq!(
        events
            .iter()
            .rev()
            .find(|e| e["type"] == "turn/end")
            .unwrap()["data"]["reason"]["kind"],
        "aborted"
    );
    // The log is consistent: resume continues with the full (uncompacted) history.
    env.server().clear_responder();
    env.server().push(Completion::new().text("again").reply());
    let out = env.exec(&["--resume", "cut", "Continue"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let last = env
        .server()
        .requests()
        .into_iter()
        .filter(|r| r.is_chat())
        .last()
        .unwrap();
    assert!(last.body_text().contains("step-0-start"));
    assert!(!last.body_text().contains("<compacted-summary>"));
}

/// An upstream fixture as stored JSONL for session `id` in `cwd` (placeholders filled: one
/// value per token, stub tool schemas for `{{tools}}`).
fn upstream_fixture(name: &str, id: &str, cwd: &str) -> Vec<u8> {
    fn fill(v: &mut Value, id: &str, cwd: &str) {
        match v {
            Value::String(s) if s.contains("{{") => {
                let mut out = String::new();
                let mut rest = s.as_str();
                while let Some(i) = rest.find("{{") {
                    let j = rest[i..].find("}}").unwrap() + i;
                    out.push_str(&rest[..i]);
                    let token = &rest[i + 2..j];
                    out.push_str(&match token {
                        "cwd" => cwd.to_owned(),
                        "system" => "You are a fixture.".to_owned(),
                        t if t.starts_with("session") => id.to_owned(),
                        t => format!("x-{}", t.replace(':', "-")),
                    });
                    rest = &rest[j + 2..];
                }
                out.push_str(rest);
                *s = out;
            }
            Value::Array(a) => a.iter_mut().for_each(|x| fill(x, id, cwd)),
            Value::Object(m) => {
                if m.get("tools").and_then(Value::as_str) == Some("{{tools}}") {
                    m.insert(
                        "tools".into(),
                        serde_json::json!([{"name": "bash", "description": "Run a shell command.",
                            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}]),
                    );
                }
                m.values_mut().for_each(|x| fill(x, id, cwd));
            }
            _ => {}
        }
    }
    let path = format!(
        "{}/../../fixtures/upstream-sessions/v4/{name}/session.v4.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut row: Value = serde_json::from_str(line).unwrap();
        fill(&mut row, id, cwd);
        if i > 0 {
            let m = row.as_object_mut().unwrap();
            m.insert("seq".into(), (i - 1).into());
            m.insert("time".into(), (i as u64).into());
        }
        out.extend(serde_json::to_vec(&row).unwrap());
        out.push(b'\n');
    }
    out
}

#[test]
fn the_upstream_compaction_fixtures_resume_and_continue() {
    for name in ["compaction", "image-offload-compaction"] {
        let env = Env::new();
        let id = format!("fx-{name}");
        // Create a stored session under that id, then put the fixture in its place.
        env.server().push(Completion::new().text("seed").reply());
        let out = env.exec(&["--session", &id, "seed"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let files = session_files(&env.home.path().join("sessions"));
        let cwd = env.cwd().display().to_string();
        replace_log(&files[0], upstream_fixture(name, &id, &cwd));
        env.server()
            .push(Completion::new().text("continued").reply());
        let out = env.exec(&["--resume", &id, "Go on"]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        assert_eq!(stdout(&out), "continued\n");
        let messages = request_messages(env.server(), 1);
        let text = serde_json::to_string(&messages).unwrap();
        // The checkpoint is sent in place of the span it shadowed; the new prompt comes last.
        assert!(text.contains("<compacted-summary>"), "{name}: {text}");
        let is_checkpoint = |m: &Value| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.contains("<compacted-summary>"))
        };
        let checkpoints: Vec<usize> = (0..messages.len())
            .filter(|i| is_checkpoint(&messages[*i]))
            .collect();
        assert_eq!(checkpoints.len(), 1, "{name}");
        let prompt = messages
            .iter()
            .position(|m| m["content"] == "Go on")
            .unwrap();
        assert!(checkpoints[0] < prompt, "{name}");
        let show = env.dsh().args(["sessions", "show", &id]).output().unwrap();
        assert!(
            stdout(&show).contains("compaction x-id-1 ended"),
            "{}",
            stdout(&show)
        );
    }
}
