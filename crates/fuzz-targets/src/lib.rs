//! dsh's fuzz targets: one `fn(data: &[u8])` per parser that reads bytes dsh does not control.
//!
//! Each target feeds `data` to the parser the way dsh does (the model stream through the SSE
//! framer into an adapter's decoder, a session log through the JSONL and zstd readers, a line
//! of JSON-RPC through the SDK server's or ACP's frame parsing, an MCP `tools/call` result
//! through the renderer, an approval rules file and a call through the matcher) and checks
//! what must hold for every input: no panic, and the properties named on each target (framing
//! does not depend on where the bytes were split; a zstd frame dsh writes reads back; the rules
//! "allow always" stores for a call allow that call). A failed property panics, so libFuzzer
//! and the smoke test report it like a crash.
//!
//! The `fuzz/` directory at the workspace root runs these under cargo-fuzz
//! (`scripts/fuzz`); `tests/all` runs each a fixed number of times over `fixtures/` seeds and
//! deterministic mutations of them.

mod serve_request;

use std::path::Path;

use dsh_llm::{SseFramer, SseItem, StreamChunk};
use dsh_llm_http::{Decoder, Progress};
use serde_json::Value;

pub use serve_request::{serve_request, serve_request_status};

/// A target: one input, panics on a finding.
pub type Target = fn(&[u8]);

/// Every target, by the name `fuzz/` and `fixtures/<name>/` use.
pub const TARGETS: &[(&str, Target)] = &[
    ("sse_framer", sse_framer),
    ("deepseek_decoder", deepseek_decoder),
    ("anthropic_decoder", anthropic_decoder),
    ("openai_decoder", openai_decoder),
    ("session_log", session_log),
    ("sdk_frame", sdk_frame),
    ("acp_frame", acp_frame),
    ("mcp_render", mcp_render),
    ("approval_rules", approval_rules),
    ("serve_request", serve_request),
];

/// The target named `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// The largest event the adapters accept by default is megabytes; a small cap here lets the
/// fuzzer reach the `TooLarge` paths.
const FUZZ_MAX_EVENT: usize = 4096;

/// Where the input is split in two (from its first byte), and the rest.
fn split_point(data: &[u8]) -> (usize, &[u8]) {
    match data.split_first() {
        Some((&b, rest)) => (usize::from(b) * rest.len() / 256, rest),
        None => (0, data),
    }
}

fn frame(bytes: &[&[u8]]) -> (Vec<SseItem>, Result<(), dsh_llm::SseError>) {
    let mut framer = SseFramer::with_max_event_bytes(FUZZ_MAX_EVENT);
    let mut items = Vec::new();
    for b in bytes {
        if let Err(e) = framer.push(b, &mut items) {
            return (items, Err(e));
        }
    }
    let end = framer.finish();
    (items, end)
}

/// The SSE framer: any bytes, and the same items and outcome whether they arrive in one push,
/// split at one point, or one byte at a time.
pub fn sse_framer(data: &[u8]) {
    let (at, body) = split_point(data);
    let whole = frame(&[body]);
    let (a, b) = body.split_at(at);
    let split = frame(&[a, b]);
    assert_eq!(whole, split, "framing depends on the split at {at}");
    if body.len() <= 512 {
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        let single = frame(&bytes);
        assert_eq!(whole, single, "framing depends on byte-at-a-time delivery");
    }
}

/// The SSE events of `body` (framing errors end the list, as they end an attempt).
fn events(body: &[u8]) -> Vec<dsh_llm::SseEvent> {
    let (items, _) = frame(&[body]);
    items
        .into_iter()
        .filter_map(|i| match i {
            SseItem::Event(e) => Some(e),
            SseItem::Comment(_) => None,
        })
        .collect()
}

/// Runs a dialect's decoder over the events of `data` as the attempt engine does: until
/// `Done` or an error; at the end of the body, `end_without_done`.
fn decode<D: Decoder>(mut decoder: D, data: &[u8]) -> Vec<StreamChunk> {
    let mut out = Vec::new();
    for ev in events(data) {
        match decoder.event(&ev, &mut out) {
            Ok(Progress::Continue) => {}
            Ok(Progress::Done) | Err(_) => return out,
        }
    }
    decoder.end_without_done(&mut out);
    let _ = decoder.events_seen();
    out
}

/// The DeepSeek (OpenAI-chat-shaped) translator over the SSE events of `data`.
pub fn deepseek_decoder(data: &[u8]) {
    let mut t = dsh_llm_deepseek::Translator::new();
    let mut out = Vec::new();
    for ev in events(data) {
        match t.event(&ev.data, &mut out) {
            Ok(Progress::Continue) => {}
            Ok(Progress::Done) | Err(_) => return,
        }
    }
    if t.is_complete() {
        t.end_without_done(&mut out);
    }
    let _ = t.tool_wire_indexes();
    // The surrogate repair reads raw payloads too.
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = dsh_llm_deepseek::translate::repair_surrogates(text);
    }
}

/// The Anthropic Messages decoder over the SSE events of `data`.
pub fn anthropic_decoder(data: &[u8]) {
    decode(
        dsh_llm_anthropic::AnthropicDecoder::new("anthropic", "fuzz-model"),
        data,
    );
}

/// The OpenAI Chat Completions decoder over the SSE events of `data`.
pub fn openai_decoder(data: &[u8]) {
    decode(dsh_llm_openai::OpenAiDecoder::new(), data);
}

/// The session log reader. The first byte picks the form: bit 0 the version the file name
/// claims (3 or 4), bit 1 plain JSONL or zstd; for zstd, bit 2 whether the rest is read as
/// zstd bytes (the decoder itself) or is first written as a frame the way dsh writes one (so
/// the JSONL reader behind the decoder is reached, and the frame must read back).
pub fn session_log(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let version = if mode & 1 == 0 { 3 } else { 4 };
    let zstd = mode & 2 != 0;
    let encode = mode & 4 != 0;
    let plain: Vec<u8> = if !zstd {
        rest.to_vec()
    } else if encode {
        let mut framed = Vec::new();
        dsh_session_jsonl::zstd::encode_frame(rest, &mut framed);
        let frames = dsh_session_jsonl::zstd::decode_frames(&framed);
        if !rest.is_empty() && rest.ends_with(b"\n") {
            match frames {
                Ok(frames) => assert_eq!(frames.plain, rest, "a frame dsh wrote reads back"),
                Err(e) => panic!("a frame dsh wrote does not decode: {e}"),
            }
        }
        rest.to_vec()
    } else {
        let _ = dsh_session_jsonl::zstd::first_frame(rest);
        let _ = dsh_session_jsonl::zstd::decode_prefix(rest, 1 << 16);
        match dsh_session_jsonl::zstd::decode_frames(rest) {
            Ok(frames) => frames.plain,
            Err(_) => return,
        }
    };
    let _ = dsh_session::codec::read_jsonl(&plain[..], version, "fuzz.jsonl", "fuzz");
}

/// The SDK server's framing: lines split from the stream (the same lines however the bytes
/// were split), each classified by `parse_line`.
pub fn sdk_frame(data: &[u8]) {
    use dsh_sdk_server::frame::{LineSplitter, parse_line};
    let (at, body) = split_point(data);
    let lines = |parts: &[&[u8]]| {
        let mut s = LineSplitter::new(1024);
        let mut out = Vec::new();
        for p in parts {
            s.push(p, &mut out);
        }
        let last = s.finish();
        (out, last)
    };
    let whole = lines(&[body]);
    let (a, b) = body.split_at(at);
    assert_eq!(
        whole,
        lines(&[a, b]),
        "line splitting depends on the split at {at}"
    );
    let (out, last) = whole;
    for line in out.iter().chain(last.iter()) {
        if let dsh_sdk_server::frame::Line::Complete(bytes) = line {
            let _ = parse_line(bytes);
        }
    }
    let _ = parse_line(body);
}

/// ACP: a JSON-RPC line from the client, decoded as the agent side does (`method` and
/// `params`, then the typed request or notification of that method; a response's `result` as
/// the reply types the agent awaits).
pub fn acp_frame(data: &[u8]) {
    use agent_client_protocol::v1::schema as s;
    use agent_client_protocol::{JsonRpcMessage, JsonRpcResponse};
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let method = value.get("method").and_then(Value::as_str).unwrap_or("");
    let params = value.get("params").cloned().unwrap_or(Value::Null);
    let _ = s::InitializeRequest::parse_message(method, &params);
    let _ = s::NewSessionRequest::parse_message(method, &params);
    let _ = s::LoadSessionRequest::parse_message(method, &params);
    let _ = s::PromptRequest::parse_message(method, &params);
    let _ = s::CancelNotification::parse_message(method, &params);
    let _ = serde_json::from_value::<s::ClientRequest>(value.clone());
    let _ = serde_json::from_value::<s::ClientNotification>(value.clone());
    if let Some(result) = value.get("result") {
        let _ = s::RequestPermissionResponse::from_json(method, result.clone());
        let _ = s::ReadTextFileResponse::from_json(method, result.clone());
        let _ = s::CreateTerminalResponse::from_json(method, result.clone());
        let _ = s::TerminalOutputResponse::from_json(method, result.clone());
        let _ = s::WaitForTerminalExitResponse::from_json(method, result.clone());
    }
}

/// An MCP server's `tools/call` result (JSON), decoded and rendered as the model-visible text.
pub fn mcp_render(data: &[u8]) {
    let Ok(result) = serde_json::from_slice::<rmcp::model::CallToolResult>(data) else {
        return;
    };
    let text = dsh_mcp_client::render::render_result("fuzz_tool", &result);
    assert!(!text.is_empty(), "a rendered result is never empty");
    let _ = dsh_mcp_client::render::is_error(&result);
}

/// An approval rules list (JSON, before the first NUL) and a call (after it: a bash command,
/// a file path or a URL, the tool picked by the first byte of the call). The matcher must not
/// panic, and the rules an "allow always" answer stores for the call must allow that call.
pub fn approval_rules(data: &[u8]) {
    use dsh_approval::rules::{Rule, RuleMatcher, rules_for};
    let (rules, call) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let rules: Vec<Rule> = serde_json::from_slice(rules).unwrap_or_default();
    let matcher = RuleMatcher::new(&rules);
    let Some((&which, text)) = call.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(text);
    let (tool, args) = match which % 4 {
        0 => ("bash", serde_json::json!({ "command": text })),
        1 => ("write", serde_json::json!({ "file_path": text })),
        2 => ("web_fetch", serde_json::json!({ "url": text })),
        _ => ("todo", serde_json::json!({})),
    };
    let cwd = Path::new("/work/project");
    let _ = matcher.allows(tool, &args, cwd);
    let stored = rules_for(tool, &args, cwd);
    if !stored.is_empty() {
        assert!(
            RuleMatcher::new(&stored).allows(tool, &args, cwd),
            "the rules stored for a call ({stored:?}) do not allow it: {tool} {args}"
        );
    }
    let _ = dsh_approval::command::simple_commands(&text);
}
