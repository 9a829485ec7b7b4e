//! The outcome of a child's run from the events it logged, and the fold of a session's usage
//! with its children's (`dsh/subagent-usage` records) for front ends.

use std::sync::Arc;

use dsh_llm::TokenUsage;
use dsh_session::data::TurnEnd;
use dsh_session::wire::TurnEndReason;
use dsh_session::{CoreEvent, Event};

use crate::{StopReason, SubagentOutcome, SubagentUsage};
use dsh_subagent_api::texts::clip_diagnostic;

/// The outcome of a run from the events the child logged during it.
pub(crate) fn outcome_of(
    child_id: &str,
    events: &[Arc<Event>],
) -> (SubagentOutcome, Vec<SubagentUsage>) {
    let mut usage = TokenUsage::default();
    let mut requests = 0u64;
    let mut last_text = String::new();
    let mut all_text = String::new();
    let mut end: Option<TurnEnd> = None;
    let mut model: Option<String> = None;
    let mut nested = Vec::new();
    for e in events {
        match e.core() {
            Some(CoreEvent::AssistantMessage(m)) => {
                requests += 1;
                if let Some(id) = m.message.source.model_id() {
                    model = Some(id.to_owned());
                }
                if let Some(u) = &m.usage {
                    add_usage(&mut usage, u);
                }
                let text = m.message.text();
                if !text.trim().is_empty() {
                    all_text.push_str(&text);
                    last_text = text;
                }
            }
            Some(CoreEvent::TurnEnd(t)) => end = Some((**t).clone()),
            _ => {
                if let Some(Ok(u)) = e.plugin::<SubagentUsage>() {
                    nested.push(u);
                }
            }
        }
    }
    let (stop_reason, diagnostic) = match end.map(|t| t.reason) {
        Some(TurnEndReason::Completed) => (StopReason::Completed, None),
        Some(TurnEndReason::MaxTokens) => (StopReason::MaxTokens, None),
        Some(TurnEndReason::Error { error }) => (
            StopReason::Error,
            Some(clip_diagnostic(&format!(
                "{}: {}",
                error.code, error.message
            ))),
        ),
        Some(TurnEndReason::Blocked) => (
            StopReason::Error,
            Some("the child's turn was blocked before it started".to_owned()),
        ),
        Some(TurnEndReason::Aborted { .. }) | Some(TurnEndReason::Interrupted) => {
            (StopReason::Aborted, None)
        }
        Some(other) => (
            StopReason::Error,
            Some(format!("the child's turn ended as {}", other.kind())),
        ),
        None => (
            StopReason::Aborted,
            Some("the child ended without finishing its turn".to_owned()),
        ),
    };
    let output = if last_text.is_empty() {
        all_text
    } else {
        last_text
    };
    (
        SubagentOutcome {
            child_id: child_id.to_owned(),
            output,
            stop_reason,
            diagnostic,
            usage,
            requests,
            model,
            structured: None,
        },
        nested,
    )
}

/// Adds `u` to `total` (optional counters stay `None` until one is reported).
pub fn add_usage(total: &mut TokenUsage, u: &TokenUsage) {
    total.input_tokens += u.input_tokens;
    total.output_tokens += u.output_tokens;
    let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    total.total_tokens = sum(total.total_tokens, u.total_tokens);
    total.cache_read_tokens = sum(total.cache_read_tokens, u.cache_read_tokens);
    total.cache_write_tokens = sum(total.cache_write_tokens, u.cache_write_tokens);
    total.reasoning_tokens = sum(total.reasoning_tokens, u.reasoning_tokens);
}

/// One priced share of a session's usage.
#[derive(Clone, Debug, PartialEq)]
pub struct UsageShare {
    /// The model that spent it (`None`: unknown, unpriced).
    pub model: Option<String>,
    /// The tokens.
    pub usage: TokenUsage,
    /// Model requests.
    pub requests: u64,
    /// Whether it was spent by a sub-agent (at any depth).
    pub subagent: bool,
}

/// A session's usage: its own requests (one share per attempt that reported usage) and, from
/// its `dsh/subagent-usage` records, every child run's (and their children's), failed ones too.
pub fn session_usage(events: &[Arc<Event>]) -> Vec<UsageShare> {
    let mut out = Vec::new();
    for e in events {
        match e.core() {
            Some(CoreEvent::AssistantMessage(m)) => {
                if let Some(u) = &m.usage {
                    out.push(UsageShare {
                        model: m.message.source.model_id().map(str::to_owned),
                        usage: *u,
                        requests: 1,
                        subagent: false,
                    });
                }
            }
            Some(_) => {}
            None => {
                if let Some(Ok(u)) = e.plugin::<SubagentUsage>() {
                    child_shares(&u, &mut out);
                }
            }
        }
    }
    out
}

fn child_shares(u: &SubagentUsage, out: &mut Vec<UsageShare>) {
    out.push(UsageShare {
        model: u.model.clone(),
        usage: u.usage,
        requests: u.requests,
        subagent: true,
    });
    for n in &u.nested {
        child_shares(n, out);
    }
}
