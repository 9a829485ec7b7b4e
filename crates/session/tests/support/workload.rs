//! The benchmark workload (shared by `benches/load.rs` and `tests/memory.rs`): 8-step tool
//! turns, each step an assistant message with reasoning, a tool call and a packed stream,
//! `tool/call`, `tool/result`; the last turn left open (a crash). Appended through the typed
//! API; the same shapes as the dsh-session-jsonl bench.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_llm::{ContentBlock, Message, MessageSource, Role, TokenUsage};
use dsh_session::data::{
    AssistantMessage, StepEnd, StepStart, StreamRecords, ToolCallEvent, ToolResult, TurnEnd,
    TurnEndReason, TurnStart, UserMessage,
};
use dsh_session::{Event, NewEvent, SessionHeader, SessionLog};
use serde_json::json;

pub const TEXT: &str = "The quick brown fox jumps over the lazy dog while the harness records every step of the turn in an append-only log, one JSON object per line, durable at each flush barrier.";

fn model(id: String, content: Vec<ContentBlock>) -> Arc<Message> {
    Arc::new(Message::new(
        id,
        Role::Assistant,
        content,
        MessageSource::model("deepseek-official", "deepseek-v4-flash", None),
    ))
}

/// A turn of `steps` tool steps and a final answer (2 + 5·steps + 4 events), or cut after the
/// last step's assistant message when `open_tail`.
pub fn turn_events(turn: u64, steps: u64, open_tail: bool) -> Vec<NewEvent> {
    let stream = StreamRecords::from_records(&[
        json!({"type":"chunk","time":0,"chunk":{"type":"block-start","index":0,"blockType":"reasoning"}}),
        json!({"type":"reasoning-chunks","time0":0,"index":0,"dt":[1,1,1],"texts":["The quick ", "brown fox ", "jumps ", "over"]}),
        json!({"type":"chunk","time":0,"chunk":{"type":"finish","reason":{"kind":"tool-calls"}}}),
    ]);
    let mut out = vec![
        NewEvent::core(TurnStart { turn }),
        NewEvent::core(UserMessage(Arc::new(Message::new(
            format!("u{turn}"),
            Role::User,
            vec![ContentBlock::text(TEXT)],
            MessageSource::user(),
        )))),
    ];
    for step in 1..=steps {
        let call = format!("call_{turn}_{step}");
        let args = r#"{"command":"ls -la","description":"List files"}"#;
        out.push(NewEvent::core(StepStart { turn, step }));
        out.push(NewEvent::core(AssistantMessage {
            turn,
            step,
            message: model(
                format!("a{turn}.{step}"),
                vec![
                    ContentBlock::reasoning(TEXT),
                    ContentBlock::tool_call(&call, "bash", args),
                ],
            ),
            usage: Some(TokenUsage {
                input_tokens: 1200,
                output_tokens: 90,
                ..Default::default()
            }),
            interrupted: None,
            stream: stream.clone(),
        }));
        if open_tail && step == steps {
            return out;
        }
        out.push(NewEvent::core(ToolCallEvent {
            turn,
            step,
            call_id: call.clone(),
            name: "bash".into(),
            arguments: args.into(),
        }));
        out.push(NewEvent::core(ToolResult {
            turn,
            step,
            message: Arc::new(Message::tool_result(
                format!("r{turn}.{step}"),
                &call,
                vec![ContentBlock::text(TEXT)],
                false,
            )),
            error: None,
            meta: None,
        }));
        out.push(NewEvent::core(StepEnd { turn, step }));
    }
    out.push(NewEvent::core(StepStart {
        turn,
        step: steps + 1,
    }));
    out.push(NewEvent::core(AssistantMessage {
        turn,
        step: steps + 1,
        message: model(format!("f{turn}"), vec![ContentBlock::text("Done.")]),
        usage: None,
        interrupted: None,
        stream: StreamRecords::empty(),
    }));
    out.push(NewEvent::core(StepEnd {
        turn,
        step: steps + 1,
    }));
    out.push(NewEvent::core(TurnEnd {
        turn,
        reason: TurnEndReason::Completed,
    }));
    out
}

/// About `n` events of complete 8-step turns, the last turn left open (a crash).
pub fn workload(n: usize) -> Vec<NewEvent> {
    let mut out = Vec::new();
    let mut turn = 1;
    while out.len() + 60 < n {
        out.extend(turn_events(turn, 8, false));
        turn += 1;
    }
    out.extend(turn_events(turn, 8, true));
    out
}

/// A log of the workload, appended in memory.
pub fn log_of(n: usize) -> SessionLog {
    let mut log = SessionLog::new(SessionHeader::new("session-bench", 1, Some("/w".into())));
    for ev in workload(n) {
        log.append(ev.at(1_789_000_000_000)).unwrap();
    }
    log
}

/// The event lines of a JSONL log (header line skipped).
pub fn lines(bytes: &[u8]) -> Vec<&str> {
    let text = std::str::from_utf8(bytes).unwrap();
    text.lines().skip(1).collect()
}

/// Parses lines with `Event::from_line` on `threads` threads.
pub fn parse(lines: &[&str], threads: usize) -> Vec<Event> {
    let chunk = lines.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .enumerate()
            .map(|(c, part)| {
                s.spawn(move || {
                    part.iter()
                        .enumerate()
                        .map(|(i, l)| Event::from_line(l, (c * chunk + i) as u64).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}
