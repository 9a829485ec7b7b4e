//! Slash commands through the protocol: the host's builtins and a plugin's commands, listed
//! and run by name, gone when the plugin unloads.

use std::sync::Arc;

use crate::compose::{host_over, open};
use dsh_commands::{
    CommandCall, CommandFuture, CommandProvider, CommandSpec, Commands, CommandsPlugin,
};
use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
use dsh_protocol::{CommandOutcome, CommandSource, ErrorCode, Op};
use dsh_test_harness::{Script, TestHarness, text};

/// A plugin with one fixed command and a provider whose command names the session.
struct Greeter;

struct PerSession;

impl CommandProvider for PerSession {
    fn commands(&self, agent: &Arc<dyn dsh_agent::Agent>) -> Vec<CommandSpec> {
        vec![CommandSpec::new(
            format!("whoami-{}", agent.id().len()),
            "Names the session",
        )]
    }
    fn run(&self, name: &str, call: CommandCall) -> Option<CommandFuture> {
        (name == format!("whoami-{}", call.agent.id().len())).then(|| {
            let id = call.agent.id().to_owned();
            Box::pin(async move { Ok(CommandOutcome::Done { text: id }) }) as CommandFuture
        })
    }
}

impl Plugin for Greeter {
    const NAME: &'static str = "greeter";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Commands>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let commands = ctx.dep::<dyn Commands>()?;
        let handler = |call: CommandCall| -> CommandFuture {
            Box::pin(async move {
                Ok(CommandOutcome::Done {
                    text: format!("hello {}", call.args),
                })
            })
        };
        commands.register(
            &ctx,
            CommandSpec::new("hello", "Says hello").with_argument_hint("[name]"),
            Arc::new(handler),
        )?;
        commands.provide(&ctx, Arc::new(PerSession))?;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_are_listed_and_run_by_name_and_die_with_their_plugin() {
    let h = TestHarness::builder()
        .plugin::<CommandsPlugin>(EmptyConfig::default())
        .plugin::<Greeter>(EmptyConfig::default())
        .script(Script::Chunks(text("unused")))
        .build()
        .await;
    let (_host, client) = host_over(&h, false);
    let id = open(&client, &h).await;
    let list = client.commands(&id).await.unwrap();
    let names: Vec<&str> = list.iter().map(|c| c.name.as_str()).collect();
    for want in ["cost", "diff", "effort", "hello", "model"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let whoami = format!("whoami-{}", id.len());
    assert!(names.contains(&whoami.as_str()), "{names:?}");
    let hello = list.iter().find(|c| c.name == "hello").unwrap();
    assert_eq!(hello.source, CommandSource::Plugin);
    assert_eq!(hello.argument_hint.as_deref(), Some("[name]"));

    let run = |name: &str, args: &str| Op::RunCommand {
        name: name.into(),
        args: args.into(),
    };
    let out = client.send(&id, run("hello", " world ")).await.unwrap();
    assert_eq!(
        out.command,
        Some(CommandOutcome::Done {
            text: "hello world".into()
        })
    );
    let out = client.send(&id, run(&whoami, "")).await.unwrap();
    assert_eq!(out.command, Some(CommandOutcome::Done { text: id.clone() }));
    // Builtins act on the session.
    client.send(&id, run("effort", "high")).await.unwrap();
    let s = client.session(&id).await.unwrap();
    assert_eq!(s.settings.effort, Some(dsh_protocol::Effort::High));
    let err = client
        .send(&id, run("effort", "extreme"))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRequest);
    assert!(err.message.contains("extreme"), "{err}");
    let out = client.send(&id, run("cost", "")).await.unwrap();
    assert!(matches!(out.command, Some(CommandOutcome::Done { text }) if text.contains("tokens")));
    let err = client.send(&id, run("nope", "")).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::UnknownCommand);
    // The plugin unloads: its commands go with it.
    h.fiber("greeter").dispose().await;
    let names: Vec<String> = client
        .commands(&id)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n == "hello" || n.starts_with("whoami")),
        "{names:?}"
    );
    let err = client.send(&id, run("hello", "")).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::UnknownCommand);
    client.close(&id).await.unwrap();
    h.dispose().await;
}
