//! The plugins' commands through the protocol: `/plan` (plan-mode), `/compact`
//! (compaction-basic) and a project's custom command (context), composed as the preset does.

use crate::compose::{host_over, open};
use dsh_commands::CommandsPlugin;
use dsh_kernel::EmptyConfig;
use dsh_protocol::{CommandOutcome, CommandSource, ErrorCode, EventMsg, Op};
use dsh_test_harness::{Script, TestHarness, text, within};
use futures::StreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_compact_and_custom_commands_run_through_the_registry() {
    let h = TestHarness::builder()
        .plugin::<CommandsPlugin>(EmptyConfig::default())
        .plugin_json::<dsh_plan_mode::PlanModePlugin>(serde_json::json!({}))
        .plugin_json::<dsh_compaction::CompactionBasicPlugin>(serde_json::json!({}))
        .plugin::<dsh_plan_mode::PlanCommandPlugin>(EmptyConfig::default())
        .plugin::<dsh_compaction::CompactCommandPlugin>(EmptyConfig::default())
        .plugin_json::<dsh_system_prompt::SystemPromptPlugin>(serde_json::json!({}))
        .plugin_json::<dsh_context::ContextPlugin>(serde_json::json!({}))
        .plugin::<dsh_context::ContextCommandsPlugin>(EmptyConfig::default())
        .script(Script::Chunks(text("hello back")))
        .build()
        .await;
    std::fs::create_dir_all(h.dir().join(".git")).unwrap();
    std::fs::create_dir_all(h.dir().join(".dsh/commands")).unwrap();
    std::fs::write(
        h.dir().join(".dsh/commands/greet.md"),
        "---\ndescription: Greets someone\nargument-hint: NAME\n---\nSay hello to $ARGUMENTS.\n",
    )
    .unwrap();
    let (_host, client) = host_over(&h, false);
    let id = open(&client, &h).await;
    let list = client.commands(&id).await.unwrap();
    let find = |n: &str| list.iter().find(|c| c.name == n).cloned();
    assert_eq!(find("plan").unwrap().source, CommandSource::Plugin);
    assert!(find("compact").is_some(), "{list:?}");
    let greet = find("greet").expect("the custom command is listed");
    assert_eq!(greet.source, CommandSource::Custom);
    assert_eq!(greet.description, "Greets someone");
    assert_eq!(greet.argument_hint.as_deref(), Some("NAME"));

    let run = |name: &str, args: &str| Op::RunCommand {
        name: name.into(),
        args: args.into(),
    };
    let mut events = client.subscribe(&id, None).await.unwrap();
    let out = client.send(&id, run("plan", "")).await.unwrap();
    assert_eq!(
        out.command,
        Some(CommandOutcome::Done {
            text: String::new()
        })
    );
    // The logged plan/mode reaches every subscriber.
    loop {
        let ev = within("no planMode event", events.next()).await.unwrap();
        if let EventMsg::PlanMode { active, .. } = ev.msg {
            assert!(active);
            break;
        }
    }
    client.send(&id, run("plan", "off")).await.unwrap();
    let err = client.send(&id, run("plan", "sideways")).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRequest);
    let out = client.send(&id, run("compact", "")).await.unwrap();
    assert_eq!(
        out.command,
        Some(CommandOutcome::Done {
            text: dsh_compaction::NOTHING_TO_COMPACT.into()
        })
    );
    // A custom command is sent as its prompt and expanded by the context plugin.
    let out = client.send(&id, run("greet", "world")).await.unwrap();
    assert_eq!(
        out.command,
        Some(CommandOutcome::Submitted {
            prompt: "/greet world".into()
        })
    );
    loop {
        let ev = within("no turn end", events.next()).await.unwrap();
        if matches!(ev.msg, EventMsg::TurnEnded { .. }) {
            break;
        }
    }
    let requests = h.llm.requests();
    let sent: String = requests[0].messages.iter().map(|m| m.text()).collect();
    assert!(sent.contains("Say hello to world."), "{sent}");
    client.close(&id).await.unwrap();
    h.dispose().await;
}
