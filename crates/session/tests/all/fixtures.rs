//! Item 6: every upstream fixture loads, derives the expected history, round-trips.

use std::sync::Arc;

use dsh_session::codec::{decode_jsonl, encode_jsonl};
use dsh_session::{SessionLog, vocab};

use crate::common::{Subst, fixture_bytes, fixtures_dir};

/// (file, expected derived `role@seq` list, replace generation, content generation).
const EXPECTED: &[(&str, &str, u64, u64)] = &[
    (
        "v4/text-turn/session.v4.jsonl",
        "system@7 user@8 user@9 assistant@13",
        0,
        0,
    ),
    (
        "v4/bash-tool/session.v4.jsonl",
        "system@7 user@8 user@9 assistant@13 tool@15 assistant@18",
        0,
        0,
    ),
    (
        "v4/parallel-tool-calls/session.v4.jsonl",
        "system@7 user@8 user@9 assistant@13 tool@16 tool@17 assistant@20",
        0,
        0,
    ),
    (
        "v4/cancel/session.v4.jsonl",
        "system@7 user@8 user@9 assistant@13",
        0,
        0,
    ),
    (
        "v4/tool-error/session.v4.jsonl",
        "system@7 user@8 user@9 assistant@13 tool@15 assistant@18 tool@22 assistant@25",
        0,
        0,
    ),
    (
        "v4/compaction/session.v4.jsonl",
        "system@7 user@19 assistant@13 tool@15 assistant@23",
        1,
        1,
    ),
    (
        "v4/image-offload-compaction/session.v4.jsonl",
        "system@7 user@22 user@9 assistant@13 user@25 assistant@27",
        1,
        2,
    ),
    (
        "v4/image-offload-retry/session.v4.jsonl",
        "system@9 user@10 user@11 user@12 user@13 assistant@21 tool@25 assistant@29 tool@31 assistant@35 tool@39 assistant@43 tool@46 assistant@50 tool@57 assistant@61",
        0,
        1,
    ),
    (
        "v4/tool-set-change/session.v4.jsonl",
        "system@7 user@8 user@9 assistant@13 tool@15 developer@19 assistant@20 tool@22 developer@26 assistant@27",
        0,
        0,
    ),
    (
        "v4/tool-set-change-in-history-prompt/session.v4.jsonl",
        "system@7 user@8 user@9 assistant@13 tool@15 system@18 developer@20 assistant@21 tool@23 developer@27 assistant@28",
        0,
        0,
    ),
    (
        "v4/subagent/session.v4.jsonl",
        "system@7 user@8 user@9 assistant@13 tool@16 assistant@19 user@26 assistant@27 user@34 assistant@35 tool@37 assistant@40",
        0,
        0,
    ),
    (
        "v4/subagent/session.1.v4.jsonl",
        "system@8 user@9 user@10 assistant@14",
        0,
        0,
    ),
    (
        "v3/text-turn/session.v3.jsonl",
        "system@7 user@8 user@9 assistant@14",
        0,
        0,
    ),
    (
        "v3/bash-tool/session.v3.jsonl",
        "system@7 user@8 user@9 assistant@13 tool@15 assistant@18",
        0,
        0,
    ),
    (
        "v3/parallel-tool-calls/session.v3.jsonl",
        "system@7 user@8 user@9 assistant@13 tool@16 tool@17 assistant@20",
        0,
        0,
    ),
    (
        "v3/cancel/session.v3.jsonl",
        "system@7 user@8 user@9 assistant@13",
        0,
        0,
    ),
    (
        "v3/cancel-tool-calls/session.v3.jsonl",
        "system@7 user@8 user@9 assistant@13 tool@15 tool@17",
        0,
        0,
    ),
    (
        "v3/provider-retry/session.v3.jsonl",
        "system@7 user@8 user@9 assistant@16",
        0,
        0,
    ),
    (
        "v3/error-finish/writer.expected.jsonl",
        "system@7 user@8 user@9",
        0,
        0,
    ),
    (
        "v3/max-tokens/session.v3.jsonl",
        "system@7 user@8 user@9 assistant@13 user@20 assistant@21",
        0,
        0,
    ),
    (
        "v3/compaction/session.v3.jsonl",
        "system@7 user@21 assistant@13 tool@15 assistant@24",
        1,
        1,
    ),
    (
        "v3/subagent/session.v3.jsonl",
        "system@7 user@8 user@9 assistant@13 tool@16 assistant@19",
        0,
        0,
    ),
    (
        "v3/subagent/session.1.v3.jsonl",
        "system@8 user@9 user@10 assistant@14",
        0,
        0,
    ),
    (
        "v3/resume/session.expected.jsonl",
        "system@15 user@3 user@4 user@16 user@17 user@18 assistant@22",
        1,
        1,
    ),
    (
        "v3/system-prompt-update-tool-change/session.v3.jsonl",
        "system@59 user@8 user@9 assistant@14 tool@16 assistant@20 tool@22 assistant@28 tool@32 assistant@36 tool@39 assistant@43 tool@50 assistant@54 tool@56 assistant@62",
        2,
        2,
    ),
];

pub fn load(file: &str) -> (SessionLog, u64) {
    let path = fixtures_dir().join(file);
    let version = if file.starts_with("v3/") { 3 } else { 4 };
    let bytes = fixture_bytes(&path, &mut Subst::default());
    let decoded =
        decode_jsonl(&bytes, version, file, "fixture").unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(!decoded.torn);
    let log = SessionLog::replay(decoded.header, decoded.events)
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    (log, decoded.source_version)
}

fn derived(log: &SessionLog) -> String {
    log.surface()
        .derive_nodes()
        .iter()
        .map(|n| format!("{}@{}", n.message.role.as_str(), n.seq))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn every_fixture_loads_and_derives_the_expected_history() {
    let mut failures = Vec::new();
    for (file, expected, rg, cg) in EXPECTED {
        let path = fixtures_dir().join(file);
        let version = if file.starts_with("v3/") { 3 } else { 4 };
        let bytes = fixture_bytes(&path, &mut Subst::default());
        let decoded = match decode_jsonl(&bytes, version, file, "fixture") {
            Ok(d) => d,
            Err(e) => {
                failures.push(format!("{file}: decode: {e}"));
                continue;
            }
        };
        let log = match SessionLog::replay(decoded.header, decoded.events) {
            Ok(l) => l,
            Err(e) => {
                failures.push(format!("{file}: replay: {e}"));
                continue;
            }
        };
        let got = derived(&log);
        if got != *expected {
            failures.push(format!(
                "{file}: derived\n  got      {got}\n  expected {expected}"
            ));
        }
        let gens = (
            log.surface().replace_generation(),
            log.surface().content_generation(),
        );
        if gens != (*rg, *cg) {
            failures.push(format!(
                "{file}: generations {gens:?}, expected {:?}",
                (rg, cg)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn v4_fixtures_written_back_give_the_same_events() {
    for (file, ..) in EXPECTED.iter().filter(|e| e.0.starts_with("v4/")) {
        let (log, _) = load(file);
        let bytes = encode_jsonl(log.header(), log.events());
        let again = decode_jsonl(&bytes, 4, file, "x").unwrap();
        let log2 = SessionLog::replay(again.header, again.events).unwrap();
        assert_eq!(log.header(), log2.header(), "{file}");
        assert_eq!(log.events().len(), log2.events().len());
        for (a, b) in log.events().iter().zip(log2.events()) {
            assert_eq!(a, b, "{file}");
        }
        // Writing the fixture's own rows back reproduces each row's JSON exactly.
        let original = fixture_bytes(&fixtures_dir().join(file), &mut Subst::default());
        let orig_rows: Vec<serde_json::Value> = original
            .split(|b| *b == b'\n')
            .skip(1)
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        for (ev, row) in log.events().iter().zip(orig_rows) {
            assert_eq!(ev.to_json(), row, "{file} seq {}", ev.seq());
        }
    }
}

#[test]
fn v3_fixtures_migrate_to_v4_forms() {
    for (file, ..) in EXPECTED.iter().filter(|e| e.0.starts_with("v3/")) {
        let (log, source) = load(file);
        assert_eq!(source, 3);
        assert_eq!(log.header().version, 4);
        for ev in log.events() {
            let d = ev.data();
            if ev.kind() == vocab::TOOL_RESULT {
                assert_eq!(d["message"]["role"], "tool", "{file}");
                assert_eq!(d["message"]["toolCallId"], d["message"]["source"]["callId"]);
            }
            let text = ev.to_json_line();
            assert!(!text.contains("\"kind\":\"plugin\""), "{file}: {text}");
            assert!(!text.contains("\"type\":\"tool-result\""), "{file}: {text}");
        }
        let bytes = encode_jsonl(log.header(), log.events());
        let again = decode_jsonl(&bytes, 4, file, "x").unwrap();
        let log2 = SessionLog::replay(again.header, again.events).unwrap();
        let a: Vec<_> = log.events().iter().map(Arc::clone).collect();
        assert_eq!(a.len(), log2.events().len());
    }
}

#[test]
fn v3_bash_tool_result_is_lifted_exactly() {
    let (log, _) = load("v3/bash-tool/session.v3.jsonl");
    let ev = &log.events()[15];
    let msg = &ev.data()["message"];
    let keys: Vec<_> = msg.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        ["role", "source", "toolCallId", "content", "isError", "id"]
    );
    assert_eq!(
        log.events()[7].data()["message"]["source"],
        serde_json::json!({"kind": "system-prompt"})
    );
}
