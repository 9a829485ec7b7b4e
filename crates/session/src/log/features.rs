//! Relationship rules of feature events the core checks (format §4.7): command runs, provider
//! retries, title citations. Their payloads are plugin-owned; the rules read small typed views.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::Value;

use crate::data::SourceKind;
use crate::error::Rejection;
use crate::event::Event;
use crate::json::as_safe_u64;
use crate::vocab::EventKind;

use super::SessionLog;

/// State of the feature-event relationship rules.
#[derive(Debug, Clone, Default)]
pub(super) struct FeatureState {
    /// commandId → whether its `command/done` was logged.
    commands: HashMap<String, bool>,
    /// retryId → (turn, step, retry, started).
    retries: HashMap<String, (u64, u64, u64, bool)>,
}

/// `command/run`, `command/done`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommandView {
    #[serde(default)]
    command_id: Option<Value>,
    #[serde(default)]
    kind: Option<Value>,
    #[serde(default)]
    source_event_seq: Option<Value>,
}

/// `llm/retry`, `llm/retry-started`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RetryView {
    #[serde(default)]
    retry_id: Option<Value>,
    #[serde(default)]
    turn: Option<Value>,
    #[serde(default)]
    step: Option<Value>,
    #[serde(default)]
    retry: Option<Value>,
}

/// `session/title`, `session/title-llm-request`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TitleView {
    #[serde(default)]
    message_seqs: Option<Value>,
}

fn view<T: for<'de> Deserialize<'de>>(ev: &Event) -> Result<T, Rejection> {
    ev.data_as::<T>()
        .map_err(|e| Rejection::Decode(std::sync::Arc::new(e)))
}

fn str_of(v: &Option<Value>) -> &str {
    v.as_ref().and_then(Value::as_str).unwrap_or("")
}

fn u64_of(v: &Option<Value>) -> Option<u64> {
    v.as_ref().and_then(as_safe_u64)
}

impl FeatureState {
    pub(super) fn apply(&mut self, ev: &Event) {
        match ev.event_kind() {
            EventKind::CommandRun | EventKind::CommandDone => {
                if let Ok(c) = ev.data_as::<CommandView>() {
                    let done = *ev.event_kind() == EventKind::CommandDone;
                    self.commands.insert(str_of(&c.command_id).to_owned(), done);
                }
            }
            EventKind::LlmRetry => {
                if let Ok(r) = ev.data_as::<RetryView>() {
                    self.retries.insert(
                        str_of(&r.retry_id).to_owned(),
                        (
                            u64_of(&r.turn).unwrap_or(0),
                            u64_of(&r.step).unwrap_or(0),
                            u64_of(&r.retry).unwrap_or(0),
                            false,
                        ),
                    );
                }
            }
            EventKind::LlmRetryStarted => {
                if let Ok(r) = ev.data_as::<RetryView>()
                    && let Some(s) = self.retries.get_mut(str_of(&r.retry_id))
                {
                    s.3 = true;
                }
            }
            _ => {}
        }
    }
}

impl SessionLog {
    pub(super) fn check_feature(&self, ev: &Event) -> Result<(), Rejection> {
        let f = &self.features;
        let relation = |m: String| Err(Rejection::Relation(m));
        match ev.event_kind() {
            EventKind::CommandRun => {
                let c: CommandView = view(ev)?;
                let id = str_of(&c.command_id);
                if id.is_empty() || f.commands.contains_key(id) {
                    return relation(format!("command/run id \"{id}\" is empty or not unique"));
                }
            }
            EventKind::CommandDone => {
                let c: CommandView = view(ev)?;
                let id = str_of(&c.command_id);
                match f.commands.get(id) {
                    None => {
                        return relation(format!("command/done \"{id}\" follows no command/run"));
                    }
                    Some(true) => {
                        return relation(format!("command/done \"{id}\" is logged twice"));
                    }
                    Some(false) => {}
                }
                if c.source_event_seq.is_some() {
                    let cited = u64_of(&c.source_event_seq)
                        .and_then(|s| self.event(s))
                        .filter(|e| {
                            !matches!(
                                e.event_kind(),
                                EventKind::CommandRun | EventKind::CommandDone
                            )
                        });
                    if cited.is_none() || str_of(&c.kind) != "success" {
                        return relation("command/done sourceEventSeq must name an earlier non-command event, on success only".into());
                    }
                }
            }
            EventKind::LlmRetry => {
                let r: RetryView = view(ev)?;
                let id = str_of(&r.retry_id);
                if id.is_empty() || f.retries.contains_key(id) {
                    return relation(format!("llm/retry id \"{id}\" is empty or not unique"));
                }
            }
            EventKind::LlmRetryStarted => {
                let r: RetryView = view(ev)?;
                let id = str_of(&r.retry_id);
                let (turn, step) = (u64_of(&r.turn).unwrap_or(0), u64_of(&r.step).unwrap_or(0));
                match f.retries.get(id) {
                    Some((t, s, n, false))
                        if *t == turn && *s == step && Some(*n) == u64_of(&r.retry) => {}
                    Some((.., true)) => {
                        return relation(format!("llm/retry-started \"{id}\" is logged twice"));
                    }
                    _ => {
                        return relation(format!(
                            "llm/retry-started \"{id}\" matches no scheduled retry"
                        ));
                    }
                }
            }
            EventKind::SessionTitle | EventKind::SessionTitleLlmRequest => {
                let t: TitleView = view(ev)?;
                let kind = ev.event_kind();
                let Some(Value::Array(seqs)) = &t.message_seqs else {
                    return relation(format!("{kind} messageSeqs must be an array"));
                };
                if *kind == EventKind::SessionTitleLlmRequest && seqs.is_empty() {
                    return relation("session/title-llm-request must cite messages".into());
                }
                let mut seen = HashSet::new();
                for s in seqs {
                    let ok = as_safe_u64(s)
                        .filter(|s| seen.insert(*s))
                        .and_then(|s| self.event(s))
                        .and_then(|e| {
                            e.message()
                                .filter(|_| e.event_kind() == &EventKind::UserMessage)
                        })
                        .is_some_and(|m| SourceKind::of(m) == SourceKind::User);
                    if !ok {
                        return relation(format!(
                            "{kind} messageSeqs must cite distinct earlier human user/message events (bad: {s})"
                        ));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}
