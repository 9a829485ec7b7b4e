//! Provider-neutral messages, content blocks and message sources.
//!
//! These are stored verbatim in session logs (`session-format.md` §6), so their JSON forms are a
//! contract: camelCase members, kebab-case tags, optional members omitted (never `null`), and
//! unknown members of messages, sources and attachments preserved in order.

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::arguments::ToolArguments;

/// The closed set of message roles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The rendered system prompt.
    System,
    /// Producer-owned developer messages (tool registry updates).
    Developer,
    /// Human prompts and context-injecting producers.
    User,
    /// Model output.
    Assistant,
    /// A tool result answering one tool call.
    Tool,
}

impl Role {
    /// The wire/log spelling of the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// Where a message came from (`session-format.md` §6.4).
///
/// The set of kinds is open (plugins add their own), so a source is its `kind` plus every other
/// member kept verbatim and in order. Typed accessors cover the kinds the core interprets.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageSource {
    /// Non-empty producer kind, e.g. `user`, `model`, `tool`, `system-prompt`, `plugin:<name>`.
    pub kind: String,
    /// Every other member (`provider`, `model`, `callId`, `form`, ...), in order.
    pub extra: SourceMembers,
}

/// The members of a message source other than `kind`, in order. A small vector rather than a
/// map: a source holds one to three members, and a map's table costs ~250 bytes more per
/// stored message. Equality ignores order, as a JSON object's does.
#[derive(Clone, Debug, Default)]
pub struct SourceMembers(Vec<(String, Value)>);

impl SourceMembers {
    /// No members.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Whether `key` is a member.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` (in place when present, else last) and returns the value it replaced.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => Some(std::mem::replace(v, value)),
            None => {
                self.0.push((key, value));
                None
            }
        }
    }

    /// Removes `key`, keeping the order of the others.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(i).1)
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The members in order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The member names in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }
}

impl PartialEq for SourceMembers {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl<'a> IntoIterator for &'a SourceMembers {
    type Item = (&'a String, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, Value)>,
        fn(&'a (String, Value)) -> (&'a String, &'a Value),
    >;

    fn into_iter(self) -> Self::IntoIter {
        fn pair((k, v): &(String, Value)) -> (&String, &Value) {
            (k, v)
        }
        self.0.iter().map(pair)
    }
}

impl MessageSource {
    /// A source of the given kind with no other members.
    pub fn new(kind: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            extra: SourceMembers::new(),
        }
    }

    /// `{"kind":"user"}`: a human prompt.
    pub fn user() -> Self {
        Self::new("user")
    }

    /// `{"kind":"system-prompt"}`: a system prompt node.
    pub fn system_prompt() -> Self {
        Self::new("system-prompt")
    }

    /// `{"kind":"tool","callId":c}`: a tool result.
    pub fn tool(call_id: impl Into<String>) -> Self {
        Self::new("tool").with("callId", Value::String(call_id.into()))
    }

    /// `{"kind":"model","provider","model","replayState"?}`: an assistant message.
    pub fn model(
        provider: impl Into<String>,
        model: impl Into<String>,
        replay_state: Option<Value>,
    ) -> Self {
        let mut s = Self::new("model")
            .with("provider", Value::String(provider.into()))
            .with("model", Value::String(model.into()));
        if let Some(r) = replay_state {
            s = s.with("replayState", r);
        }
        s
    }

    /// Adds (or replaces) one member; builder style.
    pub fn with(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }

    fn str_member(&self, key: &str) -> Option<&str> {
        self.extra.get(key).and_then(Value::as_str)
    }

    /// `provider` of a `model` source.
    pub fn provider(&self) -> Option<&str> {
        self.str_member("provider")
    }

    /// `model` of a `model` source.
    pub fn model_id(&self) -> Option<&str> {
        self.str_member("model")
    }

    /// `callId` of a `tool` source.
    pub fn call_id(&self) -> Option<&str> {
        self.str_member("callId")
    }

    /// `replayState` of a `model` source (opaque, provider-owned).
    pub fn replay_state(&self) -> Option<&Value> {
        self.extra.get("replayState")
    }
}

impl Serialize for MessageSource {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1 + self.extra.len()))?;
        map.serialize_entry("kind", &self.kind)?;
        for (k, v) in &self.extra {
            if k != "kind" {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for MessageSource {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SourceVisitor;

        impl<'de> de::Visitor<'de> for SourceVisitor {
            type Value = MessageSource;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a message source object")
            }

            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut kind = None;
                let mut extra = SourceMembers::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: Value = map.next_value()?;
                    if key == "kind" {
                        kind = Some(value);
                    } else {
                        extra.insert(key, value);
                    }
                }
                extra.0.shrink_to_fit();
                let kind = match kind {
                    Some(Value::String(k)) if !k.is_empty() => k,
                    Some(_) => {
                        return Err(de::Error::custom(
                            "message source `kind` must be a non-empty string",
                        ));
                    }
                    None => return Err(de::Error::custom("message source is missing `kind`")),
                };
                Ok(MessageSource { kind, extra })
            }
        }

        deserializer.deserialize_map(SourceVisitor)
    }
}

/// A reference to a stored image (`session-format.md` §6.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageRef {
    /// Content address, `sha256:<64 hex>` in practice.
    pub attachment_id: String,
    /// `image/png`, `image/jpeg`, `image/webp` or `image/gif`.
    pub media_type: String,
    /// Width in pixels.
    pub width: u64,
    /// Height in pixels.
    pub height: u64,
    /// Size in bytes.
    pub bytes: u64,
    /// Optional display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Original dimensions, only when the stored image was downscaled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_dimensions: Option<Dimensions>,
    /// Unknown members, preserved.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Width and height of an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dimensions {
    /// Width in pixels.
    pub width: u64,
    /// Height in pixels.
    pub height: u64,
}

/// A reference to a stored file (`session-format.md` §6.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileRef {
    /// `sha256:<64 hex>` of the verbatim bytes.
    pub attachment_id: String,
    /// File name.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Unknown members, preserved.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool call made by the model. `arguments` is the raw JSON string exactly as streamed (it may
/// be invalid JSON; the tool layer parses it once).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider call id (`call_00_…` on DeepSeek).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Raw argument string, verbatim (shared, not copied, when cloned).
    pub arguments: ToolArguments,
}

/// The retired v3 `tool-result` wrapper block (read-only compatibility; refused in v4 logs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultBlock {
    /// The call this result answers.
    pub tool_call_id: String,
    /// The result content.
    pub content: Vec<ContentBlock>,
    /// Whether the result is an error; absent means false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

/// One content block of a message (`session-format.md` §6.2).
#[derive(Clone, Debug, PartialEq)]
pub enum ContentBlock {
    /// `{"type":"text","text":s}`
    Text {
        /// The text.
        text: String,
    },
    /// `{"type":"reasoning","text":s}` (assistant only).
    Reasoning {
        /// The reasoning text, byte-exact as streamed.
        text: String,
    },
    /// `{"type":"tool-call","id","name","arguments"}` (assistant only).
    ToolCall(ToolCall),
    /// `{"type":"image","attachment":ImageRef,"offloaded"?:true}`.
    Image {
        /// The stored image.
        attachment: ImageRef,
        /// Set only by the `image/offload` projection, never in a stored message.
        offloaded: Option<bool>,
    },
    /// `{"type":"file","attachment":FileRef}`.
    File {
        /// The stored file.
        attachment: FileRef,
    },
    /// `{"type":"tool-addition","toolName":s}` (developer only).
    ToolAddition {
        /// Name of the tool that became available.
        tool_name: String,
    },
    /// `{"type":"tool-removal","toolName":s}` (developer only).
    ToolRemoval {
        /// Name of the tool that went away.
        tool_name: String,
    },
    /// The retired v3 `tool-result` wrapper.
    ToolResult(ToolResultBlock),
    /// Any other (plugin) block, kept opaque and verbatim. Always an object with a string `type`.
    Other(Map<String, Value>),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// A reasoning block.
    pub fn reasoning(text: impl Into<String>) -> Self {
        ContentBlock::Reasoning { text: text.into() }
    }

    /// A tool-call block.
    pub fn tool_call(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<ToolArguments>,
    ) -> Self {
        ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        })
    }

    /// The `type` tag of this block.
    pub fn type_tag(&self) -> &str {
        match self {
            ContentBlock::Text { .. } => "text",
            ContentBlock::Reasoning { .. } => "reasoning",
            ContentBlock::ToolCall(_) => "tool-call",
            ContentBlock::Image { .. } => "image",
            ContentBlock::File { .. } => "file",
            ContentBlock::ToolAddition { .. } => "tool-addition",
            ContentBlock::ToolRemoval { .. } => "tool-removal",
            ContentBlock::ToolResult(_) => "tool-result",
            ContentBlock::Other(m) => m.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// The text of a `text` block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text { text } => Some(text),
            _ => None,
        }
    }

    /// The tool call of a `tool-call` block.
    pub fn as_tool_call(&self) -> Option<&ToolCall> {
        match self {
            ContentBlock::ToolCall(c) => Some(c),
            _ => None,
        }
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let ContentBlock::Other(m) = self {
            return m.serialize(serializer);
        }
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", self.type_tag())?;
        match self {
            ContentBlock::Text { text } | ContentBlock::Reasoning { text } => {
                map.serialize_entry("text", text)?;
            }
            ContentBlock::ToolCall(c) => {
                map.serialize_entry("id", &c.id)?;
                map.serialize_entry("name", &c.name)?;
                map.serialize_entry("arguments", &c.arguments)?;
            }
            ContentBlock::Image {
                attachment,
                offloaded,
            } => {
                map.serialize_entry("attachment", attachment)?;
                if let Some(o) = offloaded {
                    map.serialize_entry("offloaded", o)?;
                }
            }
            ContentBlock::File { attachment } => map.serialize_entry("attachment", attachment)?,
            ContentBlock::ToolAddition { tool_name } | ContentBlock::ToolRemoval { tool_name } => {
                map.serialize_entry("toolName", tool_name)?;
            }
            ContentBlock::ToolResult(r) => {
                map.serialize_entry("toolCallId", &r.tool_call_id)?;
                map.serialize_entry("content", &r.content)?;
                if let Some(e) = r.is_error {
                    map.serialize_entry("isError", &e)?;
                }
            }
            ContentBlock::Other(_) => {}
        }
        map.end()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextRepr {
    #[serde(rename = "type")]
    _type: String,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallRepr {
    #[serde(rename = "type")]
    _type: String,
    id: String,
    name: String,
    arguments: ToolArguments,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageRepr {
    #[serde(rename = "type")]
    _type: String,
    attachment: ImageRef,
    #[serde(default)]
    offloaded: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRepr {
    #[serde(rename = "type")]
    _type: String,
    attachment: FileRef,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ToolNameRepr {
    #[serde(rename = "type")]
    _type: String,
    tool_name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ToolResultRepr {
    #[serde(rename = "type")]
    _type: String,
    tool_call_id: String,
    content: Vec<ContentBlock>,
    #[serde(default)]
    is_error: Option<bool>,
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BlockVisitor)
    }
}

/// The general decoder of a content block, from its members as a map (any member order,
/// unknown block types kept as [`ContentBlock::Other`]).
fn block_from_map<E: de::Error>(map: Map<String, Value>) -> Result<ContentBlock, E> {
    let tag = match map.get("type") {
        Some(Value::String(t)) if !t.is_empty() => t.clone(),
        Some(_) => {
            return Err(de::Error::custom(
                "content block `type` must be a non-empty string",
            ));
        }
        None => return Err(de::Error::custom("content block is missing `type`")),
    };
    fn parse<T: serde::de::DeserializeOwned, E: de::Error>(
        tag: &str,
        map: Map<String, Value>,
    ) -> Result<T, E> {
        serde_json::from_value(Value::Object(map))
            .map_err(|e| E::custom(format!("invalid `{tag}` content block: {e}")))
    }
    Ok(match tag.as_str() {
        "text" => ContentBlock::Text {
            text: parse::<TextRepr, E>(&tag, map)?.text,
        },
        "reasoning" => ContentBlock::Reasoning {
            text: parse::<TextRepr, E>(&tag, map)?.text,
        },
        "tool-call" => {
            let r: ToolCallRepr = parse::<_, E>(&tag, map)?;
            ContentBlock::ToolCall(ToolCall {
                id: r.id,
                name: r.name,
                arguments: r.arguments,
            })
        }
        "image" => {
            let r: ImageRepr = parse::<_, E>(&tag, map)?;
            ContentBlock::Image {
                attachment: r.attachment,
                offloaded: r.offloaded,
            }
        }
        "file" => ContentBlock::File {
            attachment: parse::<FileRepr, E>(&tag, map)?.attachment,
        },
        "tool-addition" => ContentBlock::ToolAddition {
            tool_name: parse::<ToolNameRepr, E>(&tag, map)?.tool_name,
        },
        "tool-removal" => ContentBlock::ToolRemoval {
            tool_name: parse::<ToolNameRepr, E>(&tag, map)?.tool_name,
        },
        "tool-result" => {
            let r: ToolResultRepr = parse::<_, E>(&tag, map)?;
            ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: r.tool_call_id,
                content: r.content,
                is_error: r.is_error,
            })
        }
        _ => ContentBlock::Other(map),
    })
}

/// Decodes a content block in one pass when its first member is `type` (as every writer puts
/// it) and the type is `text`, `reasoning` or `tool-call` (nearly every stored block); anything
/// else is gathered into a map and decoded by [`block_from_map`], with the same rules.
struct BlockVisitor;

impl<'de> de::Visitor<'de> for BlockVisitor {
    type Value = ContentBlock;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a content block object")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<ContentBlock, A::Error> {
        let mut rest = Map::new();
        let Some(first) = map.next_key::<String>()? else {
            return block_from_map(rest);
        };
        let first_value: Value = map.next_value()?;
        let tag = match (&*first, &first_value) {
            ("type", Value::String(t))
                if matches!(t.as_str(), "text" | "reasoning" | "tool-call") =>
            {
                t.clone()
            }
            _ => {
                rest.insert(first, first_value);
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    rest.insert(k, v);
                }
                return block_from_map(rest);
            }
        };
        let invalid = |e: &dyn std::fmt::Display| {
            <A::Error as de::Error>::custom(format!("invalid `{tag}` content block: {e}"))
        };
        let mut text: Option<String> = None;
        let mut id: Option<String> = None;
        let mut name: Option<String> = None;
        let mut arguments: Option<String> = None;
        while let Some(key) = map.next_key::<String>()? {
            let slot = match (tag.as_str(), key.as_str()) {
                ("text" | "reasoning", "text") => &mut text,
                ("tool-call", "id") => &mut id,
                ("tool-call", "name") => &mut name,
                ("tool-call", "arguments") => &mut arguments,
                _ => return Err(invalid(&format_args!("unknown field `{key}`"))),
            };
            let value: String = map.next_value().map_err(|e| invalid(&e))?;
            if slot.replace(value).is_some() {
                return Err(invalid(&format_args!("duplicate field `{key}`")));
            }
        }
        let need = |v: Option<String>, field: &str| {
            v.ok_or_else(|| invalid(&format_args!("missing field `{field}`")))
        };
        Ok(match tag.as_str() {
            "text" => ContentBlock::Text {
                text: need(text, "text")?,
            },
            "reasoning" => ContentBlock::Reasoning {
                text: need(text, "text")?,
            },
            _ => ContentBlock::ToolCall(ToolCall {
                id: need(id, "id")?,
                name: need(name, "name")?,
                arguments: need(arguments, "arguments")?.into(),
            }),
        })
    }
}

/// One provider-neutral message (`session-format.md` §6.1).
///
/// Serialised with the member order the original harness writes for each role (so dsh's logs are
/// byte-comparable with upstream's): `user` is `content, source, role, id`; `developer` is
/// `source, content, role, id`; `tool` is `role, source, toolCallId, content, isError?, id`;
/// `system` and `assistant` are `role, content, source, id`.
/// Unknown members follow, in their original order.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// Non-empty id, unique within the session (dsh uses UUIDs).
    pub id: String,
    /// The role.
    pub role: Role,
    /// Content blocks, in order.
    pub content: Vec<ContentBlock>,
    /// Producer of the message.
    pub source: MessageSource,
    /// For `tool` messages: the call answered (equals `source.callId`).
    pub tool_call_id: Option<String>,
    /// For `tool` messages: whether the result is an error (absent reads as false).
    pub is_error: Option<bool>,
    /// Unknown members (message extensions), preserved in order.
    pub extra: Map<String, Value>,
}

impl Message {
    /// A message with no tool members and no extensions.
    pub fn new(
        id: impl Into<String>,
        role: Role,
        content: Vec<ContentBlock>,
        source: MessageSource,
    ) -> Self {
        Self {
            id: id.into(),
            role,
            content,
            source,
            tool_call_id: None,
            is_error: None,
            extra: Map::new(),
        }
    }

    /// A system prompt message with one text block.
    pub fn system(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(
            id,
            Role::System,
            vec![ContentBlock::text(text)],
            MessageSource::system_prompt(),
        )
    }

    /// A human prompt with one text block.
    pub fn user_text(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(
            id,
            Role::User,
            vec![ContentBlock::text(text)],
            MessageSource::user(),
        )
    }

    /// A tool result message (`isError` always written, like dsh's writer).
    pub fn tool_result(
        id: impl Into<String>,
        call_id: impl Into<String>,
        content: Vec<ContentBlock>,
        is_error: bool,
    ) -> Self {
        let call_id = call_id.into();
        let mut m = Self::new(
            id,
            Role::Tool,
            content,
            MessageSource::tool(call_id.clone()),
        );
        m.tool_call_id = Some(call_id);
        m.is_error = Some(is_error);
        m
    }

    /// Concatenation of all `text` blocks (no separator).
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect()
    }

    /// Concatenation of all `reasoning` blocks (no separator).
    pub fn reasoning(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Reasoning { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(ContentBlock::as_tool_call)
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        const KNOWN: [&str; 6] = ["id", "role", "content", "source", "toolCallId", "isError"];
        let mut map = serializer.serialize_map(None)?;
        match self.role {
            Role::User => {
                map.serialize_entry("content", &self.content)?;
                map.serialize_entry("source", &self.source)?;
                map.serialize_entry("role", &self.role)?;
            }
            Role::Tool => {
                map.serialize_entry("role", &self.role)?;
                map.serialize_entry("source", &self.source)?;
                if let Some(t) = &self.tool_call_id {
                    map.serialize_entry("toolCallId", t)?;
                }
                map.serialize_entry("content", &self.content)?;
                if let Some(e) = self.is_error {
                    map.serialize_entry("isError", &e)?;
                }
            }
            Role::Developer => {
                map.serialize_entry("source", &self.source)?;
                map.serialize_entry("content", &self.content)?;
                map.serialize_entry("role", &self.role)?;
            }
            Role::System | Role::Assistant => {
                map.serialize_entry("role", &self.role)?;
                map.serialize_entry("content", &self.content)?;
                map.serialize_entry("source", &self.source)?;
            }
        }
        if self.role != Role::Tool {
            if let Some(t) = &self.tool_call_id {
                map.serialize_entry("toolCallId", t)?;
            }
            if let Some(e) = self.is_error {
                map.serialize_entry("isError", &e)?;
            }
        }
        map.serialize_entry("id", &self.id)?;
        for (k, v) in &self.extra {
            if !KNOWN.contains(&k.as_str()) {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

/// The members of a stored message, told apart without allocating for the known ones.
enum MessageKey {
    Id,
    Role,
    Content,
    Source,
    ToolCallId,
    IsError,
    Other(String),
}

impl<'de> Deserialize<'de> for MessageKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl de::Visitor<'_> for KeyVisitor {
            type Value = MessageKey;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a message member name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<MessageKey, E> {
                Ok(match v {
                    "id" => MessageKey::Id,
                    "role" => MessageKey::Role,
                    "content" => MessageKey::Content,
                    "source" => MessageKey::Source,
                    "toolCallId" => MessageKey::ToolCallId,
                    "isError" => MessageKey::IsError,
                    other => MessageKey::Other(other.to_owned()),
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

/// Decodes a message in one pass over its members (no buffering of the whole object, as
/// `#[serde(flatten)]` would do): the known members into their types, the rest into `extra`
/// in their order.
struct MessageVisitor;

impl<'de> de::Visitor<'de> for MessageVisitor {
    type Value = Message;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a message object")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        fn once<T, E: de::Error>(
            slot: &mut Option<T>,
            value: T,
            name: &'static str,
        ) -> Result<(), E> {
            if slot.replace(value).is_some() {
                return Err(E::duplicate_field(name));
            }
            Ok(())
        }
        let mut id: Option<String> = None;
        let mut role: Option<Role> = None;
        let mut content: Option<Vec<ContentBlock>> = None;
        let mut source: Option<MessageSource> = None;
        let mut tool_call_id: Option<Option<String>> = None;
        let mut is_error: Option<Option<bool>> = None;
        let mut extra = Map::new();
        while let Some(key) = map.next_key::<MessageKey>()? {
            match key {
                MessageKey::Id => once(&mut id, map.next_value()?, "id")?,
                MessageKey::Role => once(&mut role, map.next_value()?, "role")?,
                MessageKey::Content => once(&mut content, map.next_value()?, "content")?,
                MessageKey::Source => once(&mut source, map.next_value()?, "source")?,
                MessageKey::ToolCallId => {
                    once(&mut tool_call_id, map.next_value()?, "toolCallId")?;
                }
                MessageKey::IsError => once(&mut is_error, map.next_value()?, "isError")?,
                MessageKey::Other(k) => {
                    let v: Value = map.next_value()?;
                    extra.insert(k, v);
                }
            }
        }
        let id = id.ok_or_else(|| de::Error::missing_field("id"))?;
        if id.is_empty() {
            return Err(de::Error::custom("message `id` must be a non-empty string"));
        }
        let mut content = content.ok_or_else(|| de::Error::missing_field("content"))?;
        // serde grows a Vec without a length hint to capacity 4; a stored message keeps its
        // blocks for the whole session, so give the slack back (most messages hold one block).
        content.shrink_to_fit();
        Ok(Message {
            id,
            role: role.ok_or_else(|| de::Error::missing_field("role"))?,
            content,
            source: source.ok_or_else(|| de::Error::missing_field("source"))?,
            tool_call_id: tool_call_id.flatten(),
            is_error: is_error.flatten(),
            extra,
        })
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MessageVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(s: &str) -> Result<Message, serde_json::Error> {
        serde_json::from_str(s)
    }

    #[test]
    fn source_members_keep_order_replace_duplicates_and_compare_as_objects() {
        let text = r#"{"zeta":1,"kind":"tool","callId":"c1","zeta":2,"alpha":true}"#;
        let s: MessageSource = serde_json::from_str(text).unwrap();
        assert_eq!(s.kind, "tool");
        assert_eq!(s.call_id(), Some("c1"));
        assert_eq!(
            s.extra.keys().collect::<Vec<_>>(),
            ["zeta", "callId", "alpha"]
        );
        assert_eq!(s.extra.get("zeta"), Some(&Value::from(2)));
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"kind":"tool","zeta":2,"callId":"c1","alpha":true}"#
        );
        let reordered: MessageSource =
            serde_json::from_str(r#"{"kind":"tool","alpha":true,"callId":"c1","zeta":2}"#).unwrap();
        assert_eq!(s, reordered);
        let other: MessageSource =
            serde_json::from_str(r#"{"kind":"tool","alpha":true,"callId":"c2","zeta":2}"#).unwrap();
        assert_ne!(s, other);
        let mut m = s.extra.clone();
        assert_eq!(m.remove("callId"), Some(Value::from("c1")));
        assert_eq!(m.keys().collect::<Vec<_>>(), ["zeta", "alpha"]);
        for bad in [
            r#"{"callId":"c"}"#,
            r#"{"kind":""}"#,
            r#"{"kind":3}"#,
            "[1]",
        ] {
            assert!(serde_json::from_str::<MessageSource>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn members_decode_in_one_pass_and_unknown_ones_keep_their_order() {
        let text = r#"{"zeta":1,"role":"user","content":[{"type":"text","text":"hi"}],"alpha":{"b":2},"source":{"kind":"user"},"id":"m1","toolCallId":null}"#;
        let m = decode(text).unwrap();
        assert_eq!(m.id, "m1");
        assert_eq!(m.role, Role::User);
        assert_eq!(m.text(), "hi");
        assert_eq!(m.tool_call_id, None);
        assert_eq!(m.extra.keys().collect::<Vec<_>>(), ["zeta", "alpha"]);
        assert_eq!(m.content.capacity(), 1, "no slack kept");
        // The same from a JSON tree.
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::from_value::<Message>(v).unwrap(), m);
    }

    #[test]
    fn blocks_decode_alike_whatever_the_member_order() {
        let pairs = [
            (
                r#"{"type":"text","text":"a"}"#,
                r#"{"text":"a","type":"text"}"#,
            ),
            (
                r#"{"type":"reasoning","text":"r"}"#,
                r#"{"text":"r","type":"reasoning"}"#,
            ),
            (
                r#"{"type":"tool-call","id":"c","name":"n","arguments":"{}"}"#,
                r#"{"arguments":"{}","name":"n","id":"c","type":"tool-call"}"#,
            ),
        ];
        for (fast, general) in pairs {
            let a: ContentBlock = serde_json::from_str(fast).unwrap();
            let b: ContentBlock = serde_json::from_str(general).unwrap();
            assert_eq!(a, b, "{fast}");
            assert_eq!(serde_json::to_string(&a).unwrap(), fast);
        }
        let other: ContentBlock = serde_json::from_str(r#"{"type":"future","x":[1]}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&other).unwrap(),
            r#"{"type":"future","x":[1]}"#
        );
        for (bad, needle) in [
            (r#"{"type":"text","text":"a","x":1}"#, "unknown field `x`"),
            (r#"{"type":"text"}"#, "missing field `text`"),
            (r#"{"type":"tool-call","id":"c","name":"n"}"#, "arguments"),
            (
                r#"{"type":"text","text":"a","text":"b"}"#,
                "duplicate field `text`",
            ),
            (r#"{"type":"text","text":1}"#, "`text` content block"),
        ] {
            let e = serde_json::from_str::<ContentBlock>(bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn missing_duplicate_and_empty_members_are_refused() {
        let e = decode(r#"{"role":"user","content":[],"source":{"kind":"user"}}"#).unwrap_err();
        assert!(e.to_string().contains("missing field `id`"), "{e}");
        let e =
            decode(r#"{"id":"a","id":"b","role":"user","content":[],"source":{"kind":"user"}}"#)
                .unwrap_err();
        assert!(e.to_string().contains("duplicate field `id`"), "{e}");
        let e =
            decode(r#"{"id":"","role":"user","content":[],"source":{"kind":"user"}}"#).unwrap_err();
        assert!(e.to_string().contains("non-empty"), "{e}");
        let e = decode(r#"{"id":"a","role":"robot","content":[],"source":{"kind":"user"}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("robot"), "{e}");
    }
}
