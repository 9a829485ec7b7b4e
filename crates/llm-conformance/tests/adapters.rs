//! The conformance suite, instantiated for every adapter.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_llm::{AttachmentLookup, LlmAdapter};
use dsh_llm_conformance::{Dialect, suite};
use dsh_testkit::{Completion, Reply, anthropic, deepseek, openai};
use serde_json::Value;

type Env = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

fn env_with_key() -> Env {
    Arc::new(|name| name.ends_with("API_KEY").then(|| "sk-test-key".to_owned()))
}

/// The hand-written DeepSeek chat-completions adapter.
struct DeepSeek;

impl Dialect for DeepSeek {
    const NAME: &'static str = "deepseek";
    fn adapter(base_url: &str, idle_ms: u64) -> Arc<dyn LlmAdapter> {
        let config = dsh_llm_deepseek::DeepSeekConfig {
            base_url: Some(base_url.to_owned()),
            idle_timeout_ms: Some(idle_ms),
            ..Default::default()
        };
        Arc::new(dsh_llm_deepseek::DeepSeekAdapter::with_env(&config, env_with_key()).unwrap())
    }
    fn text(text: &str) -> Reply {
        Completion::new().text(text).reply()
    }
    fn reasoning_then_tool(reasoning: &str, id: &str, name: &str, parts: &[&str]) -> Reply {
        Completion::new()
            .reasoning(reasoning)
            .tool_call_parts(id, name, parts.iter().copied())
            .reply()
    }
    fn truncated(text: &str) -> Reply {
        Reply::sse().bytes(
            Completion::new()
                .text(text)
                .no_finish()
                .no_usage()
                .no_done()
                .to_bytes(),
        )
    }
    fn stalled(text: &str) -> Reply {
        Self::truncated(text).stall()
    }
    fn malformed() -> Reply {
        Reply::sse().bytes("data: {not json\n\n")
    }
    fn unauthorized() -> Reply {
        deepseek::unauthorized()
    }
    fn quota() -> Reply {
        deepseek::insufficient_balance()
    }
    fn rate_limited(retry_after: &str) -> Reply {
        deepseek::rate_limited(Some(retry_after))
    }
    fn server_error() -> Reply {
        deepseek::server_error()
    }
    fn context_exceeded() -> Reply {
        deepseek::context_exceeded()
    }
    fn passes_reasoning_back(body: &Value, reasoning: &str) -> bool {
        body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["reasoning_content"] == reasoning))
    }
    fn sent_arguments(body: &str, args: &str) -> bool {
        body.contains(&serde_json::to_string(args).unwrap())
    }
    fn image_adapter(base_url: &str, images: AttachmentLookup) -> Option<Arc<dyn LlmAdapter>> {
        let config = dsh_llm_deepseek::DeepSeekConfig {
            base_url: Some(base_url.to_owned()),
            ..Default::default()
        };
        Some(Arc::new(
            dsh_llm_deepseek::DeepSeekAdapter::with_env(&config, env_with_key())
                .unwrap()
                .with_attachments(images),
        ))
    }
    fn sent_image(body: &Value, media_type: &str, data: &str, in_tool_result: bool) -> bool {
        chat_completions_image(body, media_type, data, in_tool_result)
    }
}

/// Whether a chat-completions body carries the image as an `image_url` part of a user message
/// (right after the tool messages when it is a tool result's).
fn chat_completions_image(
    body: &Value,
    media_type: &str,
    data: &str,
    in_tool_result: bool,
) -> bool {
    let url = format!("data:{media_type};base64,{data}");
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    msgs.iter().enumerate().any(|(i, m)| {
        let has = m["role"] == "user"
            && m["content"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|p| p["type"] == "image_url" && p["image_url"]["url"] == url)
            });
        has && (i > 0 && msgs[i - 1]["role"] == "tool") == in_tool_result
    })
}

/// The library twin of the DeepSeek adapter (async-openai), same dialect and replies.
struct Twin;

impl Dialect for Twin {
    const NAME: &'static str = "deepseek-twin";
    fn adapter(base_url: &str, idle_ms: u64) -> Arc<dyn LlmAdapter> {
        let config = dsh_llm_twin::TwinConfig {
            base_url: Some(base_url.to_owned()),
            idle_timeout_ms: Some(idle_ms),
            ..Default::default()
        };
        Arc::new(dsh_llm_twin::TwinAdapter::with_env(&config, env_with_key()).unwrap())
    }
    fn text(text: &str) -> Reply {
        DeepSeek::text(text)
    }
    fn reasoning_then_tool(reasoning: &str, id: &str, name: &str, parts: &[&str]) -> Reply {
        DeepSeek::reasoning_then_tool(reasoning, id, name, parts)
    }
    fn truncated(text: &str) -> Reply {
        DeepSeek::truncated(text)
    }
    fn stalled(text: &str) -> Reply {
        DeepSeek::stalled(text)
    }
    fn malformed() -> Reply {
        DeepSeek::malformed()
    }
    fn unauthorized() -> Reply {
        DeepSeek::unauthorized()
    }
    fn quota() -> Reply {
        DeepSeek::quota()
    }
    fn rate_limited(retry_after: &str) -> Reply {
        DeepSeek::rate_limited(retry_after)
    }
    fn server_error() -> Reply {
        DeepSeek::server_error()
    }
    fn context_exceeded() -> Reply {
        DeepSeek::context_exceeded()
    }
    fn passes_reasoning_back(body: &Value, reasoning: &str) -> bool {
        DeepSeek::passes_reasoning_back(body, reasoning)
    }
    fn sent_arguments(body: &str, args: &str) -> bool {
        DeepSeek::sent_arguments(body, args)
    }
}

/// The Anthropic Messages adapter, DeepSeek flavor.
struct Messages;

impl Dialect for Messages {
    const NAME: &'static str = "anthropic";
    fn adapter(base_url: &str, idle_ms: u64) -> Arc<dyn LlmAdapter> {
        let config = dsh_llm_anthropic::AnthropicConfig {
            base_url: Some(base_url.to_owned()),
            idle_timeout_ms: Some(idle_ms),
            ..Default::default()
        };
        Arc::new(dsh_llm_anthropic::AnthropicAdapter::with_env(&config, env_with_key()).unwrap())
    }
    fn text(text: &str) -> Reply {
        anthropic::Message::new().text(text).reply()
    }
    fn reasoning_then_tool(reasoning: &str, id: &str, name: &str, parts: &[&str]) -> Reply {
        anthropic::Message::new()
            .thinking(reasoning, "sig-1")
            .tool_use_parts(id, name, parts.iter().copied())
            .reply()
    }
    fn truncated(text: &str) -> Reply {
        anthropic::Message::new().text(text).truncated().reply()
    }
    fn stalled(text: &str) -> Reply {
        Self::truncated(text).stall()
    }
    fn malformed() -> Reply {
        Reply::sse().bytes("event: message_start\ndata: {not json\n\n")
    }
    fn unauthorized() -> Reply {
        anthropic::unauthorized()
    }
    fn quota() -> Reply {
        anthropic::error_reply(
            anthropic::ErrorKind::InvalidRequest,
            "Your credit balance is too low to access the Anthropic API.",
        )
    }
    fn rate_limited(retry_after: &str) -> Reply {
        anthropic::rate_limited(Some(retry_after))
    }
    fn server_error() -> Reply {
        anthropic::overloaded()
    }
    fn context_exceeded() -> Reply {
        anthropic::context_exceeded()
    }
    fn passes_reasoning_back(body: &Value, reasoning: &str) -> bool {
        body["messages"].as_array().is_some_and(|m| {
            m.iter().any(|m| {
                m["content"].as_array().is_some_and(|c| {
                    c.iter().any(|b| {
                        b["type"] == "thinking"
                            && b["thinking"] == reasoning
                            && b["signature"] == "sig-1"
                    })
                })
            })
        })
    }
    fn sent_arguments(body: &str, args: &str) -> bool {
        body.contains(&format!("\"input\":{args}"))
    }
    fn image_adapter(base_url: &str, images: AttachmentLookup) -> Option<Arc<dyn LlmAdapter>> {
        let config = dsh_llm_anthropic::AnthropicConfig {
            base_url: Some(base_url.to_owned()),
            ..Default::default()
        };
        Some(Arc::new(
            dsh_llm_anthropic::AnthropicAdapter::with_env(&config, env_with_key())
                .unwrap()
                .with_attachments(images),
        ))
    }
    fn sent_image(body: &Value, media_type: &str, data: &str, in_tool_result: bool) -> bool {
        let is_image = |b: &Value| {
            b["type"] == "image"
                && b["source"]
                    == serde_json::json!({"type": "base64", "media_type": media_type, "data": data})
        };
        body["messages"].as_array().is_some_and(|m| {
            m.iter().filter(|m| m["role"] == "user").any(|m| {
                m["content"].as_array().is_some_and(|c| {
                    c.iter().any(|b| {
                        if in_tool_result {
                            b["type"] == "tool_result"
                                && b["content"]
                                    .as_array()
                                    .is_some_and(|c| c.iter().any(is_image))
                        } else {
                            is_image(b)
                        }
                    })
                })
            })
        })
    }
}

/// The OpenAI-compatible adapter, one instance per reasoning dialect.
macro_rules! openai_dialect {
    ($ty:ident, $name:literal, $pass_back:ident, $field:expr, $member:literal) => {
        struct $ty;

        impl $ty {
            fn field() -> openai::ReasoningField {
                $field
            }
        }

        impl Dialect for $ty {
            const NAME: &'static str = $name;
            fn adapter(base_url: &str, idle_ms: u64) -> Arc<dyn LlmAdapter> {
                let config = dsh_llm_openai::OpenAiConfig {
                    base_url: Some(base_url.to_owned()),
                    idle_timeout_ms: Some(idle_ms),
                    reasoning_pass_back: dsh_llm_openai::ReasoningPassBack::$pass_back,
                    ..Default::default()
                };
                Arc::new(dsh_llm_openai::OpenAiAdapter::with_env(&config, env_with_key()).unwrap())
            }
            fn text(text: &str) -> Reply {
                openai::reply(&Completion::new().text(text), &Self::field())
            }
            fn reasoning_then_tool(reasoning: &str, id: &str, name: &str, parts: &[&str]) -> Reply {
                let c = Completion::new().reasoning(reasoning).tool_call_parts(
                    id,
                    name,
                    parts.iter().copied(),
                );
                openai::reply(&c, &Self::field())
            }
            fn truncated(text: &str) -> Reply {
                DeepSeek::truncated(text)
            }
            fn stalled(text: &str) -> Reply {
                DeepSeek::stalled(text)
            }
            fn malformed() -> Reply {
                DeepSeek::malformed()
            }
            fn unauthorized() -> Reply {
                openai::unauthorized()
            }
            fn quota() -> Reply {
                openai::insufficient_quota()
            }
            fn rate_limited(retry_after: &str) -> Reply {
                deepseek::rate_limited(Some(retry_after))
            }
            fn server_error() -> Reply {
                deepseek::overloaded()
            }
            fn context_exceeded() -> Reply {
                openai::context_exceeded()
            }
            fn passes_reasoning_back(body: &Value, reasoning: &str) -> bool {
                body["messages"].as_array().is_some_and(|m| {
                    m.iter().any(|m| {
                        let v = &m[$member];
                        v == reasoning
                            || (v[0]["text"] == reasoning && v[0]["signature"] == "sig-od")
                    })
                })
            }
            fn sent_arguments(body: &str, args: &str) -> bool {
                DeepSeek::sent_arguments(body, args)
            }
            fn image_adapter(
                base_url: &str,
                images: AttachmentLookup,
            ) -> Option<Arc<dyn LlmAdapter>> {
                let config = dsh_llm_openai::OpenAiConfig {
                    base_url: Some(base_url.to_owned()),
                    reasoning_pass_back: dsh_llm_openai::ReasoningPassBack::$pass_back,
                    ..Default::default()
                };
                Some(Arc::new(
                    dsh_llm_openai::OpenAiAdapter::with_env(&config, env_with_key())
                        .unwrap()
                        .with_attachments(images),
                ))
            }
            fn sent_image(
                body: &Value,
                media_type: &str,
                data: &str,
                in_tool_result: bool,
            ) -> bool {
                let url = format!("data:{media_type};base64,{data}");
                let msgs = body["messages"].as_array().cloned().unwrap_or_default();
                msgs.iter().enumerate().any(|(i, m)| {
                    let has = m["role"] == "user"
                        && m["content"].as_array().is_some_and(|c| {
                            c.iter()
                                .any(|p| p["type"] == "image_url" && p["image_url"]["url"] == url)
                        });
                    // A tool result's images follow its tool message(s) as a user message.
                    has && (i > 0 && msgs[i - 1]["role"] == "tool") == in_tool_result
                })
            }
        }
    };
}

openai_dialect!(
    OpenAiReasoningContent,
    "openai/reasoning_content",
    ReasoningContent,
    openai::ReasoningField::ReasoningContent,
    "reasoning_content"
);
openai_dialect!(
    OpenAiReasoning,
    "openai/reasoning",
    Reasoning,
    openai::ReasoningField::Reasoning,
    "reasoning"
);
openai_dialect!(
    OpenAiReasoningDetails,
    "openai/reasoning_details",
    ReasoningDetails,
    openai::ReasoningField::ReasoningDetails {
        signature: Some("sig-od".to_owned())
    },
    "reasoning_details"
);

suite!(deepseek_chat, crate::DeepSeek);
suite!(deepseek_twin, crate::Twin);
suite!(openai_reasoning_content, crate::OpenAiReasoningContent);
suite!(openai_reasoning, crate::OpenAiReasoning);
suite!(openai_reasoning_details, crate::OpenAiReasoningDetails);
suite!(anthropic_messages, crate::Messages);
