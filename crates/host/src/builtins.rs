//! The host's own slash commands: `/model`, `/effort`, `/cost`, `/diff`.
//!
//! They act on what the host owns (the session's route overrides, its usage) or report on the
//! workspace; plugins add theirs to the same registry (`/compact`, `/plan`, skills, custom
//! commands).

use std::sync::{Arc, Weak};

use dsh_commands::{CommandCall, CommandError, CommandFuture, CommandSpec, Commands};
use dsh_protocol::{CommandOutcome, CommandSource, Effort};

use crate::Inner;

/// The builtins, in the order `/help` lists them.
pub(crate) fn specs() -> Vec<CommandSpec> {
    vec![
        CommandSpec::new("model", "Show or change the model of the next requests")
            .with_argument_hint("[model-id]")
            .with_source(CommandSource::Builtin),
        CommandSpec::new("effort", "Show or change the reasoning effort")
            .with_argument_hint("[off|low|high|max]")
            .with_source(CommandSource::Builtin),
        CommandSpec::new("cost", "Tokens, cache hits and cost of this session")
            .with_source(CommandSource::Builtin),
        CommandSpec::new(
            "diff",
            "The uncommitted changes of the workspace (git diff)",
        )
        .with_source(CommandSource::Builtin),
    ]
}

/// Registers the builtins in `commands` (owned by `ctx`'s fiber).
pub(crate) fn register(
    ctx: &dsh_kernel::Ctx,
    commands: &dyn Commands,
    inner: &Weak<Inner>,
) -> Result<(), dsh_commands::CommandsError> {
    for spec in specs() {
        let name = spec.name.clone();
        let inner = inner.clone();
        let handler = move |call: CommandCall| -> CommandFuture {
            let inner = inner.clone();
            let name = name.clone();
            Box::pin(async move {
                let inner = inner
                    .upgrade()
                    .ok_or_else(|| CommandError::Failed("the host is shutting down".into()))?;
                run(&inner, &name, call).await
            })
        };
        commands.register(ctx, spec, Arc::new(handler))?;
    }
    Ok(())
}

fn done(text: impl Into<String>) -> Result<CommandOutcome, CommandError> {
    Ok(CommandOutcome::Done { text: text.into() })
}

/// Runs builtin `name`.
pub(crate) async fn run(
    inner: &Inner,
    name: &str,
    call: CommandCall,
) -> Result<CommandOutcome, CommandError> {
    let id = call.agent.id().to_owned();
    let not_open = || CommandError::Failed(format!("session `{id}` is not open in this host"));
    let settings = || {
        inner
            .hub(&id)
            .map(|h| h.state.lock().projector.settings.clone())
            .unwrap_or_default()
    };
    match name {
        "model" if call.args.is_empty() => done(format!(
            "model: {}",
            settings().model.unwrap_or_else(|| "(default)".into())
        )),
        "model" => {
            let hub = inner.hub(&id).ok_or_else(not_open)?;
            inner.set_route(&hub, Some(call.args), None);
            done(format!("model: {}", settings().model.unwrap_or_default()))
        }
        "effort" if call.args.is_empty() => done(format!(
            "effort: {}",
            settings().effort.map_or("(default)", Effort::as_str)
        )),
        "effort" => {
            let effort = Effort::parse(&call.args).ok_or_else(|| {
                CommandError::Usage(format!(
                    "unknown effort `{}`: use off, low, high or max",
                    call.args
                ))
            })?;
            let hub = inner.hub(&id).ok_or_else(not_open)?;
            inner.set_route(&hub, None, Some(effort));
            done(format!("effort: {}", effort.as_str()))
        }
        "cost" => {
            let usage = inner
                .hub(&id)
                .map(|h| h.state.lock().projector.total)
                .unwrap_or_default();
            let cost = usage.cost_usd.map_or_else(
                || "no prices for this route".to_owned(),
                |c| format!("${c:.4}"),
            );
            done(format!(
                "tokens: {} in ({} from cache, {:.0}% hit), {} out · cost: {cost}",
                usage.input_tokens + usage.cache_read_tokens,
                usage.cache_read_tokens,
                usage.cache_hit_ratio() * 100.0,
                usage.output_tokens,
            ))
        }
        "diff" => {
            let cwd = call.agent.options().cwd;
            let out = tokio::task::spawn_blocking(move || {
                std::process::Command::new("git")
                    .args(["diff", "--no-color", "--no-ext-diff"])
                    .current_dir(cwd)
                    .output()
            })
            .await
            .map_err(|e| CommandError::Failed(format!("cannot run git: {e}")))?
            .map_err(|e| CommandError::Failed(format!("cannot run git: {e}")))?;
            if !out.status.success() {
                return Err(CommandError::Failed(format!(
                    "git diff: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            let text = String::from_utf8_lossy(&out.stdout);
            if text.trim().is_empty() {
                done("no changes in the workspace")
            } else {
                done(format!("```diff\n{}```", text))
            }
        }
        other => Err(CommandError::Unknown(other.to_owned())),
    }
}
