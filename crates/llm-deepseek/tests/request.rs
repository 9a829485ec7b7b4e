//! Request bodies: golden bytes, append-only extension, effort and tool mapping.

use std::sync::Arc;

use dsh_llm::{ContentBlock, LlmRequest, Message, MessageSource, Role, ToolSpec};
use dsh_llm_deepseek::BodyOptions;
use dsh_llm_deepseek::request::{BodyCache, body, body_extending, body_with_capacity};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::http::call;

const C0: &str = "call_00_JQSxFX1xOHGH6ajdpN88RMXO";
const C1: &str = "call_01_L8UtYbkfaMFr7hzsToGPWGfI";

fn assistant(id: &str, content: Vec<ContentBlock>) -> Message {
    Message::new(
        id,
        Role::Assistant,
        content,
        MessageSource::model("deepseek", "deepseek-flash", None),
    )
}

fn history() -> Vec<Message> {
    vec![
        Message::system("m0", "You are dsh."),
        Message::new(
            "m1",
            Role::User,
            vec![
                ContentBlock::text("Read "),
                ContentBlock::text("both files."),
            ],
            MessageSource::user(),
        ),
        assistant(
            "m2",
            vec![
                ContentBlock::reasoning("Need both files; read them in parallel."),
                ContentBlock::text("Reading both files."),
                ContentBlock::tool_call(C0, "read", "{\"file_path\": \"src/main.rs\"}"),
                ContentBlock::tool_call(C1, "read", "{\"file_path\": \"Cargo.toml\"}"),
            ],
        ),
        Message::tool_result("m3", C0, vec![ContentBlock::text("fn main() {}\n")], false),
        Message::tool_result("m4", C1, vec![], false),
        assistant(
            "m5",
            vec![
                ContentBlock::reasoning("Both read. \"Quote\" \\ é"),
                ContentBlock::text("Done."),
            ],
        ),
        Message::user_text("m6", "Thanks"),
        assistant(
            "m7",
            vec![ContentBlock::tool_call("call_00_x", "bash", "{not json")],
        ),
        Message::tool_result(
            "m8",
            "call_00_x",
            vec![ContentBlock::text("Error: bad")],
            true,
        ),
    ]
}

fn request(messages: Vec<Message>, effort: Option<&str>) -> LlmRequest {
    LlmRequest {
        call: call(effort.map(Into::into), 256000),
        messages: messages.into_iter().map(Arc::new).collect(),
        tools: vec![ToolSpec::new(
            "read",
            "Read a file.",
            json!({"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}),
        )],
        cancel: CancellationToken::new(),
    }
}

const GOLDEN: &str = concat!(
    r#"{"model":"deepseek-flash","messages":["#,
    r#"{"role":"system","content":"You are dsh."},"#,
    r#"{"role":"user","content":"Read both files."},"#,
    r#"{"role":"assistant","content":"Reading both files.","reasoning_content":"Need both files; read them in parallel.","tool_calls":[{"id":"call_00_JQSxFX1xOHGH6ajdpN88RMXO","type":"function","function":{"name":"read","arguments":"{\"file_path\": \"src/main.rs\"}"}},{"id":"call_01_L8UtYbkfaMFr7hzsToGPWGfI","type":"function","function":{"name":"read","arguments":"{\"file_path\": \"Cargo.toml\"}"}}]},"#,
    r#"{"role":"tool","tool_call_id":"call_00_JQSxFX1xOHGH6ajdpN88RMXO","content":"fn main() {}\n"},"#,
    r#"{"role":"tool","tool_call_id":"call_01_L8UtYbkfaMFr7hzsToGPWGfI","content":"(no output)"},"#,
    r#"{"role":"assistant","content":"Done.","reasoning_content":"Both read. \"Quote\" \\ é"},"#,
    r#"{"role":"user","content":"Thanks"},"#,
    r#"{"role":"assistant","content":"","tool_calls":[{"id":"call_00_x","type":"function","function":{"name":"bash","arguments":"{not json"}}]},"#,
    r#"{"role":"tool","tool_call_id":"call_00_x","content":"Error: bad"}"#,
    r#"],"stream":true,"stream_options":{"include_usage":true},"thinking":{"type":"enabled"},"reasoning_effort":"high","#,
    r#""tools":[{"type":"function","function":{"name":"read","description":"Read a file.","parameters":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}}],"#,
    r#""max_tokens":256000}"#,
);

#[test]
fn golden_body_for_a_multi_turn_history() {
    let bytes = body(&request(history(), Some("high")), BodyOptions::default()).unwrap();
    assert_eq!(String::from_utf8(bytes).unwrap(), GOLDEN);
}

#[test]
fn the_same_history_gives_the_same_bytes_and_n_plus_1_extends_n() {
    let opts = BodyOptions::default();
    let full = history();
    let mut prev: Option<String> = None;
    for n in 1..=full.len() {
        let a = String::from_utf8(body(&request(full[..n].to_vec(), Some("max")), opts).unwrap())
            .unwrap();
        let b = String::from_utf8(body(&request(full[..n].to_vec(), Some("max")), opts).unwrap())
            .unwrap();
        assert_eq!(a, b);
        let messages_part = a.split("],\"stream\":").next().unwrap().to_owned();
        if let Some(p) = prev {
            assert!(
                messages_part.starts_with(&p),
                "history {n} does not extend history {}",
                n - 1
            );
        }
        prev = Some(messages_part);
    }
}

#[test]
fn effort_mapping_tools_omitted_and_optional_fields() {
    let opts = BodyOptions::default();
    let v = |r: &LlmRequest| -> serde_json::Value {
        serde_json::from_slice(&body(r, opts).unwrap()).unwrap()
    };
    let mut r = request(vec![Message::user_text("u", "hi")], Some("off"));
    r.tools.clear();
    let off = v(&r);
    assert_eq!(off["thinking"], json!({"type":"disabled"}));
    assert!(off.get("reasoning_effort").is_none());
    assert!(off.get("tools").is_none());
    for e in ["low", "high", "max"] {
        let x = v(&request(vec![Message::user_text("u", "hi")], Some(e)));
        assert_eq!(
            (x["thinking"].clone(), x["reasoning_effort"].clone()),
            (json!({"type":"enabled"}), json!(e))
        );
    }
    let none = v(&request(vec![Message::user_text("u", "hi")], None));
    assert!(none.get("thinking").is_none() && none.get("reasoning_effort").is_none());

    // Title calls always disable thinking.
    let mut t = request(vec![Message::user_text("u", "hi")], Some("max"));
    t.call.purpose = Some("session-title".into());
    assert_eq!(v(&t)["thinking"], json!({"type":"disabled"}));

    let mut s = request(vec![Message::user_text("u", "hi")], Some("high"));
    s.call.temperature = Some(0.5);
    s.call.stop = vec!["END".into()];
    let bytes = String::from_utf8(body(&s, opts).unwrap()).unwrap();
    assert!(
        bytes.ends_with(r#""temperature":0.5,"max_tokens":256000,"stop":["END"]}"#),
        "{bytes}"
    );
    s.call.temperature = Some(f64::NAN);
    assert_eq!(body(&s, opts).unwrap_err().code, "INVALID_REQUEST");
}

#[test]
fn placeholder_and_v3_tool_result_wrappers() {
    let msgs = vec![
        assistant("a", vec![ContentBlock::text("hi")]),
        Message::new(
            "u",
            Role::User,
            vec![
                ContentBlock::text("also this"),
                ContentBlock::ToolResult(dsh_llm::ToolResultBlock {
                    tool_call_id: "c1".into(),
                    content: vec![],
                    is_error: None,
                }),
            ],
            MessageSource::tool("c1"),
        ),
        Message::new(
            "d",
            Role::Developer,
            vec![],
            MessageSource::new("tool-registry"),
        ),
    ];
    let on = BodyOptions {
        reasoning_placeholder: true,
    };
    let v: serde_json::Value =
        serde_json::from_slice(&body(&request(msgs.clone(), Some("high")), on).unwrap()).unwrap();
    assert_eq!(
        v["messages"],
        json!([
            {"role":"assistant","content":"hi","reasoning_content":""},
            {"role":"user","content":"also this"},
            {"role":"tool","tool_call_id":"c1","content":"(no output)"}
        ])
    );
    let off: serde_json::Value =
        serde_json::from_slice(&body(&request(msgs, Some("off")), on).unwrap()).unwrap();
    assert_eq!(
        off["messages"][0],
        json!({"role":"assistant","content":"hi"})
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        "[a-zé😀\"\\\\\n{}: ]{0,12}"
    }

    fn message() -> impl Strategy<Value = Message> {
        prop_oneof![
            text().prop_map(|t| Message::user_text("u", t)),
            text().prop_map(|t| Message::system("s", t)),
            (
                prop::option::of(text()),
                prop::option::of(text()),
                prop::collection::vec(("call_[0-9]{2}", text()), 0..3)
            )
                .prop_map(|(r, t, calls)| {
                    let mut content = Vec::new();
                    content.extend(r.map(ContentBlock::reasoning));
                    content.extend(t.map(ContentBlock::text));
                    content.extend(
                        calls
                            .into_iter()
                            .map(|(id, a)| ContentBlock::tool_call(id, "f", a)),
                    );
                    assistant("a", content)
                }),
            ("call_[0-9]{2}", prop::option::of(text())).prop_map(|(id, t)| Message::tool_result(
                "t",
                id,
                t.into_iter().map(ContentBlock::text).collect(),
                false
            )),
        ]
    }

    /// One step of a request series against a [`BodyCache`].
    #[derive(Clone, Debug)]
    enum Step {
        /// Append these messages.
        Append(Vec<Message>),
        /// Replace the messages from this index on (compaction, a rewritten tail).
        Rewrite(usize, Message),
        /// Switch the effort (thinking on/off changes every assistant message).
        Effort(&'static str),
        /// Switch the reasoning placeholder option.
        Placeholder(bool),
        /// Keep the previous body alive, as a request still in flight would.
        Hold,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => prop::collection::vec(message(), 0..3).prop_map(Step::Append),
            1 => (0usize..12, message()).prop_map(|(i, m)| Step::Rewrite(i, m)),
            1 => prop::sample::select(vec!["off", "low", "high"]).prop_map(Step::Effort),
            1 => any::<bool>().prop_map(Step::Placeholder),
            1 => Just(Step::Hold),
        ]
    }

    proptest! {
        #[test]
        fn an_extended_body_is_the_body(steps in prop::collection::vec(step(), 1..16)) {
            let mut cache = BodyCache::default();
            let mut history: Vec<Arc<Message>> = vec![Arc::new(Message::system("s0", "sys"))];
            let mut effort = "high";
            let mut opts = BodyOptions::default();
            let mut held = Vec::new();
            for s in steps {
                match s {
                    Step::Append(ms) => history.extend(ms.into_iter().map(Arc::new)),
                    Step::Rewrite(i, m) => {
                        history.truncate(i.min(history.len()));
                        history.push(Arc::new(m));
                    }
                    Step::Effort(e) => effort = e,
                    Step::Placeholder(p) => opts.reasoning_placeholder = p,
                    Step::Hold => {}
                }
                let mut req = request(Vec::new(), Some(effort));
                req.messages = history.clone();
                let extended = body_extending(&req, opts, &mut cache, 0).unwrap();
                prop_assert_eq!(&extended[..], &body(&req, opts).unwrap()[..]);
                held.push(extended);
                if held.len() > 1 {
                    held.remove(0);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn random_histories_serialise_append_only(
            history in prop::collection::vec(message(), 1..10),
            effort in prop::sample::select(vec!["off", "low", "high", "max"]),
        ) {
            let mut prev: Option<String> = None;
            for n in 1..=history.len() {
                let req = request(history[..n].to_vec(), Some(effort));
                let a = body(&req, BodyOptions::default()).unwrap();
                prop_assert_eq!(&a, &body(&req, BodyOptions::default()).unwrap());
                let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
                for m in v["messages"].as_array().unwrap() {
                    prop_assert!(m["content"].is_string(), "content must never be null: {}", m);
                }
                let s = String::from_utf8(a).unwrap();
                let messages = s.split("],\"stream\":").next().unwrap().to_owned();
                if let Some(p) = &prev {
                    prop_assert!(messages.starts_with(p.as_str()));
                }
                prev = Some(messages);
            }
        }
    }
}

#[test]
fn the_next_body_of_a_series_writes_only_its_new_messages_in_place() {
    let mut cache = BodyCache::default();
    let mut r = request(history(), Some("high"));
    let first = body_extending(&r, BodyOptions::default(), &mut cache, 64 * 1024).unwrap();
    let first_ptr = first.as_ptr();
    drop(first); // the request that sent it is done
    r.messages.push(Arc::new(Message::user_text("m9", "More")));
    let second = body_extending(&r, BodyOptions::default(), &mut cache, 0).unwrap();
    assert_eq!(&second[..], &body(&r, BodyOptions::default()).unwrap()[..]);
    assert_eq!(second.as_ptr(), first_ptr, "extended in place, not copied");
    // A different model starts over, with the right bytes.
    r.call.model.id = "deepseek-other".into();
    let third = body_extending(&r, BodyOptions::default(), &mut cache, 0).unwrap();
    assert_eq!(&third[..], &body(&r, BodyOptions::default()).unwrap()[..]);
}

#[test]
fn a_sized_buffer_gives_the_same_bytes_without_growing() {
    let r = request(history(), Some("high"));
    let plain = body(&r, BodyOptions::default()).unwrap();
    let sized = body_with_capacity(&r, BodyOptions::default(), plain.len()).unwrap();
    assert_eq!(sized, plain);
    assert_eq!(
        sized.capacity(),
        plain.len(),
        "written into the hinted buffer"
    );
    // A short hint only costs growth, never different bytes.
    assert_eq!(
        body_with_capacity(&r, BodyOptions::default(), 1).unwrap(),
        plain
    );
}
