use std::collections::BTreeSet;

use dsh_testkit::{
    Completion, MockServer, Split, Usage, UsagePlacement, split_chars, tool_call_id,
};
use serde_json::Value;

use crate::common::{concat, fixture, frames, payloads, post};

fn text_fixture() -> Completion {
    Completion::new()
        .id("8325bde1-a39c-4a21-b4c2-8e2c4fb2c591")
        .created(1_780_222_301)
        .fingerprint("fp_8b330d02d0_prod0820_fp8_kvcache_20260402")
        .text_parts(["Hello", "! How can I help", " you today?"])
        .usage(Usage::new(12, 9))
        .finish("stop")
}

fn reasoning_fixture() -> Completion {
    Completion::new()
        .id("c3a1414d-4231-4fc0-8070-253992e7e197")
        .created(1_785_932_694)
        .fingerprint("fp_a18b46594c_prod0820_fp8_kvcache_20260402")
        .keep_alives(2)
        .reasoning_parts(["9.8 = 9.80", " > 9.11."])
        .text_parts(["9.8", " is greater."])
        .usage(Usage::new(283, 17).cache_hit(256).reasoning(9))
}

fn parallel_fixture() -> Completion {
    Completion::new()
        .id("23d01db0-7b76-413e-b4fd-b0bf3362f996")
        .created(1_781_233_924)
        .reasoning("Need both files; read them in parallel.")
        .text("Reading both files.")
        .tool_call_parts(
            "call_00_JQSxFX1xOHGH6ajdpN88RMXO",
            "read",
            ["{\"", "file_pa", "th\": \"src/ma", "in.rs\"}"],
        )
        .tool_call_with_id(
            "call_01_L8UtYbkfaMFr7hzsToGPWGfI",
            "read",
            r#"{"file_path": "Cargo.toml"}"#,
        )
        .usage(Usage::new(306, 85).cache_hit(256).reasoning(31))
}

#[test]
fn builder_reproduces_the_fixtures_byte_for_byte() {
    for (name, completion) in [
        ("text.sse", text_fixture()),
        ("reasoning-text.sse", reasoning_fixture()),
        ("parallel-tools.sse", parallel_fixture()),
    ] {
        let built = completion.to_bytes();
        let expected = fixture(name);
        assert_eq!(
            String::from_utf8(built.to_vec()).unwrap(),
            String::from_utf8(expected).unwrap(),
            "{name}"
        );
    }
}

/// Every JSON path (object keys in order, arrays collapsed) in a chunk, e.g.
/// `choices[].delta.tool_calls[].function.arguments`.
fn shape(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.push(format!("{p}:{}", kind(v)));
                shape(v, &p, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                shape(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn shapes(bytes: &[u8]) -> BTreeSet<Vec<String>> {
    payloads(bytes)
        .iter()
        .filter(|p| *p != "[DONE]")
        .map(|p| {
            let v: Value = serde_json::from_str(p).unwrap();
            let mut out = Vec::new();
            shape(&v, "", &mut out);
            out
        })
        .collect()
}

#[test]
fn fragmented_output_has_the_fixture_shapes() {
    // Generated with default ids and heavy fragmenting: every chunk must have exactly the shape
    // (ordered key paths and value kinds) of some chunk in the fixtures.
    let mut known = BTreeSet::new();
    for name in ["text.sse", "reasoning-text.sse", "parallel-tools.sse"] {
        known.extend(shapes(&fixture(name)));
    }
    let thinking = Completion::new()
        .keep_alives(1)
        .reasoning("Let me think about this carefully — ünïcödé too.")
        .text("Here is what I found.")
        .tool_call("read", r#"{"file_path": "src/lib.rs"}"#)
        .tool_call("glob", r#"{"pattern": "**/*.rs"}"#)
        .chars_per_delta(3)
        .usage(Usage::new(1000, 200).cache_hit(768).reasoning(50));
    let plain = Completion::new()
        .text("Just text, in small pieces.")
        .chars_per_delta(2)
        .usage(Usage::new(40, 8));
    for c in [thinking, plain] {
        let bytes = c.to_bytes();
        for s in shapes(&bytes) {
            assert!(known.contains(&s), "unknown chunk shape: {s:#?}");
        }
        let p = payloads(&bytes);
        assert_eq!(p.last().unwrap(), "[DONE]");
    }
}

#[test]
fn fragmenting_and_tool_call_details() {
    assert_eq!(split_chars("abcde", 2), ["ab", "cd", "e"]);
    assert_eq!(split_chars("äöü", 1), ["ä", "ö", "ü"]);
    assert_eq!(split_chars("abc", 0), ["abc"]);
    assert!(split_chars("", 3).is_empty());

    let id0 = tool_call_id(0, "read");
    let id1 = tool_call_id(1, "read");
    assert!(id0.starts_with("call_00_") && id0.len() == 8 + 24, "{id0}");
    assert!(id1.starts_with("call_01_"));
    assert_ne!(id0[8..], id1[8..]);
    assert!(id0[8..].chars().all(|c| c.is_ascii_alphanumeric()));

    let c = Completion::new()
        .tool_call("read", r#"{"a":1}"#)
        .tool_call("bash", r#"{"command":"ls"}"#)
        .chars_per_delta(4);
    let p = payloads(&c.to_bytes());
    let chunks: Vec<Value> = p[..p.len() - 1]
        .iter()
        .map(|s| serde_json::from_str(s).unwrap())
        .collect();
    // Arguments reassemble per wire index; first fragment has id/name and empty arguments.
    let mut args = [String::new(), String::new()];
    let mut heads = 0;
    for ch in &chunks {
        if let Some(calls) = ch["choices"][0]["delta"]["tool_calls"].as_array() {
            let call = &calls[0];
            let i = call["index"].as_u64().unwrap() as usize;
            if call.get("id").is_some() {
                heads += 1;
                assert_eq!(call["function"]["arguments"], "");
            }
            args[i].push_str(call["function"]["arguments"].as_str().unwrap());
        }
    }
    assert_eq!(heads, 2);
    assert_eq!(args, [r#"{"a":1}"#, r#"{"command":"ls"}"#]);
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        last["choices"][0]["delta"],
        serde_json::json!({"content": ""})
    );
    assert_eq!(last["usage"]["prompt_cache_miss_tokens"], 12);
}

#[test]
fn usage_placement_finish_and_done_options() {
    let trailing = Completion::new()
        .text("x")
        .usage(Usage::new(10, 2).cache_hit(4))
        .usage_placement(UsagePlacement::TrailingEmptyChoices);
    let p = payloads(&trailing.to_bytes());
    let finish: Value = serde_json::from_str(&p[p.len() - 3]).unwrap();
    let usage: Value = serde_json::from_str(&p[p.len() - 2]).unwrap();
    assert_eq!(finish["usage"], Value::Null);
    assert_eq!(usage["choices"], serde_json::json!([]));
    assert_eq!(usage["usage"]["prompt_cache_hit_tokens"], 4);
    assert_eq!(usage["usage"]["prompt_cache_miss_tokens"], 6);

    let null_choices = trailing
        .clone()
        .usage_placement(UsagePlacement::TrailingNullChoices);
    let p = payloads(&null_choices.to_bytes());
    let usage: Value = serde_json::from_str(&p[p.len() - 2]).unwrap();
    assert_eq!(usage["choices"], Value::Null);

    let length = Completion::new().text("trunc").finish("length").no_done();
    let bytes = length.to_bytes();
    assert!(!bytes.ends_with(b"data: [DONE]\n\n"));
    let p = payloads(&bytes);
    let last: Value = serde_json::from_str(p.last().unwrap()).unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "length");

    let no_finish = Completion::new().text("x").no_finish().no_usage();
    let p = payloads(&no_finish.to_bytes());
    assert_eq!(p.len(), 3); // first delta, text, [DONE]
    assert!(!p.iter().any(|s| s.contains("\"finish_reason\":\"")));

    let forced = Completion::new().text("x").thinking(true);
    let p = payloads(&forced.to_bytes());
    assert!(p[0].contains(r#""delta":{"role":"assistant","content":null,"reasoning_content":""}"#));
    assert!(p[1].contains(r#""delta":{"content":"x","reasoning_content":null}"#));
}

#[tokio::test]
async fn served_fixture_streams_arrive_intact_at_any_split() {
    for split in [
        Split::Whole,
        Split::PerEvent,
        Split::Every(1),
        Split::Every(13),
        Split::Sizes(vec![3, 500, 2]),
        Split::Random { seed: 7, max: 40 },
    ] {
        let server = MockServer::start_with([parallel_fixture().reply_split(&split)]).await;
        let got = frames(post(&server.base_url(), "{}").await).await;
        assert_eq!(concat(&got), fixture("parallel-tools.sse"), "{split:?}");
    }
}

#[test]
fn random_splits_are_reproducible_and_lossless() {
    let data = parallel_fixture().to_bytes();
    let a = Split::Random { seed: 42, max: 9 }.apply(&data);
    let b = Split::Random { seed: 42, max: 9 }.apply(&data);
    let c = Split::Random { seed: 43, max: 9 }.apply(&data);
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.iter().all(|p| !p.is_empty() && p.len() <= 9));
    assert_eq!(concat(&a), data.to_vec());
}

#[test]
fn fixtures_module_reads_the_shared_fixtures() {
    let text = dsh_testkit::fixtures::read_fixture("deepseek/text.sse").unwrap();
    assert_eq!(text.to_vec(), fixture("text.sse"));
    let err = dsh_testkit::fixtures::read_fixture("deepseek/nope.sse").unwrap_err();
    assert!(err.to_string().contains("deepseek/nope.sse"), "{err}");
}
