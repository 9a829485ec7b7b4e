//! Clients follow a conversation rewind's fork through the host: the rewind records
//! `dsh/forked` in the old session's log, projected as a committed `sessionForked` event, so
//! two clients watching live are both told, and so is a client that subscribes later (from
//! an earlier seq, from the start, or after the session was closed and is read from disk).

use std::sync::Arc;

use dsh_checkpoint::{CheckpointConfig, CheckpointPlugin, RewindCommandPlugin};
use dsh_commands::CommandsPlugin;
use dsh_host::{Host, HostOptions};
use dsh_protocol::{
    Client, CommandOutcome, Event, EventMsg, EventStream, ForkReason, Op, OpenSession,
    SessionOptions,
};
use dsh_session::PluginEvent;
use dsh_session::forked::SessionForked;
use dsh_test_harness::{TestHarness, within};
use dsh_tools::{FnTool, ToolOutput};
use futures::StreamExt;
use serde_json::json;

async fn harness(root: &std::path::Path) -> TestHarness {
    let config = CheckpointConfig {
        max_file_bytes: 1 << 20,
        root: Some(root.to_path_buf()),
    };
    let h = TestHarness::builder()
        .on_disk_at(root.join("sessions"))
        .plugin::<CommandsPlugin>(Default::default())
        .plugin::<CheckpointPlugin>(config.clone())
        .plugin::<RewindCommandPlugin>(config)
        .build()
        .await;
    h.register_tool(FnTool::new(
        "bash",
        "Runs a command.",
        json!({"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}),
        |ctx, args| async move {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(args["command"].as_str().unwrap_or(""))
                .current_dir(ctx.cwd())
                .output()
                .map_err(|e| dsh_tools::ToolError::new("EXEC", e.to_string()))?;
            Ok(ToolOutput::text(
                String::from_utf8_lossy(&out.stdout).into_owned(),
            ))
        },
    ));
    h
}

/// Events of `stream` up to and including the first that `stop` accepts.
async fn until(stream: &mut EventStream, what: &str, stop: impl Fn(&Event) -> bool) -> Vec<Event> {
    within(what, async {
        let mut seen = Vec::new();
        while let Some(ev) = stream.next().await {
            let done = stop(&ev);
            seen.push(ev);
            if done {
                return seen;
            }
        }
        panic!("the stream ended before {what}: {seen:?}");
    })
    .await
}

fn is_snapshot(ev: &Event) -> bool {
    matches!(ev.msg, EventMsg::Snapshot(_))
}

fn forked(events: &[Event]) -> Vec<(u64, String, Option<u64>)> {
    events
        .iter()
        .filter_map(|e| match &e.msg {
            EventMsg::SessionForked {
                session_id,
                reason: ForkReason::Rewind,
                to_turn,
                ..
            } => Some((e.seq, session_id.clone(), *to_turn)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_of_the_old_session_is_told_of_the_fork_live_and_later() {
    let store = tempfile::tempdir().unwrap();
    let h = harness(store.path()).await;
    let host = Host::new(
        h.root(),
        HostOptions {
            defaults: h.options(),
            answer_approvals: false,
        },
    )
    .unwrap();
    let client: Arc<dyn Client> = host.client();
    let id = client
        .open(OpenSession::Create {
            session_id: None,
            options: SessionOptions {
                cwd: Some(h.dir().display().to_string()),
                ..Default::default()
            },
            prompt: None,
        })
        .await
        .unwrap()
        .id;
    let agent = host.agent(&id).unwrap();
    for command in ["echo one > f", "echo two > g"] {
        let args = json!({ "command": command }).to_string();
        h.tool_turn(&agent, &[&[("c1", "bash", &args)]], "done")
            .await;
    }
    let before = agent.session().last_event().unwrap().seq();
    let history = format!("{:?}", agent.session().derive_messages());

    // Two clients watching live.
    let mut one = client.subscribe(&id, None).await.unwrap();
    let mut two = client.subscribe(&id, None).await.unwrap();
    until(&mut one, "the first snapshot", is_snapshot).await;
    until(&mut two, "the second snapshot", is_snapshot).await;

    let accepted = client
        .send(
            &id,
            Op::RunCommand {
                name: "rewind".into(),
                args: "2 both yes".into(),
            },
        )
        .await
        .unwrap();
    let Some(CommandOutcome::SwitchSession {
        session_id: fork, ..
    }) = accepted.command
    else {
        panic!("not a switch: {accepted:?}");
    };
    assert!(!h.dir().join("g").exists(), "the files were not rewound");

    // The record: in the old log after its last turn, ignorable, not in the model's history.
    let events = agent.session().events();
    let record = events.last().unwrap();
    let data = record.plugin::<SessionForked>().unwrap().unwrap();
    assert_eq!(data.session_id, fork);
    assert_eq!(data.to_turn, Some(2));
    assert!(data.rewind_id.is_some(), "files were restored: {data:?}");
    assert!(record.ignorable());
    assert!(record.seq() > before);
    assert_eq!(format!("{:?}", agent.session().derive_messages()), history);
    // The fork does not carry it (it is where the old branch continues, not a turn of it).
    let fork_log = h.get::<dyn dsh_session::Sessions>().read(&fork).unwrap();
    assert!(
        !fork_log
            .events()
            .iter()
            .any(|e| e.kind() == SessionForked::TYPE)
    );

    let want = vec![(record.seq(), fork.clone(), Some(2))];
    for (name, stream) in [("first", &mut one), ("second", &mut two)] {
        let seen = until(stream, "sessionForked", |e| {
            matches!(e.msg, EventMsg::SessionForked { .. })
        })
        .await;
        assert_eq!(forked(&seen), want, "the {name} client");
    }

    // A client subscribing after the rewind, from a seq before it: the replay tells it.
    let mut late = client.subscribe(&id, Some(before)).await.unwrap();
    let seen = until(&mut late, "the late snapshot", is_snapshot).await;
    assert_eq!(forked(&seen), want, "{seen:?}");
    // From the start too (a page reloaded on the old session shows where it continues).
    let mut fresh = client.subscribe(&id, None).await.unwrap();
    let seen = until(&mut fresh, "the full replay's snapshot", is_snapshot).await;
    assert_eq!(forked(&seen), want);

    // Closed in the host, the session is read back from disk: the record was written.
    client.close(&id).await.unwrap();
    let mut stored = client.subscribe(&id, None).await.unwrap();
    let seen = until(&mut stored, "the stored session's snapshot", is_snapshot).await;
    assert_eq!(forked(&seen), want);
    h.dispose().await;
}
