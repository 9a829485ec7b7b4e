//! Item 5: every upstream fixture log, stored in a tempdir, resumed through the agent loop and
//! continued by one more turn, produces a request whose history is what the fixture's model saw.
//!
//! The loader follows `fixtures/upstream-sessions/README.md`: placeholders substituted
//! with one mapping per file, tool name lists and `{{tools}}` replaced by stub schemas, `seq` =
//! row index and `time` = `createdAt + seq`. A v4 fixture is written through
//! [`JsonlStore`]'s own writer (create, append, flush, close). A v3 fixture is placed verbatim
//! (with its seqs and times) as `session.v3.jsonl` in the directory `JsonlStore::session_dir`
//! names: the store's writer only writes v4, and resuming the v3 file exercises the store's
//! v3→v4 conversion and successor publication on the real resume path.
//!
//! A second test cuts every v4 fixture after each event that leaves its last turn open (127 cut
//! points), as a crash would, and checks the resumed request against the repaired history.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_agent::{AgentOptions, Agents, AgentsPlugin, ResumeAgent};
use dsh_agent_loop::{AgentLoopConfig, AgentLoopPlugin};
use dsh_kernel::{EmptyConfig, Kernel, PluginRegistry};
use dsh_llm::Role;
use dsh_llm::service::LlmPlugin;
use dsh_session::codec::decode_jsonl;
use dsh_session::{SessionHeader, SessionLog, SessionPersistence, SessionsPlugin};
use dsh_session_jsonl::{JsonlConfig, JsonlPlugin, JsonlStore};
use dsh_system_prompt::runtime_context::{CLEARED_TEXT, SOURCE_KIND};
use dsh_tools::ToolsPlugin;
use serde_json::{Value, json};

use crate::support::*;

fn fixtures_dir() -> PathBuf {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/upstream-sessions"
    ))
    .to_path_buf()
}

/// Fixtures that are not resumed, with the reason. The test checks that each of them really is
/// refused, so the list cannot go stale silently.
///
/// Empty today: every v3 log converts, and subagent children (`session.1.*`) resume like any
/// session (the loop does not look at `parentSession`/`origin`; their parents' catalogs are not
/// consulted), so all 23 fixture logs are resumed and continued.
const SKIPPED: &[(&str, &str)] = &[];

/// Placeholder substitution: one consistent mapping per file.
#[derive(Default)]
struct Subst {
    map: HashMap<String, String>,
    fresh: u64,
}

impl Subst {
    fn token(&mut self, name: &str) -> String {
        if name == "cwd" {
            return "/tmp/dsh-fixture-cwd".into();
        }
        let n = self.map.len();
        self.map
            .entry(name.to_owned())
            .or_insert_with(|| format!("fx{n}-{}", name.replace([':', '-'], "_")))
            .clone()
    }

    fn string(&mut self, s: &str, key: Option<&str>, in_header: bool) -> String {
        // Unnumbered message ids (and `{{sessionId}}` as a message id in v3/resume) stand for
        // different messages: a fresh id per occurrence.
        if !in_header && key == Some("id") && (s == "{{messageId}}" || s == "{{sessionId}}") {
            self.fresh += 1;
            return format!("fresh-{}", self.fresh);
        }
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("{{") {
            let Some(j) = rest[i..].find("}}") else { break };
            out.push_str(&rest[..i]);
            out.push_str(&self.token(&rest[i + 2..i + j]));
            rest = &rest[i + j + 2..];
        }
        out.push_str(rest);
        out
    }

    fn value(&mut self, v: &mut Value, key: Option<&str>, in_header: bool) {
        match v {
            Value::String(s) if s.contains("{{") => *s = self.string(s, key, in_header),
            Value::Array(a) => a.iter_mut().for_each(|x| self.value(x, None, in_header)),
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    self.value(x, Some(k.as_str()), in_header);
                }
            }
            _ => {}
        }
    }
}

fn stub_tool(name: &str) -> Value {
    json!({"name": name, "description": name, "parameters": {"type": "object", "properties": {}}})
}

/// A fixture file as stored bytes: header line, then rows with `seq` and `time`.
fn fixture_bytes(file: &Path) -> Vec<u8> {
    let mut subst = Subst::default();
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines = text.lines();
    let mut header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    subst.value(&mut header, None, true);
    let created = header["createdAt"].as_i64().unwrap();
    let mut out = serde_json::to_vec(&header).unwrap();
    out.push(b'\n');
    for (i, line) in lines.enumerate() {
        let mut row: Value = serde_json::from_str(line).unwrap();
        if row["type"] == "request/header" {
            let tools = &mut row["data"]["header"]["tools"];
            let replaced = match &*tools {
                Value::String(s) if s == "{{tools}}" => {
                    Some(json!([stub_tool("bash"), stub_tool("read")]))
                }
                Value::Array(names) if names.iter().all(Value::is_string) => Some(Value::Array(
                    names
                        .iter()
                        .map(|n| stub_tool(n.as_str().unwrap()))
                        .collect(),
                )),
                _ => None,
            };
            if let Some(r) = replaced {
                *tools = r;
            }
        }
        subst.value(&mut row, None, false);
        let m = row.as_object_mut().unwrap();
        m.insert("seq".into(), json!(i));
        m.insert("time".into(), json!(created + i as i64));
        out.extend(serde_json::to_vec(&row).unwrap());
        out.push(b'\n');
    }
    out
}

/// Every fixture log, as paths relative to the fixtures directory, sorted.
fn fixture_files() -> Vec<String> {
    let mut out = Vec::new();
    for generation in ["v3", "v4"] {
        for scenario in std::fs::read_dir(fixtures_dir().join(generation)).unwrap() {
            let scenario = scenario.unwrap().path();
            for file in std::fs::read_dir(&scenario).unwrap() {
                let file = file.unwrap().path();
                if file.extension().is_some_and(|e| e == "jsonl") {
                    let rel = file.strip_prefix(fixtures_dir()).unwrap();
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
    }
    out.sort();
    out
}

/// Writes the fixture as a stored session under `root`; returns its admitted log. With `cut`,
/// only the first `cut` events are stored (a v4 log that crashed there).
fn store_fixture(file: &str, root: &Path, cut: Option<usize>) -> Result<SessionLog, String> {
    let version = if file.starts_with("v3/") { 3 } else { 4 };
    let bytes = fixture_bytes(&fixtures_dir().join(file));
    let decoded =
        decode_jsonl(&bytes, version, file, "fixture").map_err(|e| format!("decode: {e}"))?;
    let mut events = decoded.events;
    if let Some(n) = cut {
        assert_eq!(version, 4, "only v4 fixtures are cut");
        events.truncate(n);
    }
    let log = SessionLog::replay(decoded.header, events).map_err(|e| format!("admission: {e}"))?;
    let store = JsonlStore::new(root);
    if version == 4 {
        let header: &SessionHeader = log.header();
        let id = header.id.clone();
        store.create(header).map_err(|e| e.to_string())?;
        store.append(&id, log.events()).map_err(|e| e.to_string())?;
        store.flush(&id).map_err(|e| e.to_string())?;
        store.close(&id).map_err(|e| e.to_string())?;
    } else {
        let dir = store.session_dir(log.header());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("session.v3.jsonl"), &bytes).unwrap();
    }
    Ok(log)
}

/// A kernel like the support harness's, with the JSONL persistence rooted at `root`.
pub(crate) async fn kernel_with_store(root: &Path, llm: Arc<Scripted>) -> Kernel {
    let kernel = Kernel::new(PluginRegistry::new());
    for h in [
        kernel
            .mount_plugin::<ScriptedRoute>(ScriptedRouteConfig {
                route: None,
                adapter: Some(llm),
            })
            .unwrap(),
        kernel.mount_plugin::<LlmPlugin>(EmptyConfig {}).unwrap(),
        kernel.mount_plugin::<AgentsPlugin>(EmptyConfig {}).unwrap(),
        kernel
            .mount_plugin::<JsonlPlugin>(JsonlConfig {
                root: Some(root.to_path_buf()),
                ..Default::default()
            })
            .unwrap(),
        kernel
            .mount_plugin::<SessionsPlugin>(EmptyConfig {})
            .unwrap(),
        kernel
            .mount_plugin::<ToolsPlugin>(Default::default())
            .unwrap(),
        kernel
            .mount_plugin::<AgentLoopPlugin>(AgentLoopConfig::default())
            .unwrap(),
    ] {
        h.ready().await.unwrap();
    }
    kernel
}

/// The history the next request must carry: the fixture's derived messages without developer
/// messages (never sent), and without system messages.
///
/// Why no system messages: the harness mounts no `system-prompt` plugin, so the rendered prompt
/// is "". The scripted route declares no `systemPromptUpdate: in-history`, so
/// reconciliation (format §10.2) consolidates into the head: every later system node with text
/// is replaced by an empty one and the head is replaced by the rendered "" (or, with no system
/// node at all, an empty one is appended). An empty system node derives no message. Everything
/// else is the fixture's history, byte for byte.
fn expected_history(log: &SessionLog) -> Vec<String> {
    log.derive_messages()
        .iter()
        .filter(|m| m.role != Role::Developer && m.role != Role::System)
        .map(|m| serde_json::to_string(&**m).unwrap())
        .collect()
}

/// Stores, resumes and continues one fixture; returns a refusal reason or checks the request.
async fn resume_one(file: &str, cut: Option<usize>) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let mut log = store_fixture(file, dir.path(), cut)?;
    // What the resume must see: the stored log with crash repair (format §15) applied, exactly
    // as `Sessions::open` does for a log whose last turn is open.
    log.repair().map_err(|e| format!("repair: {e}"))?;
    let id = log.header().id.clone();
    let llm = Arc::new(Scripted::default());
    llm.push(Script::Chunks(text("resumed answer")));
    let kernel = kernel_with_store(dir.path(), llm.clone()).await;
    let agents = kernel.root().get::<dyn Agents>().unwrap();
    let resumed = agents
        .resume(
            &kernel.root(),
            ResumeAgent {
                session_id: id.clone(),
                options: AgentOptions {
                    provider: Some("mock".into()),
                    ..Default::default()
                },
                setup: None,
            },
        )
        .await;
    let agent = match resumed {
        Ok(a) => a,
        Err(e) => {
            kernel.dispose().await;
            return Err(format!("resume: {e}"));
        }
    };
    // Turn numbering continues after the fixture's last turn.
    let last_turn = log.tracker().last_turn();
    agent.followup(user("one more turn")).unwrap();
    idle(&agent).await;
    let outcome = check_request(&log, &llm, &agent);
    kernel.dispose().await;
    outcome?;
    // The continued session is stored and reads back with the new turn.
    let stored = JsonlStore::new(dir.path())
        .open_read(&id)
        .map_err(|e| format!("re-read: {e}"))?;
    let reread = SessionLog::replay(stored.header, stored.events)
        .map_err(|e| format!("re-read admission: {e}"))?;
    if reread.tracker().last_turn() != last_turn + 1 {
        return Err(format!(
            "stored last turn {} after resuming turn {last_turn}",
            reread.tracker().last_turn()
        ));
    }
    Ok(())
}

/// Whether the next turn must append the cleared runtime-context snapshot (format §10.3): the
/// harness has no runtime-context sections, so a log that ever held a runtime-context message
/// gets the cleared text, unless its newest current one already is that text.
fn expects_cleared_context(log: &SessionLog) -> bool {
    let mut seen = false;
    for e in log.events().iter().rev() {
        let d = e.data();
        if e.kind() != "user/message" || d["source"]["kind"] != SOURCE_KIND {
            continue;
        }
        seen = true;
        if log.surface().contains(e.seq()) {
            return d["content"][0]["text"] != CLEARED_TEXT;
        }
    }
    seen
}

/// Checks the one request of the continued turn against the fixture.
fn check_request(
    log: &SessionLog,
    llm: &Scripted,
    agent: &Arc<dyn dsh_agent::Agent>,
) -> Result<(), String> {
    let expected = expected_history(log);
    if llm.request_count() != 1 {
        return Err(format!("{} requests instead of 1", llm.request_count()));
    }
    let sent = llm.messages(0);
    // DeepSeek refuses a history with an unanswered tool call.
    crate::properties::calls_answered(&sent)?;
    for (i, (s, e)) in sent.iter().zip(&expected).enumerate() {
        if s != e {
            return Err(format!(
                "message {i} differs from the fixture's history:\n sent:     {s}\n expected: {e}"
            ));
        }
    }
    let request = llm.requests()[0].messages.clone();
    let mut tail: Vec<(Role, String, String)> = request
        .iter()
        .skip(expected.len())
        .map(|m| (m.role, m.source.kind.clone(), m.text()))
        .collect();
    let mut want = vec![(Role::User, "user".to_owned(), "one more turn".to_owned())];
    if expects_cleared_context(log) {
        want.push((Role::User, SOURCE_KIND.to_owned(), CLEARED_TEXT.to_owned()));
    }
    tail.truncate(want.len() + 1);
    if tail != want {
        return Err(format!(
            "after the fixture's {} messages the request carries {tail:?}, expected {want:?}",
            expected.len()
        ));
    }
    let last_turn = log.tracker().last_turn();
    let turns: Vec<u64> = data_of(agent, "turn/start")
        .iter()
        .map(|t| t["turn"].as_u64().unwrap_or(0))
        .collect();
    if turns.last() != Some(&(last_turn + 1)) {
        return Err(format!("turn numbering: {turns:?} after turn {last_turn}"));
    }
    let end = data_of(agent, "turn/end")
        .last()
        .cloned()
        .unwrap_or_default();
    if end["reason"]["kind"] != "completed" {
        return Err(format!("the continued turn ended {end}"));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_upstream_fixture_resumes_and_continues_with_the_fixture_history() {
    let files = fixture_files();
    assert!(files.len() >= 20, "fixtures missing: {files:?}");
    let mut resumed = Vec::new();
    let mut unexpected = Vec::new();
    for file in &files {
        let skip = SKIPPED.iter().find(|(f, _)| f == file);
        match (resume_one(file, None).await, skip) {
            (Ok(()), None) => resumed.push(file.clone()),
            // Refused as documented in SKIPPED.
            (Err(_), Some(_)) => {}
            (Ok(()), Some((_, why))) => unexpected.push(format!(
                "{file} resumed although listed as skipped ({why}): remove it from SKIPPED"
            )),
            (Err(e), None) => unexpected.push(format!("{file}: {e}")),
        }
    }
    assert!(unexpected.is_empty(), "{unexpected:#?}");
    for (file, _) in SKIPPED {
        assert!(files.iter().any(|f| f == file), "{file} is not a fixture");
    }
    assert_eq!(resumed.len() + SKIPPED.len(), files.len(), "{resumed:?}");
}

/// The v4 fixtures cut at every event that leaves the last turn open (a crash there): stored,
/// resumed (the service repairs the open turn: `TOOL_NOT_STARTED` / `TOOL_OUTCOME_UNKNOWN`
/// results, `step/end`, `turn/end`), and continued by one turn whose request must carry the
/// repaired history, with every tool call answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_cut_mid_turn_resume_with_the_repaired_history() {
    let mut failures = Vec::new();
    let mut resumed = 0;
    for file in fixture_files().iter().filter(|f| f.starts_with("v4/")) {
        let bytes = fixture_bytes(&fixtures_dir().join(file));
        let decoded = decode_jsonl(&bytes, 4, file, "fixture").unwrap();
        let mut open = false;
        for (i, ev) in decoded.events.iter().enumerate() {
            match ev.kind() {
                "turn/start" => open = true,
                "turn/end" => open = false,
                _ => {}
            }
            let cut_after = matches!(
                ev.kind(),
                "user/message" | "assistant/message" | "tool/call" | "tool/result" | "step/end"
            );
            if !(open && cut_after) {
                continue;
            }
            match resume_one(file, Some(i + 1)).await {
                Ok(()) => resumed += 1,
                Err(e) => failures.push(format!("{file} cut after {i} ({}): {e}", ev.kind())),
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(resumed >= 30, "only {resumed} cut points");
}

/// Copies the session logs under `from` to `to` (what a crash would leave on disk).
fn snapshot(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            snapshot(&path, &target);
        } else if path
            .extension()
            .is_some_and(|e| e == "jsonl" || e == "zstd")
        {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// "Durable before the side effect": while a tool body runs, its `tool/call` is already on
/// disk. A crash at that moment (the disk state copied from inside the tool) resumes with the
/// call answered `TOOL_OUTCOME_UNKNOWN`, and the next request carries that answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_during_a_tool_resumes_with_an_unknown_outcome() {
    let live = tempfile::tempdir().unwrap();
    let crashed = tempfile::tempdir().unwrap();
    let llm = Arc::new(Scripted::default());
    llm.push(Script::Chunks(calls(&[("c1", "probe", "{}")])));
    llm.push(Script::Chunks(text("done")));
    let kernel = kernel_with_store(live.path(), llm.clone()).await;
    let (from, to) = (live.path().to_path_buf(), crashed.path().to_path_buf());
    let tool = dsh_tools::FnTool::new(
        "probe",
        "Snapshots the disk.",
        json!({"type": "object"}),
        move |_c, _a| {
            let (from, to) = (from.clone(), to.clone());
            async move {
                snapshot(&from, &to);
                Ok(dsh_tools::ToolOutput::text("side effect done"))
            }
        },
    );
    let root = kernel.root();
    root.get::<dyn dsh_tools::Tools>()
        .unwrap()
        .register(&root, Arc::new(tool))
        .unwrap();
    let agents = root.get::<dyn Agents>().unwrap();
    let agent = agents
        .create(
            &root,
            dsh_agent::CreateAgent {
                options: AgentOptions {
                    provider: Some("mock".into()),
                    cwd: std::env::temp_dir(),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let id = agent.id().to_owned();
    agent.followup(user("go")).unwrap();
    idle(&agent).await;
    kernel.dispose().await;

    // The crashed disk state: the call, no result, an open turn.
    let llm = Arc::new(Scripted::default());
    llm.push(Script::Chunks(text("after the crash")));
    let kernel = kernel_with_store(crashed.path(), llm.clone()).await;
    let root = kernel.root();
    let agents = root.get::<dyn Agents>().unwrap();
    let agent = agents
        .resume(
            &root,
            ResumeAgent {
                session_id: id,
                options: AgentOptions {
                    provider: Some("mock".into()),
                    ..Default::default()
                },
                setup: None,
            },
        )
        .await
        .unwrap();
    let results = data_of(&agent, "tool/result");
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["error"]["code"], "TOOL_OUTCOME_UNKNOWN");
    assert_eq!(results[0]["message"]["toolCallId"], "c1");
    agent.followup(user("again")).unwrap();
    idle(&agent).await;
    let sent = llm.requests()[0].messages.clone();
    let roles: Vec<&str> = sent.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user"]);
    assert!(sent[2].tool_call_id.as_deref() == Some("c1"));
    assert_eq!(sent[3].text(), "again");
    let turns: Vec<u64> = data_of(&agent, "turn/start")
        .iter()
        .map(|t| t["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [1, 2]);
    kernel.dispose().await;
}
