//! A scripted answerer: answers approval requests from a configured list, in order. For tests
//! and unattended automation (a front end that knows its answers in advance).

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Plugin, schemars};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde::Deserialize;

use dsh_approval_api::{ApprovalAnswer, ApprovalAnswerer, ApprovalRequest};

/// One scripted answer.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScriptedAnswer {
    /// `allow-once`, `allow-always`, `deny`, `cancel` or `no-answer`.
    pub decision: ScriptedDecision,
    /// The reason of a `deny`, shown to the model.
    #[serde(default)]
    pub reason: Option<String>,
}

/// The decision of a scripted answer.
#[derive(Clone, Copy, Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ScriptedDecision {
    /// Allow once.
    AllowOnce,
    /// Allow always.
    AllowAlways,
    /// Deny.
    Deny,
    /// Cancel.
    Cancel,
    /// Never answer (the question stays pending until the approval timeout denies it).
    NoAnswer,
}

/// Config of `approval-scripted`.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScriptedAnswererConfig {
    /// The answers, used in order; once they run out every question is cancelled.
    #[serde(default)]
    pub answers: Vec<ScriptedAnswer>,
}

/// The `approval-scripted` plugin: provides an [`ApprovalAnswerer`] that replays its answers.
#[derive(Debug)]
pub struct ScriptedAnswererPlugin;

struct Scripted {
    answers: Mutex<std::collections::VecDeque<ScriptedAnswer>>,
}

impl ApprovalAnswerer for Scripted {
    fn answer<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        let next = self.answers.lock().pop_front();
        tracing::debug!(id = %request.id, tool = %request.tool_name, ?next, "scripted approval answer");
        Box::pin(async move {
            match next {
                Some(ScriptedAnswer {
                    decision: ScriptedDecision::AllowOnce,
                    ..
                }) => ApprovalAnswer::AllowOnce,
                Some(ScriptedAnswer {
                    decision: ScriptedDecision::AllowAlways,
                    ..
                }) => ApprovalAnswer::AllowAlways,
                Some(ScriptedAnswer {
                    decision: ScriptedDecision::Deny,
                    reason,
                }) => ApprovalAnswer::Deny { reason },
                Some(ScriptedAnswer {
                    decision: ScriptedDecision::NoAnswer,
                    ..
                }) => std::future::pending().await,
                Some(ScriptedAnswer {
                    decision: ScriptedDecision::Cancel,
                    ..
                })
                | None => ApprovalAnswer::Cancelled,
            }
        })
    }
}

impl Plugin for ScriptedAnswererPlugin {
    const NAME: &'static str = "approval-scripted";
    type Config = ScriptedAnswererConfig;

    async fn apply(ctx: Ctx, config: ScriptedAnswererConfig) -> Result<(), BoxError> {
        let answerer: Arc<dyn ApprovalAnswerer> = Arc::new(Scripted {
            answers: Mutex::new(config.answers.into()),
        });
        ctx.provide::<dyn ApprovalAnswerer>(answerer)?;
        Ok(())
    }
}
