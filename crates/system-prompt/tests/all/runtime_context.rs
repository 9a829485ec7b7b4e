//! The §10.3 runtime-context projection, against the reference's exact strings and shapes.

use dsh_system_prompt::ContextSection;
use dsh_system_prompt::runtime_context::{
    CLEARED_TEXT, OwnedContextMessage, RetainedContext, SNAPSHOT_HEADER, propose, render,
};
use serde_json::json;

const SANDBOX: &str = "Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may modify files under the session workspace: \"/home/u/proj\". Some platform temporary areas may also be writable.";
const APPROVAL: &str = "Approval policy: ask. Operations that require approval may ask through the configured answerers; without an available answerer, the request fails closed.";

fn sections() -> Vec<ContextSection> {
    vec![
        ContextSection::new("sandbox:policy", SANDBOX),
        ContextSection::new("approval:policy", APPROVAL),
    ]
}

#[test]
fn the_reference_example_is_reproduced_exactly() {
    let p = propose(&RetainedContext::Absent, &sections()).unwrap();
    // session-format.md §10.3, the example row's `content` and `source`.
    let row: serde_json::Value = serde_json::from_str(r#"{"type":"user/message","data":{"content":[{"type":"text","text":"Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\nCurrent DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may modify files under the session workspace: \"/home/u/proj\". Some platform temporary areas may also be writable.\n\nApproval policy: ask. Operations that require approval may ask through the configured answerers; without an available answerer, the request fails closed."}],"source":{"kind":"runtime-context","form":"snapshot","sections":[{"name":"sandbox:policy","text":"Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may modify files under the session workspace: \"/home/u/proj\". Some platform temporary areas may also be writable."},{"name":"approval:policy","text":"Approval policy: ask. Operations that require approval may ask through the configured answerers; without an available answerer, the request fails closed."}]},"role":"user","id":"m3"},"surfaceOp":"append"}"#).unwrap();
    assert_eq!(
        serde_json::to_string(&p.source_json()).unwrap(),
        serde_json::to_string(&row["data"]["source"]).unwrap(),
        "same members in the same order"
    );
    assert_eq!(
        serde_json::to_value(&p.source).unwrap(),
        row["data"]["source"]
    );
    assert_eq!(
        serde_json::to_value(p.content()).unwrap(),
        row["data"]["content"]
    );
    assert_eq!(p.text, row["data"]["content"][0]["text"]);
    assert!(!p.is_cleared());
}

#[test]
fn nothing_is_proposed_without_sections_and_without_history() {
    assert_eq!(propose(&RetainedContext::Absent, &[]), None);
    assert_eq!(render(&[]), "");
    assert_eq!(
        render(&[ContextSection::new("a", "x")]),
        format!("{SNAPSHOT_HEADER}\n\nx")
    );
}

#[test]
fn an_unchanged_snapshot_is_not_appended_again_and_a_changed_one_is() {
    let text = render(&sections());
    let retained = RetainedContext::Snapshot { seq: 9, text };
    assert_eq!(propose(&retained, &sections()), None);
    let changed = [ContextSection::new("sandbox:policy", "read-only")];
    let p = propose(&retained, &changed).unwrap();
    assert_eq!(p.text, format!("{SNAPSHOT_HEADER}\n\nread-only"));
    assert_eq!(
        p.source_json(),
        json!({"kind":"runtime-context","form":"snapshot","sections":[{"name":"sandbox:policy","text":"read-only"}]})
    );
}

#[test]
fn an_emptied_set_proposes_the_cleared_text_once() {
    let retained = RetainedContext::Snapshot {
        seq: 4,
        text: render(&sections()),
    };
    let p = propose(&retained, &[]).unwrap();
    assert_eq!(
        p.text,
        "Current runtime context: none. Earlier runtime-context snapshots no longer apply."
    );
    assert_eq!(p.text, CLEARED_TEXT);
    assert_eq!(p.source_json(), json!({"kind":"runtime-context"}));
    assert!(p.is_cleared());
    // Once appended it is retained and not proposed again.
    let mut retained = retained;
    retained.appended(12, p.text.clone());
    assert_eq!(propose(&retained, &[]), None);
    // A snapshot that was shadowed (null) with no sections left: the cleared text again.
    assert_eq!(
        propose(&RetainedContext::Cleared, &[]).map(|p| p.text),
        Some(CLEARED_TEXT.to_owned())
    );
}

#[test]
fn a_shadowed_snapshot_is_re_appended() {
    let mut retained = RetainedContext::Absent;
    let first = propose(&retained, &sections()).unwrap();
    retained.appended(7, first.text.clone());
    assert_eq!(propose(&retained, &sections()), None);
    // A replacement that does not cover seq 7 changes nothing.
    retained.replaced(&[3, 4]);
    assert_eq!(propose(&retained, &sections()), None);
    // Compaction replaced 5..8: the snapshot is gone from history, so it comes back.
    retained.replaced(&[5, 6, 7, 8]);
    assert_eq!(retained, RetainedContext::Cleared);
    assert_eq!(propose(&retained, &sections()), Some(first));
}

#[test]
fn scan_finds_the_newest_current_owned_message() {
    let m = |seq: u64, current: bool| OwnedContextMessage {
        seq,
        text: format!("t{seq}"),
        current,
    };
    assert_eq!(RetainedContext::scan([]), RetainedContext::Absent);
    assert_eq!(
        RetainedContext::scan([m(20, false), m(10, false)]),
        RetainedContext::Cleared
    );
    assert_eq!(
        RetainedContext::scan([m(20, false), m(10, true), m(5, true)]),
        RetainedContext::Snapshot {
            seq: 10,
            text: "t10".into()
        }
    );
    assert_eq!(RetainedContext::scan([m(30, true)]).text(), Some("t30"));
}
