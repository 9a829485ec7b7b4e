//! The `checkpoint` and `rewind-command` plugins on the real agent loop and tools pipeline: a
//! stand-in `bash` runs real shell commands in the workspace.

use std::path::Path;
use std::sync::Arc;

use dsh_agent::Agent;
use dsh_checkpoint::{
    CheckpointConfig, CheckpointKind, CheckpointPlugin, CheckpointTaken, RewindCommandPlugin,
};
use dsh_commands::{CommandCall, Commands, CommandsPlugin};
use dsh_kernel::CancellationToken;
use dsh_protocol::CommandOutcome;
use dsh_protocol::command::{RewindFile, RewindFileChange, RewindMode, RewindPreview};
use dsh_test_harness::TestHarness;
use dsh_tools::{FnTool, ToolOutput};
use serde_json::json;

async fn harness(root: &Path) -> TestHarness {
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

async fn bash(h: &TestHarness, agent: &Arc<dyn Agent>, command: &str) {
    let args = json!({ "command": command }).to_string();
    h.tool_turn(agent, &[&[("c1", "bash", &args)]], "done")
        .await;
}

async fn rewind(h: &TestHarness, agent: &Arc<dyn Agent>, args: &str) -> Result<String, String> {
    let commands = h.get::<dyn Commands>();
    let call = CommandCall {
        agent: agent.clone(),
        args: args.to_owned(),
        cancel: CancellationToken::new(),
    };
    match commands.run("rewind", call).await {
        Ok(CommandOutcome::Done { text } | CommandOutcome::SwitchSession { text, .. }) => Ok(text),
        Ok(other) => Err(format!("{other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

async fn preview(h: &TestHarness, agent: &Arc<dyn Agent>, args: &str) -> RewindPreview {
    let commands = h.get::<dyn Commands>();
    let call = CommandCall {
        agent: agent.clone(),
        args: args.to_owned(),
        cancel: CancellationToken::new(),
    };
    match commands.run("rewind", call).await {
        Ok(CommandOutcome::RewindPreview(p)) => p,
        other => panic!("not a preview: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_are_checkpointed_and_slash_rewind_restores_files_and_forks_the_conversation() {
    let store = tempfile::tempdir().unwrap();
    let h = harness(store.path()).await;
    let agent = h.agent().await;
    let read = |p: &str| std::fs::read_to_string(h.dir().join(p)).ok();
    // A turn without tool calls takes no checkpoint.
    h.reply(&agent, "hello", "hi").await;
    bash(&h, &agent, "echo one > f").await;
    bash(&h, &agent, "echo two >> f && echo n > g && rm -f nothing").await;
    let marks: Vec<(u64, CheckpointKind)> = agent
        .session()
        .events()
        .iter()
        .filter_map(|e| e.plugin::<CheckpointTaken>().and_then(Result::ok))
        .map(|c| (c.turn, c.kind))
        .collect();
    assert_eq!(
        marks,
        [
            (2, CheckpointKind::Before),
            (2, CheckpointKind::After),
            (3, CheckpointKind::Before),
            (3, CheckpointKind::After)
        ]
    );

    let list = rewind(&h, &agent, "").await.unwrap();
    assert!(list.contains("1. hello"), "{list}");
    assert!(
        list.contains("0 re-created, 0 restored, 2 deleted"),
        "{list}"
    );
    assert!(
        list.contains("3. go  (0 re-created, 1 restored, 1 deleted)"),
        "{list}"
    );

    // Without `yes`: a preview with the unified diff, nothing changed.
    let p = preview(&h, &agent, "3 code").await;
    assert_eq!(p.to_turn, 3);
    assert_eq!(p.mode, RewindMode::Code);
    assert_eq!(p.confirm, "3 code yes");
    assert_eq!(
        p.files,
        [
            RewindFile {
                path: "f".into(),
                change: RewindFileChange::Restore,
                binary: false,
                added: 0,
                removed: 1
            },
            RewindFile {
                path: "g".into(),
                change: RewindFileChange::Delete,
                binary: false,
                added: 0,
                removed: 1
            }
        ]
    );
    assert!(
        p.diff
            .contains("--- a/f\n+++ b/f\n@@ -1,2 +1 @@\n one\n-two\n"),
        "{}",
        p.diff
    );
    assert!(p.diff.contains("--- a/g\n+++ /dev/null\n"), "{}", p.diff);
    assert_eq!(read("f").as_deref(), Some("one\ntwo\n"));
    let text = rewind(&h, &agent, &p.confirm).await.unwrap();
    assert!(text.contains("Files restored to before turn 3"), "{text}");
    assert_eq!(read("f").as_deref(), Some("one\n"));
    assert!(read("g").is_none());

    // The user edits the file: refused without force.
    std::fs::write(h.dir().join("f"), "user\n").unwrap();
    let p = preview(&h, &agent, "2 code").await;
    assert_eq!(p.conflicts, ["f"]);
    let refused = rewind(&h, &agent, "2 code yes").await.unwrap_err();
    assert!(refused.contains("changed outside dsh"), "{refused}");
    assert_eq!(read("f").as_deref(), Some("user\n"));
    let forced = rewind(&h, &agent, "2 code force yes").await.unwrap();
    assert!(forced.contains("Files restored"), "{forced}");
    assert!(read("f").is_none());

    // Conversation only: a new session with turn 1 and nothing after.
    // The client is told to switch to the fork (the TUI resumes it).
    let call = CommandCall {
        agent: agent.clone(),
        args: "2 conversation yes".into(),
        cancel: CancellationToken::new(),
    };
    let outcome = h.get::<dyn Commands>().run("rewind", call).await.unwrap();
    let CommandOutcome::SwitchSession {
        session_id: child,
        text,
    } = outcome
    else {
        panic!("not a switch: {outcome:?}");
    };
    assert!(text.contains("in a new session"), "{text}");
    assert_eq!(text.split('`').nth(1), Some(child.as_str()), "{text}");
    assert_ne!(child, agent.id());
    let sessions = h.get::<dyn dsh_session::Sessions>();
    let log = sessions.read(&child).unwrap();
    assert_eq!(log.tracker().last_turn(), 1);
    assert!(
        log.events()
            .iter()
            .any(|e| e.plugin::<dsh_checkpoint::Rewound>().is_some())
    );
    assert!(
        rewind(&h, &agent, "9")
            .await
            .unwrap_err()
            .contains("3 turn(s)")
    );
    h.dispose().await;
}
