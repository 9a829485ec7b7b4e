//! What `dsh exec` reads from the session's events (the protocol only, locally and with
//! `--server` alike): the streamed text on a terminal, retry notices, the answer and the end of
//! the latest turn, the session's state and background work, and the goal the run worked on.

use std::io::Write;

use std::sync::Arc;

use dsh_protocol::{
    AbortCause, ApprovalDecision, ApprovalRequest, BackgroundWork, Client, EventMsg, EventStream,
    GoalInfo, Op, QuestionAnswer, QuestionRequest, SessionState, TurnEndReason, Usage,
};
use futures::StreamExt;

/// What a headless run tells the model when a server's session asks a person.
const NOBODY_TO_ASK: &str = "No one can answer: this task runs headless (dsh exec). Decide \
                             yourself and say what you assumed.";

/// Answers, on behalf of nobody, what a session on a server asks while `dsh exec --server`
/// drives it: the server's composition may ask for approvals and questions that a local
/// headless run never asks, and with no one to answer the turn would wait forever. Approvals
/// are declined (as a local run's `never` policy leaves refused what the sandbox refuses);
/// questions are answered with [`NOBODY_TO_ASK`]. Each is said on stderr.
pub(crate) struct Headless {
    pub client: Arc<dyn Client>,
    pub session_id: String,
}

impl Headless {
    async fn decline(&self, req: ApprovalRequest) {
        eprintln!(
            "\ndsh: declined {} ({}): dsh exec cannot ask for approval; pass \
             --ask-for-approval never, or run it with `dsh exec --bg` and answer in `dsh attach`",
            req.tool_name,
            req.display.subject.as_deref().unwrap_or(&req.display.title)
        );
        let op = Op::AnswerApproval {
            request_id: req.request_id.clone(),
            decision: ApprovalDecision::Deny {
                reason: Some("no one can approve: the task runs headless (dsh exec)".to_owned()),
            },
        };
        if let Err(e) = self.client.send(&self.session_id, op).await {
            tracing::warn!(error = %e, request = %req.request_id, "declining the approval failed");
        }
    }

    async fn answer(&self, req: QuestionRequest) {
        eprintln!("\ndsh: a question was asked; answered that no one can answer (headless)");
        let answers = req
            .questions
            .iter()
            .map(|q| QuestionAnswer {
                question_id: q.id.clone(),
                selected: Vec::new(),
                text: Some(NOBODY_TO_ASK.to_owned()),
            })
            .collect();
        let op = Op::AnswerQuestion {
            request_id: req.request_id.clone(),
            answers,
        };
        if let Err(e) = self.client.send(&self.session_id, op).await {
            tracing::warn!(error = %e, request = %req.request_id, "answering the question failed");
        }
    }
}

/// What the event stream told of the run so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct Seen {
    /// The last non-empty answer text of the latest turn.
    pub text: String,
    /// How the latest turn ended (`None` while it runs, or before the first).
    pub end: Option<(TurnEndReason, Option<AbortCause>)>,
    /// Turns that ended since the subscription.
    pub ended: u64,
    /// What the session is doing.
    pub state: SessionState,
    /// Background work still running, as of the last quiet point.
    pub background: BackgroundWork,
    /// A `background` event came since the last turn started: the session is quiet (idle with
    /// no input waiting to start a turn).
    pub quiet: bool,
    /// The goal as the run's events left it, when the run changed it or ran a round of it
    /// (`Some(None)`: cleared; `None`: not touched, or only its rounds ran).
    pub goal: Option<Option<GoalInfo>>,
    /// The stream ended (the session was closed in the host).
    pub closed: bool,
}

impl Seen {
    /// A turn ended and the session is idle: nothing runs unless background work wakes it.
    pub fn idle_after_a_turn(&self) -> bool {
        self.closed || (self.ended > 0 && self.quiet && self.state == SessionState::Idle)
    }

    /// Idle after a turn with no background work left: nothing will start a turn by itself.
    pub fn settled(&self) -> bool {
        self.closed || (self.idle_after_a_turn() && self.background.is_empty())
    }

    /// Not idle: a turn runs (or waits for a person).
    pub fn busy(&self) -> bool {
        !self.closed && self.state != SessionState::Idle
    }
}

/// Follows the session's events into `seen` (streaming text and tool lines to stderr with
/// `stream_text`; with `headless`, a run on a server, errors outside a turn too, and what the
/// session asks a person answered as [`Headless`] says) until the stream ends.
pub(crate) async fn follow(
    mut events: EventStream,
    stream_text: bool,
    headless: Option<Headless>,
    seen: tokio::sync::watch::Sender<Seen>,
) {
    let remote = headless.is_some();
    while let Some(ev) = events.next().await {
        match ev.msg {
            EventMsg::Snapshot(s) => {
                let s = *s;
                let (state, background) = (s.session.state, s.background);
                seen.send_modify(|v| {
                    v.state = state;
                    v.background = background;
                });
                if let Some(h) = &headless {
                    for req in s.pending_approvals {
                        h.decline(req).await;
                    }
                    for req in s.pending_questions {
                        h.answer(req).await;
                    }
                }
            }
            EventMsg::ApprovalRequested(req) => {
                if let Some(h) = &headless {
                    h.decline(req).await;
                }
            }
            EventMsg::QuestionAsked(req) => {
                if let Some(h) = &headless {
                    h.answer(req).await;
                }
            }
            EventMsg::State { state } => seen.send_modify(|v| {
                v.state = state;
                if state != SessionState::Idle {
                    v.quiet = false;
                }
            }),
            EventMsg::Background(work) => seen.send_modify(|v| {
                v.background = work;
                v.quiet = true;
            }),
            EventMsg::TurnStarted { .. } => seen.send_modify(|v| {
                v.text.clear();
                v.end = None;
                v.quiet = false;
            }),
            EventMsg::TextDelta { text } if stream_text => {
                let _ = write!(std::io::stderr().lock(), "{text}");
            }
            EventMsg::ToolCallBegan {
                tool_name, display, ..
            } if stream_text => {
                let what = display.subject.unwrap_or(display.title);
                let _ = writeln!(std::io::stderr().lock(), "\n[{tool_name}] {what}");
            }
            EventMsg::AssistantMessage { text, .. } => {
                if stream_text {
                    let _ = writeln!(std::io::stderr().lock());
                }
                if !text.is_empty() {
                    seen.send_modify(|v| v.text = text);
                }
            }
            // A retried attempt restarts the answer: say so, whatever stderr is, so the partial
            // text already shown (or the pause) is explained.
            EventMsg::Retrying {
                attempt,
                delay_ms,
                error,
                ..
            } => eprintln!(
                "\ndsh: the answer restarts: {} ({}); retry {attempt} in {delay_ms} ms",
                error.code, error.message
            ),
            EventMsg::Error(e) if remote => eprintln!("dsh: {e}"),
            EventMsg::TurnEnded {
                reason,
                abort_cause,
                ..
            } => seen.send_modify(|v| {
                v.end = Some((reason, abort_cause));
                v.ended += 1;
            }),
            // A run that only ran rounds of an active goal leaves it active: the turn decides.
            EventMsg::GoalUpdated { goal } => seen.send_modify(|v| v.goal = Some(goal)),
            _ => {}
        }
    }
    seen.send_modify(|v| v.closed = true);
}

/// How a turn that did not complete ended, for a person.
pub(crate) fn describe(reason: &TurnEndReason, cause: Option<&AbortCause>) -> String {
    match reason {
        TurnEndReason::Error { error } => {
            format!("the turn failed: {}: {}", error.code, error.message)
        }
        TurnEndReason::Aborted => match cause {
            Some(c) => format!("the turn was aborted ({})", c.kind()),
            None => "the turn was aborted".to_owned(),
        },
        TurnEndReason::MaxTokens => "the turn ended `max-tokens`".to_owned(),
        TurnEndReason::Blocked => "the turn ended `blocked`".to_owned(),
        TurnEndReason::Interrupted => "the turn ended `interrupted`".to_owned(),
        TurnEndReason::Forked => "the turn ended `forked`".to_owned(),
        TurnEndReason::Other { kind } => format!("the turn ended `{kind}`"),
        TurnEndReason::Completed => "the turn completed".to_owned(),
    }
}

/// `$0.0123` (four decimals; six under a cent so small sessions are not shown as zero).
fn dollars(usd: f64) -> String {
    if usd != 0.0 && usd < 0.01 {
        format!("${usd:.6}")
    } else {
        format!("${usd:.4}")
    }
}

/// `dsh: usage: <in> input (<hit> cached), <out> output, <n> requests (<m> in subagents, ...);
/// cost $x` from the session's usage and its sub-agents' share.
pub(crate) fn usage_line(total: &Usage, subagents: &Usage) -> String {
    let mut cost = dollars(total.cost_usd.unwrap_or(0.0));
    if total.unpriced_requests > 0 {
        cost.push_str(" (some requests unpriced)");
    }
    format!(
        "dsh: usage: {} input ({} cached), {} output, {} requests ({} in subagents, {} input, {} output); cost {}",
        total.input_total(),
        total.cache_read_tokens,
        total.output_tokens,
        total.requests,
        subagents.requests,
        subagents.input_total(),
        subagents.output_tokens,
        cost
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usage_line_counts_cached_input_and_says_when_some_requests_are_unpriced() {
        let total = Usage {
            input_tokens: 100,
            cache_read_tokens: 900,
            output_tokens: 50,
            cost_usd: Some(0.001),
            requests: 3,
            unpriced_requests: 1,
            ..Default::default()
        };
        let sub = Usage {
            input_tokens: 10,
            output_tokens: 5,
            requests: 1,
            ..Default::default()
        };
        assert_eq!(
            usage_line(&total, &sub),
            "dsh: usage: 1000 input (900 cached), 50 output, 3 requests (1 in subagents, 10 \
             input, 5 output); cost $0.001000 (some requests unpriced)"
        );
        assert_eq!(dollars(0.0), "$0.0000");
        assert_eq!(dollars(1.23456), "$1.2346");
    }

    #[test]
    fn an_aborted_turn_names_its_cause_when_known() {
        assert_eq!(
            describe(&TurnEndReason::Aborted, Some(&AbortCause::User)),
            "the turn was aborted (user)"
        );
        assert_eq!(
            describe(&TurnEndReason::Aborted, None),
            "the turn was aborted"
        );
    }
}
