//! Request bodies: golden bytes, append-only extension, effort and tool mapping.

use std::sync::Arc;

use dsh_llm::attachments::AttachmentLookup;
use dsh_llm::{ContentBlock, LlmRequest, Message, MessageSource, Role, ToolSpec};
use dsh_llm_deepseek::BodyOptions;
use dsh_llm_deepseek::request::{self as rq, BodyCache, Images};

/// The store of the tests: [`IMAGE`]'s bytes under its id.
struct OneImage;

impl dsh_llm::AttachmentStore for OneImage {
    fn read(&self, id: &str) -> Result<Vec<u8>, dsh_llm::AttachmentError> {
        if id == IMAGE {
            Ok(b"\x89PNG-test".to_vec())
        } else {
            Err(dsh_llm::AttachmentError::NotFound(id.to_owned()))
        }
    }
}

const IMAGE: &str = "sha256:b1ff9c8ea3a780bad09b346c423d2d0e46815926879b18e841d928376a946640";
const IMAGE_URL: &str = "data:image/png;base64,iVBORy10ZXN0";

static STORE: std::sync::LazyLock<AttachmentLookup> =
    std::sync::LazyLock::new(|| dsh_llm::fixed_attachments(Arc::new(OneImage)));

fn image(offloaded: bool) -> ContentBlock {
    ContentBlock::Image {
        attachment: serde_json::from_value(json!({
            "attachmentId": IMAGE, "mediaType": "image/png", "width": 3, "height": 2, "bytes": 9
        }))
        .unwrap(),
        offloaded: offloaded.then_some(true),
    }
}

fn vision(mut r: LlmRequest) -> LlmRequest {
    r.call.model.input_modalities = vec![dsh_llm::Modality::Text, dsh_llm::Modality::Image];
    r
}

fn body(r: &LlmRequest, o: BodyOptions) -> Result<Vec<u8>, dsh_llm::LlmFailure> {
    rq::body(r, o, Images { lookup: &STORE })
}

fn body_with_capacity(
    r: &LlmRequest,
    o: BodyOptions,
    capacity: usize,
) -> Result<Vec<u8>, dsh_llm::LlmFailure> {
    rq::body_with_capacity(r, o, Images { lookup: &STORE }, capacity)
}

fn body_extending(
    r: &LlmRequest,
    o: BodyOptions,
    cache: &mut BodyCache,
    capacity: usize,
) -> Result<bytes::Bytes, dsh_llm::LlmFailure> {
    rq::body_extending(r, o, Images { lookup: &STORE }, cache, capacity)
}
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
            ("call_[0-9]{2}", prop::option::of(text()), 0u8..3).prop_map(|(id, t, img)| {
                let mut content: Vec<ContentBlock> =
                    t.into_iter().map(ContentBlock::text).collect();
                if img > 0 {
                    content.push(image(img == 2));
                }
                Message::tool_result("t", id, content, false)
            }),
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
        /// Switch the model's image input on or off.
        Vision(bool),
        /// The tool list offered from here on (see `tool_list`).
        Tools(usize),
    }

    /// Tool lists a series switches between: none, one, a second added, the first's
    /// description changed (equal names, other bytes) and its schema changed.
    fn tool_list(i: usize) -> Vec<ToolSpec> {
        let spec = |name: &str, description: &str, kind: &str| {
            ToolSpec::new(
                name,
                description,
                json!({"type": "object", "properties": {"x": {"type": kind}}}),
            )
        };
        match i % 5 {
            0 => Vec::new(),
            1 => vec![spec("read", "Read a file.", "string")],
            2 => vec![
                spec("read", "Read a file.", "string"),
                spec("bash", "Run \"a\" command.", "string"),
            ],
            3 => vec![spec("read", "Read a file, again.", "string")],
            _ => vec![spec("read", "Read a file.", "integer")],
        }
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => prop::collection::vec(message(), 0..3).prop_map(Step::Append),
            1 => (0usize..12, message()).prop_map(|(i, m)| Step::Rewrite(i, m)),
            1 => prop::sample::select(vec!["off", "low", "high"]).prop_map(Step::Effort),
            1 => any::<bool>().prop_map(Step::Placeholder),
            1 => Just(Step::Hold),
            1 => any::<bool>().prop_map(Step::Vision),
            1 => (0usize..5).prop_map(Step::Tools),
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
            let mut images = true;
            let mut tools = Vec::new();
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
                    Step::Vision(v) => images = v,
                    // A fresh list (new schema pointers) of the same or other tools.
                    Step::Tools(i) => tools = tool_list(i),
                }
                let mut req = request(Vec::new(), Some(effort));
                req.tools = tools.clone();
                if images {
                    req = vision(req);
                }
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

#[test]
fn images_become_parts_on_an_image_model_and_placeholders_elsewhere() {
    let msgs = vec![
        Message::system("s", "sys"),
        Message::new(
            "u",
            Role::User,
            vec![ContentBlock::text("Look:"), image(false)],
            MessageSource::user(),
        ),
        assistant(
            "a",
            vec![
                ContentBlock::tool_call("c1", "read_image", "{}"),
                ContentBlock::tool_call("c2", "read", "{}"),
                ContentBlock::tool_call("c3", "read_image", "{}"),
            ],
        ),
        Message::tool_result(
            "t1",
            "c1",
            vec![ContentBlock::text("Image a.png"), image(false)],
            false,
        ),
        Message::tool_result("t2", "c2", vec![ContentBlock::text("text")], false),
        Message::tool_result("t3", "c3", vec![image(false), image(true)], false),
    ];
    let r = vision(request(msgs.clone(), Some("high")));
    let v: serde_json::Value =
        serde_json::from_slice(&body(&r, BodyOptions::default()).unwrap()).unwrap();
    let m = v["messages"].as_array().unwrap();
    assert_eq!(
        m[1]["content"],
        json!([{"type":"text","text":"Look:"},{"type":"image_url","image_url":{"url":IMAGE_URL}}])
    );
    // The tool messages follow the calls directly; the images come after the run.
    let roles: Vec<&str> = m.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "tool",
            "user"
        ]
    );
    assert_eq!(m[3]["content"], "Image a.png");
    assert_eq!(m[4]["content"], "text");
    assert!(
        m[5]["content"]
            .as_str()
            .unwrap()
            .starts_with("[image omitted to fit request image limits;"),
        "{}",
        m[5]
    );
    assert_eq!(
        m[6]["content"],
        json!([
            {"type":"text","text":"[images returned by tool call c1]"},
            {"type":"image_url","image_url":{"url":IMAGE_URL}},
            {"type":"text","text":"[images returned by tool call c3]"},
            {"type":"image_url","image_url":{"url":IMAGE_URL}}
        ])
    );
    // The next step extends the bytes: the images' user message stays where it was.
    let mut longer = msgs.clone();
    longer.push(assistant("a2", vec![ContentBlock::text("Two images.")]));
    let first = body(&r, BodyOptions::default()).unwrap();
    let second = body(
        &vision(request(longer, Some("high"))),
        BodyOptions::default(),
    )
    .unwrap();
    let cut = |b: &[u8]| {
        String::from_utf8(b.to_vec())
            .unwrap()
            .split("],\"stream\":")
            .next()
            .unwrap()
            .to_owned()
    };
    assert!(cut(&second).starts_with(&cut(&first)));
    // A text-only model: the placeholders, never the bytes.
    let t = body(&request(msgs.clone(), Some("high")), BodyOptions::default()).unwrap();
    let t = String::from_utf8(t).unwrap();
    assert!(!t.contains("iVBORy10ZXN0"), "{t}");
    assert!(t.contains(
        "[image omitted because this model accepts text only; attachment sha256:b1ff9c8e]"
    ));
    // Bytes the store does not have: a typed refusal.
    let mut missing = msgs;
    missing[1] = Message::new(
        "u",
        Role::User,
        vec![ContentBlock::Image {
            attachment: serde_json::from_value(json!({
                "attachmentId": format!("sha256:{}", "0".repeat(64)), "mediaType": "image/png",
                "width": 1, "height": 1, "bytes": 1
            }))
            .unwrap(),
            offloaded: None,
        }],
        MessageSource::user(),
    );
    let f = body(
        &vision(request(missing, Some("high"))),
        BodyOptions::default(),
    )
    .unwrap_err();
    assert_eq!(f.code, "UNSUPPORTED_CONTENT");
    assert!(f.message.contains("not in the store"), "{}", f.message);
}
