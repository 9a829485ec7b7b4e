//! The committed schema is what the types generate.

use std::path::PathBuf;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocol.schema.json")
}

/// Fails when the types change without `docs/protocol.schema.json`. Regenerate it with
/// `DSH_UPDATE_SCHEMA=1 cargo test -p dsh-protocol`.
#[test]
fn committed_schema_matches_the_types() {
    let generated = serde_json::to_string_pretty(&dsh_protocol::schema::protocol_schema())
        .expect("schema serialises")
        + "\n";
    let path = committed_path();
    if std::env::var_os("DSH_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).expect("write schema");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/protocol.schema.json is stale: the protocol types changed. Regenerate it with \
         `DSH_UPDATE_SCHEMA=1 cargo test -p dsh-protocol` and describe the change in \
         docs/protocol.md"
    );
}

#[test]
fn every_event_and_op_variant_is_in_the_schema() {
    let schema = dsh_protocol::schema::protocol_schema();
    let text = schema.to_string();
    for tag in [
        "snapshot",
        "sessionConfigured",
        "turnStarted",
        "turnEnded",
        "textDelta",
        "reasoningDelta",
        "assistantMessage",
        "toolCallBegan",
        "toolCallProgress",
        "toolCallEnded",
        "approvalRequested",
        "approvalResolved",
        "usageUpdated",
        "compactionStarted",
        "compactionEnded",
        "subagentStarted",
        "subagentFinished",
        "workflowProgress",
        "jobUpdated",
        "todoList",
        "planMode",
        "title",
        "steerQueued",
        "steerDelivered",
        "steerWithdrawn",
        "sessionForked",
        "error",
        "submit",
        "steer",
        "withdrawSteer",
        "interrupt",
        "answerApproval",
        "answerQuestion",
        "runCommand",
        "setModel",
        "setEffort",
        "create",
        "resume",
        "fork",
    ] {
        assert!(
            text.contains(&format!("\"const\":\"{tag}\"")),
            "the schema lacks the tag {tag}"
        );
    }
}
