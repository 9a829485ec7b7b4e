//! The JSON forms clients rely on: one example of each shape, exactly.

use dsh_protocol::{
    AbortCause, ApprovalDecision, BackgroundWork, CommandOutcome, Effort, ErrorCode, Event,
    EventMsg, ExitStatus, Op, OpenSession, OutputSummary, ProtocolError, SessionOptions,
    SessionSettings, ToolDisplay, ToolKind, TurnEndReason, Usage,
};
use serde_json::json;

fn round_trip<T>(value: &T, expected: serde_json::Value)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let got = serde_json::to_value(value).expect("serialise");
    assert_eq!(got, expected);
    let back: T = serde_json::from_value(got).expect("deserialise");
    assert_eq!(&back, value);
}

#[test]
fn ops_are_tagged_camel_case() {
    round_trip(
        &Op::Submit {
            text: "hi".into(),
            attachments: vec![],
        },
        json!({"type": "submit", "text": "hi"}),
    );
    round_trip(
        &Op::AnswerApproval {
            request_id: "a1".into(),
            decision: ApprovalDecision::Deny {
                reason: Some("no".into()),
            },
        },
        json!({"type": "answerApproval", "requestId": "a1",
               "decision": {"type": "deny", "reason": "no"}}),
    );
    round_trip(
        &Op::SetEffort {
            effort: Effort::High,
        },
        json!({"type": "setEffort", "effort": "high"}),
    );
    round_trip(&Op::Interrupt, json!({"type": "interrupt"}));
    round_trip(
        &Op::RunCommand {
            name: "compact".into(),
            args: String::new(),
        },
        json!({"type": "runCommand", "name": "compact"}),
    );
}

#[test]
fn open_session_flattens_its_options() {
    round_trip(
        &OpenSession::Create {
            session_id: None,
            options: SessionOptions {
                cwd: Some("/w".into()),
                settings: SessionSettings {
                    model: Some("deepseek-v4-pro".into()),
                    sandbox: Some(dsh_protocol::SandboxMode::WorkspaceWrite),
                    ..Default::default()
                },
            },
            prompt: Some("go".into()),
        },
        json!({"type": "create", "cwd": "/w", "model": "deepseek-v4-pro",
               "sandbox": "workspace-write", "prompt": "go"}),
    );
}

#[test]
fn events_carry_their_seq_beside_the_tag() {
    round_trip(
        &Event::new(
            7,
            EventMsg::ToolCallEnded {
                call_id: "c1".into(),
                tool_name: "bash".into(),
                display: ToolDisplay::new(ToolKind::Shell, "Bash")
                    .with_subject("ls")
                    .with_output(OutputSummary {
                        text: "a\nb".into(),
                        lines: Some(2),
                        exit: Some(ExitStatus::Exited { code: 0 }),
                        ..Default::default()
                    }),
                is_error: false,
                error_code: None,
                error_message: None,
            },
        ),
        json!({"seq": 7, "type": "toolCallEnded", "callId": "c1", "toolName": "bash",
               "display": {"kind": "shell", "title": "Bash", "subject": "ls",
                           "output": {"text": "a\nb", "lines": 2,
                                      "exit": {"type": "exited", "code": 0}}}}),
    );
    round_trip(
        &Event::new(
            9,
            EventMsg::TurnEnded {
                turn: 1,
                reason: TurnEndReason::Error {
                    error: ProtocolError::new(ErrorCode::RateLimit, "slow down"),
                },
                usage: Usage {
                    input_tokens: 10,
                    output_tokens: 2,
                    cache_read_tokens: 90,
                    cost_usd: Some(0.5),
                    ..Default::default()
                },
                abort_cause: None,
            },
        ),
        json!({"seq": 9, "type": "turnEnded", "turn": 1,
               "reason": {"type": "error", "error": {"code": "RATE_LIMIT", "message": "slow down"}},
               "usage": {"inputTokens": 10, "outputTokens": 2, "cacheReadTokens": 90,
                         "cacheWriteTokens": 0, "reasoningTokens": 0, "costUsd": 0.5}}),
    );
    round_trip(
        &Event::new(
            3,
            EventMsg::CommandRan {
                name: "cost".into(),
                outcome: CommandOutcome::Done {
                    text: "$0.01".into(),
                },
            },
        ),
        json!({"seq": 3, "type": "commandRan", "name": "cost",
               "outcome": {"type": "done", "text": "$0.01"}}),
    );
}

#[test]
fn unknown_error_codes_are_kept_verbatim() {
    let code: ErrorCode = serde_json::from_value(json!("PLUGIN_SPECIAL")).expect("parse");
    assert_eq!(code, ErrorCode::Other("PLUGIN_SPECIAL".into()));
    assert_eq!(code.to_string(), "PLUGIN_SPECIAL");
    assert_eq!(
        ErrorCode::from_wire("SESSION_LOCKED"),
        ErrorCode::SessionLocked
    );
    assert_eq!(ErrorCode::SessionLocked.to_string(), "SESSION_LOCKED");
    assert_eq!(
        serde_json::to_value(ErrorCode::Other("X_Y".into())).expect("ser"),
        json!("X_Y")
    );
}

#[test]
fn live_events_are_told_apart_from_committed_ones() {
    assert!(Event::new(1, EventMsg::TextDelta { text: "x".into() }).is_live());
    assert!(!Event::new(1, EventMsg::TurnStarted { turn: 1 }).is_live());
}

#[test]
fn usage_adds_and_keeps_known_costs() {
    let mut a = Usage {
        input_tokens: 10,
        cache_read_tokens: 30,
        cost_usd: Some(1.0),
        ..Default::default()
    };
    a.add(&Usage {
        input_tokens: 0,
        cache_read_tokens: 60,
        cost_usd: None,
        ..Default::default()
    });
    assert_eq!(a.cost_usd, Some(1.0));
    assert_eq!(a.cache_read_tokens, 90);
    assert!((a.cache_hit_ratio() - 0.9).abs() < 1e-9);
}

#[test]
fn an_aborted_turn_names_its_cause_and_background_work_lists_jobs() {
    round_trip(
        &Event::new(
            4,
            EventMsg::TurnEnded {
                turn: 2,
                reason: TurnEndReason::Aborted,
                usage: Usage {
                    requests: 2,
                    unpriced_requests: 1,
                    ..Default::default()
                },
                abort_cause: Some(AbortCause::Hook {
                    reason: "dsh/budget".into(),
                }),
            },
        ),
        json!({"seq": 4, "type": "turnEnded", "turn": 2, "reason": {"type": "aborted"},
               "usage": {"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0,
                         "cacheWriteTokens": 0, "reasoningTokens": 0, "requests": 2,
                         "unpricedRequests": 1},
               "abortCause": {"type": "hook", "reason": "dsh/budget"}}),
    );
    // An older server's `turnEnded` (no cause) still reads.
    let old: Event = serde_json::from_value(json!({"seq": 4, "type": "turnEnded", "turn": 2,
        "reason": {"type": "aborted"}, "usage": {"inputTokens": 0, "outputTokens": 0}}))
    .expect("parse");
    assert!(matches!(
        old.msg,
        EventMsg::TurnEnded {
            abort_cause: None,
            ..
        }
    ));
    let bg = Event::new(
        7,
        EventMsg::Background(BackgroundWork {
            jobs: vec!["job-1".into()],
            subagents: 1,
        }),
    );
    round_trip(
        &bg,
        json!({"seq": 7, "type": "background", "jobs": ["job-1"], "subagents": 1}),
    );
    assert!(bg.is_live());
    round_trip(
        &Event::new(7, EventMsg::Background(BackgroundWork::default())),
        json!({"seq": 7, "type": "background"}),
    );
    round_trip(&Op::Persist, json!({"type": "persist"}));
    assert_eq!(ErrorCode::SessionCorrupt.to_string(), "SESSION_CORRUPT");
    assert_eq!(ErrorCode::StorageFailed.to_string(), "STORAGE_FAILED");
}

#[test]
fn streamed_usage_is_live_and_usage_counts_requests() {
    let u = Usage {
        input_tokens: 5,
        output_tokens: 1,
        cost_usd: Some(0.25),
        requests: 1,
        ..Default::default()
    };
    let ev = Event::new(
        2,
        EventMsg::UsageStreamed {
            turn: 1,
            usage: u,
            total: u,
            context_tokens: 6,
        },
    );
    assert!(ev.is_live());
    let mut total = u;
    total.add(&Usage {
        input_tokens: 1,
        cache_write_tokens: 2,
        requests: 3,
        unpriced_requests: 3,
        ..Default::default()
    });
    assert_eq!((total.requests, total.unpriced_requests), (4, 3));
    assert_eq!(total.input_total(), 8);
}
