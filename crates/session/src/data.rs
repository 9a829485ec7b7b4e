//! Typed payloads of the core events (format §7) and [`CoreEvent`], the one enum over them.
//!
//! A committed event keeps its payload twice: the exact JSON bytes (the truth, written back
//! verbatim) and, for a core type, the [`CoreEvent`] decoded once when the event was admitted
//! ([`crate::Event::core`]). Writers build a payload and append it with
//! [`crate::Session::append_core`] / [`crate::NewEvent::core`]; readers match on the variants.
//! A plugin declares its own typed event with [`PluginEvent`].

use std::borrow::Cow;
use std::sync::Arc;

use dsh_llm::{Message, TokenUsage, ToolArguments};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::packed::PackedStream;
use crate::vocab::{self, EventKind};

pub use crate::wire::{AbortCause, InboxOutcome, RequestReason, SourceKind, Target, TurnEndReason};

/// A typed core event payload with its type tag.
pub trait EventData: Serialize + DeserializeOwned + Clone + Into<CoreEvent> {
    /// The event type tag.
    const TYPE: &'static str;
}

/// A plugin's own typed event: its type name and a serde payload. The log carries it verbatim
/// (unknown members included); a type outside the 60 known names is written `ignorable: true`
/// (format §17). Append with [`crate::Session::append_plugin`] / [`crate::NewEvent::plugin`],
/// read with [`crate::Event::plugin`].
pub trait PluginEvent: Serialize + DeserializeOwned {
    /// The event type tag (by convention `dsh/<name>` for dsh-only types).
    const TYPE: &'static str;
}

macro_rules! event_data {
    ($t:ident, $name:expr) => {
        impl EventData for $t {
            const TYPE: &'static str = $name;
        }
        impl From<$t> for CoreEvent {
            fn from(v: $t) -> Self {
                CoreEvent::$t(v)
            }
        }
    };
    (boxed $t:ident, $name:expr) => {
        impl EventData for $t {
            const TYPE: &'static str = $name;
        }
        impl From<$t> for CoreEvent {
            fn from(v: $t) -> Self {
                CoreEvent::$t(Box::new(v))
            }
        }
    };
}

/// Serde for `Arc<Message>` (without serde's `rc` feature).
mod arc_message {
    use std::sync::Arc;

    use dsh_llm::Message;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(m: &Arc<Message>, s: S) -> Result<S::Ok, S::Error> {
        (**m).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<Message>, D::Error> {
        Message::deserialize(d).map(Arc::new)
    }

    pub mod vec {
        use super::*;

        pub fn serialize<S: Serializer>(m: &[Arc<Message>], s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(m.iter().map(|m| &**m))
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Arc<Message>>, D::Error> {
            Ok(Vec::<Message>::deserialize(d)?
                .into_iter()
                .map(Arc::new)
                .collect())
        }
    }
}

/// The packed stream records of one attempt (format §3.4). Read from a log, they are kept as
/// their exact JSON text (a stream is written once, validated once and rarely read, so no JSON
/// tree is kept per event); packed live, they are the typed [`PackedStream`], whose tool-call
/// runs share the message's arguments instead of holding a second copy.
#[derive(Clone)]
pub struct StreamRecords(StreamRepr);

#[derive(Clone)]
enum StreamRepr {
    Raw(Box<RawValue>),
    Packed(Arc<PackedStream>),
}

impl PartialEq for StreamRecords {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl Eq for StreamRecords {}

impl StreamRecords {
    /// No records (`[]`).
    pub fn empty() -> Self {
        StreamRecords::from_records(&[])
    }

    /// Records from JSON values.
    pub fn from_records(records: &[Value]) -> Self {
        // Serialising a slice of `Value`s cannot fail (all map keys are strings).
        let text = serde_json::to_string(records).unwrap_or_else(|_| "[]".to_owned());
        StreamRecords::from_raw(text)
    }

    /// Records a [`crate::stream::StreamPacker`] built.
    pub fn from_packed(packed: PackedStream) -> Self {
        StreamRecords(StreamRepr::Packed(Arc::new(packed)))
    }

    fn from_raw(text: String) -> Self {
        match RawValue::from_string(text) {
            Ok(raw) => StreamRecords(StreamRepr::Raw(raw)),
            Err(_) => StreamRecords(StreamRepr::Raw(Box::default())),
        }
    }

    /// The exact JSON text (an array); serialised on demand for a packed stream.
    pub fn json(&self) -> Cow<'_, str> {
        match &self.0 {
            StreamRepr::Raw(raw) => Cow::Borrowed(raw.get()),
            StreamRepr::Packed(p) => {
                Cow::Owned(serde_json::to_string(&**p).unwrap_or_else(|_| "[]".to_owned()))
            }
        }
    }

    /// The typed records, when packed by this process.
    pub fn packed(&self) -> Option<&PackedStream> {
        match &self.0 {
            StreamRepr::Raw(_) => None,
            StreamRepr::Packed(p) => Some(p),
        }
    }

    /// Decodes the records into JSON values (a copy; the event keeps its form).
    pub fn records(&self) -> Result<Vec<Value>, serde_json::Error> {
        match &self.0 {
            StreamRepr::Raw(raw) => serde_json::from_str(raw.get()),
            StreamRepr::Packed(p) => match serde_json::to_value(&**p)? {
                Value::Array(records) => Ok(records),
                _ => Ok(Vec::new()),
            },
        }
    }

    /// Whether there is no record.
    pub fn is_empty(&self) -> bool {
        match &self.0 {
            StreamRepr::Raw(raw) => raw.get().trim() == "[]",
            StreamRepr::Packed(p) => p.is_empty(),
        }
    }
}

impl Default for StreamRecords {
    fn default() -> Self {
        StreamRecords::empty()
    }
}

impl std::fmt::Debug for StreamRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StreamRecords").field(&self.json()).finish()
    }
}

impl From<Vec<Value>> for StreamRecords {
    fn from(records: Vec<Value>) -> Self {
        StreamRecords::from_records(&records)
    }
}

impl Serialize for StreamRecords {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            StreamRepr::Raw(raw) => raw.serialize(s),
            StreamRepr::Packed(p) => p.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for StreamRecords {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(d).map(|raw| StreamRecords(StreamRepr::Raw(raw)))
    }
}

/// `turn/start {turn}`: 1-based, strictly increasing per session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnStart {
    /// Turn number.
    pub turn: u64,
}
event_data!(TurnStart, vocab::TURN_START);

/// `turn/end {turn, reason}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEnd {
    /// Turn number (matches the open turn).
    pub turn: u64,
    /// Why it ended.
    pub reason: TurnEndReason,
}
event_data!(boxed TurnEnd, vocab::TURN_END);

/// `step/start {turn, step}`: `step` restarts at 1 in every turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepStart {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
}
event_data!(StepStart, vocab::STEP_START);

/// `step/end {turn, step}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepEnd {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
}
event_data!(StepEnd, vocab::STEP_END);

/// `system/message` (surface).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemMessage {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// Role `system`, source `{kind:"system-prompt"}`; empty content = dormant node.
    #[serde(with = "arc_message")]
    pub message: Arc<Message>,
}
event_data!(SystemMessage, vocab::SYSTEM_MESSAGE);

/// `developer/message` (surface, v4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeveloperMessage {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// Role `developer`: tool additions then removals.
    #[serde(with = "arc_message")]
    pub message: Arc<Message>,
    /// The `request/header` binding the additions (present exactly when there are additions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_seq: Option<u64>,
}
event_data!(DeveloperMessage, vocab::DEVELOPER_MESSAGE);

/// `user/message` (surface): the payload **is** the message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserMessage(#[serde(with = "arc_message")] pub Arc<Message>);
event_data!(UserMessage, vocab::USER_MESSAGE);

/// `assistant/message` (surface).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// Role `assistant`, source `{kind:"model", provider, model, replayState?}`.
    #[serde(with = "arc_message")]
    pub message: Arc<Message>,
    /// Usage when the adapter reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// `Some(true)` when cancelled mid-stream (content = the delivered prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    /// The packed stream records of the attempt (see [`crate::stream::StreamPacker`]).
    pub stream: StreamRecords,
}
event_data!(boxed AssistantMessage, vocab::ASSISTANT_MESSAGE);

/// `assistant/attempt`: a settled attempt that committed no surface message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantAttempt {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// The packed stream records.
    pub stream: StreamRecords,
}
event_data!(AssistantAttempt, vocab::ASSISTANT_ATTEMPT);

/// `tool/call`: logged when a call is dispatched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallEvent {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// The provider's call id.
    pub call_id: String,
    /// Tool name (as in the tool-call block).
    pub name: String,
    /// Raw argument string (as in the tool-call block; shared with it, not copied).
    pub arguments: ToolArguments,
}
event_data!(boxed ToolCallEvent, vocab::TOOL_CALL);

/// The `error` member of a failed tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolError {
    /// Error class name (`AbortError`, `ToolNotStartedError`, …).
    pub name: String,
    /// Error code (`ABORTED`, `TOOL_NOT_STARTED`, …; a tool's own or unknown code verbatim).
    pub code: dsh_llm::ToolErrorCode,
    /// Raw user-facing text, kept out of model content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `tool/result` (surface).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// Role `tool`, `toolCallId` = `source.callId`, `isError` always written by dsh.
    #[serde(with = "arc_message")]
    pub message: Arc<Message>,
    /// Only with `message.isError == Some(true)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    /// Tool-private presentation payload, opaque to core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ToolMeta>,
}
event_data!(boxed ToolResult, vocab::TOOL_RESULT);

/// `tool/result.meta`: a tool's private presentation payload (exit code, duration, path and
/// version...), open data the core never interprets. It is kept as its JSON text, not as a
/// tree: a tree of a dozen members costs ~700 bytes per result in a loaded log, and only a
/// front end or the tool that wrote it ever reads it, which [`ToolMeta::parse`] serves.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ToolMeta(Box<RawValue>);

impl ToolMeta {
    /// The payload of a JSON tree.
    pub fn from_value(value: &Value) -> Self {
        // A `Value` always serialises (its map keys are strings).
        Self(serde_json::value::to_raw_value(value).unwrap_or_default())
    }

    /// The payload's JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The payload decoded as `T` (a tool's own meta type, or a few members of it).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }

    /// The payload as a JSON tree.
    pub fn to_value(&self) -> Value {
        self.parse().unwrap_or(Value::Null)
    }
}

impl PartialEq for ToolMeta {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

/// `request/header {header, reason, startsSeries?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestHeader {
    /// The canonical non-history request envelope.
    pub header: EpochHeader,
    /// Why the header was logged.
    pub reason: RequestReason,
    /// `Some(true)` only on `initial`/`resume`/`change`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_series: Option<bool>,
}
event_data!(boxed RequestHeader, vocab::REQUEST_HEADER);

/// The request envelope snapshot of a `request/header`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochHeader {
    /// Route configuration.
    pub config: RequestConfig,
    /// Config fields filled by the adapter (each `true`); omitted when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_defaults: Option<Value>,
    /// Tool schemas in canonical order; omitted when empty.
    ///
    /// Shared: the headers of one session mostly repeat the same tools, and a loaded log keeps
    /// one copy of each distinct list (see [`EpochHeader::share_tools`]).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "arc_tools")]
    pub tools: Option<Arc<[ToolSchema]>>,
}

/// Serde for `Option<Arc<[ToolSchema]>>` (without serde's `rc` feature).
mod arc_tools {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::ToolSchema;

    pub fn serialize<S: Serializer>(
        t: &Option<Arc<[ToolSchema]>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        t.as_deref().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Arc<[ToolSchema]>>, D::Error> {
        let Some(raw) = Option::<Box<serde_json::value::RawValue>>::deserialize(d)? else {
            return Ok(None);
        };
        super::tools_cache::parse(raw.get())
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

/// The tool lists parsed last, by their exact JSON text: the `request/header` rows of a log
/// mostly repeat one list of ~10 KB of schemas, and parsing each copy into JSON trees was
/// the largest single cost of loading a long log. A repeated text is shared (`Arc`) instead of
/// parsed again, which also keeps one copy per distinct list in memory.
mod tools_cache {
    use std::sync::{Arc, Mutex};

    use super::ToolSchema;

    /// Distinct lists remembered (a session switches between few tool sets).
    const KEEP: usize = 4;

    type Entry = (Box<str>, Arc<[ToolSchema]>);

    static RECENT: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

    /// The tool list of `text` (a JSON array of tool schemas).
    pub(super) fn parse(text: &str) -> Result<Arc<[ToolSchema]>, serde_json::Error> {
        if let Ok(recent) = RECENT.lock()
            && let Some((_, tools)) = recent.iter().find(|(t, _)| **t == *text)
        {
            return Ok(tools.clone());
        }
        let tools: Arc<[ToolSchema]> = serde_json::from_str::<Vec<ToolSchema>>(text)?.into();
        if let Ok(mut recent) = RECENT.lock() {
            if recent.len() == KEEP {
                recent.remove(0);
            }
            recent.push((text.into(), tools.clone()));
        }
        Ok(tools)
    }
}

impl EpochHeader {
    /// Makes this header share `previous`'s tool list when the two are equal (one copy per
    /// distinct list in a loaded log).
    pub fn share_tools(&mut self, previous: &Option<Arc<[ToolSchema]>>) {
        if let (Some(mine), Some(prev)) = (&self.tools, previous)
            && !Arc::ptr_eq(mine, prev)
            && mine == prev
        {
            self.tools = Some(prev.clone());
        }
    }

    /// Whether two headers are equal, their tool lists compared by pointer first (a loop offers
    /// the same shared list step after step: no deep comparison of every schema).
    pub fn same_as(&self, other: &EpochHeader) -> bool {
        // Every member named: a new one must be compared here too.
        let EpochHeader {
            config,
            adapter_defaults,
            tools,
        } = self;
        let same_tools = match (tools, &other.tools) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
            (a, b) => a.is_none() && b.is_none(),
        };
        same_tools && *config == other.config && *adapter_defaults == other.adapter_defaults
    }

    /// [`EpochHeader::of`] with the tools already shared (`None`: no tools).
    pub fn of_shared(
        prepared: &dsh_llm::service::PreparedCall,
        tools: Option<Arc<[ToolSchema]>>,
    ) -> Self {
        let mut header = Self::of(prepared, &[]);
        header.tools = tools.filter(|t| !t.is_empty());
        header
    }

    /// The header of a prepared call and the tools it offers: the one mapping from the call
    /// settings to the log (`adapterDefaults` marks what `prepare_call` defaulted).
    pub fn of(prepared: &dsh_llm::service::PreparedCall, tools: &[ToolSchema]) -> Self {
        let mut defaults = serde_json::Map::new();
        if prepared.defaulted.effort && prepared.effort.is_some() {
            defaults.insert("reasoningEffort".into(), Value::Bool(true));
        }
        if prepared.defaulted.max_tokens {
            defaults.insert("maxTokens".into(), Value::Bool(true));
        }
        EpochHeader {
            config: RequestConfig {
                provider: prepared.provider.clone(),
                model: prepared.model.id.clone(),
                reasoning_effort: prepared.effort.clone(),
                temperature: prepared.temperature,
                max_tokens: Some(prepared.max_tokens),
                stop: (!prepared.stop.is_empty()).then(|| prepared.stop.clone()),
            },
            adapter_defaults: (!defaults.is_empty()).then_some(Value::Object(defaults)),
            tools: (!tools.is_empty()).then(|| Arc::from(tools)),
        }
    }
}

/// `request/header.header.config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestConfig {
    /// Provider id.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// Reasoning effort (an id this build does not know is kept verbatim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<dsh_llm::ReasoningEffort>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
}

/// One tool declaration in a request header: the tool spec the request carries (one shape for
/// tools, requests and the log).
pub type ToolSchema = dsh_llm::ToolSpec;

/// `request/context`: route metadata of the prepared call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestContext {
    /// Provider id.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// Context window, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// `"in-history"` when the route accepts appended system prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt_update: Option<String>,
}
event_data!(boxed RequestContext, vocab::REQUEST_CONTEXT);

/// `agent/inbox/spliced` (format §11).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxSpliced {
    /// The list the splice edits.
    pub target: Target,
    /// Splice index in that list.
    pub start: u64,
    /// Removed count (omitted when 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed_count: Option<u64>,
    /// Inserted user messages.
    #[serde(with = "arc_message::vec")]
    pub inserted: Vec<Arc<Message>>,
    /// `Some(Canceled)` on removals discarded by cancellation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<InboxOutcome>,
}
event_data!(boxed InboxSpliced, vocab::INBOX_SPLICED);

/// `session/end-seed`: `{}` (restored/live boundary) or `{"inherited":true}` (fork cut).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EndSeed {
    /// `Some(true)` for the fork cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherited: Option<bool>,
}
event_data!(EndSeed, vocab::END_SEED);

/// `image/offload {targets}` (format §8.6): the one projection type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageOffload {
    /// The projected nodes (non-empty, distinct).
    pub targets: Vec<OffloadTarget>,
}
event_data!(ImageOffload, vocab::IMAGE_OFFLOAD);

/// One target of an `image/offload`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OffloadTarget {
    /// A current `user/message` or `tool/result` node.
    pub seq: u64,
    /// Strictly increasing indexes among the node's image blocks.
    pub image_indexes: Vec<u64>,
}

/// The typed payload of a core event (format §5, duty *core* and *projection*): decoded once when
/// the event is admitted and kept beside its exact JSON. Large payloads are boxed (the enum
/// stays small); build variants with `.into()` from the payload structs.
#[derive(Debug, Clone, PartialEq)]
pub enum CoreEvent {
    /// `turn/start`
    TurnStart(TurnStart),
    /// `turn/end`
    TurnEnd(Box<TurnEnd>),
    /// `step/start`
    StepStart(StepStart),
    /// `step/end`
    StepEnd(StepEnd),
    /// `system/message`
    SystemMessage(SystemMessage),
    /// `developer/message`
    DeveloperMessage(DeveloperMessage),
    /// `user/message`
    UserMessage(UserMessage),
    /// `assistant/message`
    AssistantMessage(Box<AssistantMessage>),
    /// `assistant/attempt`
    AssistantAttempt(AssistantAttempt),
    /// `tool/call`
    ToolCallEvent(Box<ToolCallEvent>),
    /// `tool/result`
    ToolResult(Box<ToolResult>),
    /// `request/header`
    RequestHeader(Box<RequestHeader>),
    /// `request/context`
    RequestContext(Box<RequestContext>),
    /// `agent/inbox/spliced`
    InboxSpliced(Box<InboxSpliced>),
    /// `session/end-seed`
    EndSeed(EndSeed),
    /// `image/offload`
    ImageOffload(ImageOffload),
}

macro_rules! each_core {
    ($self:expr, $v:ident => $e:expr) => {
        match $self {
            CoreEvent::TurnStart($v) => $e,
            CoreEvent::TurnEnd($v) => $e,
            CoreEvent::StepStart($v) => $e,
            CoreEvent::StepEnd($v) => $e,
            CoreEvent::SystemMessage($v) => $e,
            CoreEvent::DeveloperMessage($v) => $e,
            CoreEvent::UserMessage($v) => $e,
            CoreEvent::AssistantMessage($v) => $e,
            CoreEvent::AssistantAttempt($v) => $e,
            CoreEvent::ToolCallEvent($v) => $e,
            CoreEvent::ToolResult($v) => $e,
            CoreEvent::RequestHeader($v) => $e,
            CoreEvent::RequestContext($v) => $e,
            CoreEvent::InboxSpliced($v) => $e,
            CoreEvent::EndSeed($v) => $e,
            CoreEvent::ImageOffload($v) => $e,
        }
    };
}

/// An `io::Write` that compares what is written with an expected text and fails at the first
/// difference.
struct CompareWriter<'a> {
    expected: &'a [u8],
    pos: usize,
}

impl std::io::Write for CompareWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let end = self.pos + buf.len();
        if self.expected.get(self.pos..end) != Some(buf) {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
        self.pos = end;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn decode_prefix_as<T: DeserializeOwned + Into<CoreEvent>>(
    json: &str,
) -> Result<(CoreEvent, usize), serde_json::Error> {
    let mut values = serde_json::Deserializer::from_str(json).into_iter::<T>();
    match values.next() {
        Some(Ok(v)) => Ok((v.into(), values.byte_offset())),
        Some(Err(e)) => Err(e),
        None => Err(serde::de::Error::custom("no payload")),
    }
}

fn decode<T: DeserializeOwned + Into<CoreEvent>>(
    json: &str,
) -> Result<CoreEvent, serde_json::Error> {
    serde_json::from_str::<T>(json).map(Into::into)
}

impl CoreEvent {
    /// Whether events of `kind` carry a core payload.
    pub fn is_core(kind: &EventKind) -> bool {
        matches!(
            kind,
            EventKind::TurnStart
                | EventKind::TurnEnd
                | EventKind::StepStart
                | EventKind::StepEnd
                | EventKind::SystemMessage
                | EventKind::DeveloperMessage
                | EventKind::UserMessage
                | EventKind::AssistantMessage
                | EventKind::AssistantAttempt
                | EventKind::ToolCall
                | EventKind::ToolResult
                | EventKind::RequestHeader
                | EventKind::RequestContext
                | EventKind::InboxSpliced
                | EventKind::EndSeed
                | EventKind::ImageOffload
        )
    }

    /// Decodes the JSON payload of a core event (`None` when `kind` is not a core type).
    pub fn decode(kind: &EventKind, json: &str) -> Option<Result<CoreEvent, serde_json::Error>> {
        Some(match kind {
            EventKind::TurnStart => decode::<TurnStart>(json),
            EventKind::TurnEnd => decode::<TurnEnd>(json),
            EventKind::StepStart => decode::<StepStart>(json),
            EventKind::StepEnd => decode::<StepEnd>(json),
            EventKind::SystemMessage => decode::<SystemMessage>(json),
            EventKind::DeveloperMessage => decode::<DeveloperMessage>(json),
            EventKind::UserMessage => decode::<UserMessage>(json),
            EventKind::AssistantMessage => decode::<AssistantMessage>(json),
            EventKind::AssistantAttempt => decode::<AssistantAttempt>(json),
            EventKind::ToolCall => decode::<ToolCallEvent>(json),
            EventKind::ToolResult => decode::<ToolResult>(json),
            EventKind::RequestHeader => decode::<RequestHeader>(json),
            EventKind::RequestContext => decode::<RequestContext>(json),
            EventKind::InboxSpliced => decode::<InboxSpliced>(json),
            EventKind::EndSeed => decode::<EndSeed>(json),
            EventKind::ImageOffload => decode::<ImageOffload>(json),
            _ => return None,
        })
    }

    /// Decodes the payload of a core event at the start of `json` (followed by anything) and
    /// returns it with the length of its text (`None` when `kind` is not a core type).
    pub fn decode_prefix(
        kind: &EventKind,
        json: &str,
    ) -> Option<Result<(CoreEvent, usize), serde_json::Error>> {
        Some(match kind {
            EventKind::TurnStart => decode_prefix_as::<TurnStart>(json),
            EventKind::TurnEnd => decode_prefix_as::<TurnEnd>(json),
            EventKind::StepStart => decode_prefix_as::<StepStart>(json),
            EventKind::StepEnd => decode_prefix_as::<StepEnd>(json),
            EventKind::SystemMessage => decode_prefix_as::<SystemMessage>(json),
            EventKind::DeveloperMessage => decode_prefix_as::<DeveloperMessage>(json),
            EventKind::UserMessage => decode_prefix_as::<UserMessage>(json),
            EventKind::AssistantMessage => decode_prefix_as::<AssistantMessage>(json),
            EventKind::AssistantAttempt => decode_prefix_as::<AssistantAttempt>(json),
            EventKind::ToolCall => decode_prefix_as::<ToolCallEvent>(json),
            EventKind::ToolResult => decode_prefix_as::<ToolResult>(json),
            EventKind::RequestHeader => decode_prefix_as::<RequestHeader>(json),
            EventKind::RequestContext => decode_prefix_as::<RequestContext>(json),
            EventKind::InboxSpliced => decode_prefix_as::<InboxSpliced>(json),
            EventKind::EndSeed => decode_prefix_as::<EndSeed>(json),
            EventKind::ImageOffload => decode_prefix_as::<ImageOffload>(json),
            _ => return None,
        })
    }

    /// The event type.
    pub fn kind(&self) -> EventKind {
        match self {
            CoreEvent::TurnStart(_) => EventKind::TurnStart,
            CoreEvent::TurnEnd(_) => EventKind::TurnEnd,
            CoreEvent::StepStart(_) => EventKind::StepStart,
            CoreEvent::StepEnd(_) => EventKind::StepEnd,
            CoreEvent::SystemMessage(_) => EventKind::SystemMessage,
            CoreEvent::DeveloperMessage(_) => EventKind::DeveloperMessage,
            CoreEvent::UserMessage(_) => EventKind::UserMessage,
            CoreEvent::AssistantMessage(_) => EventKind::AssistantMessage,
            CoreEvent::AssistantAttempt(_) => EventKind::AssistantAttempt,
            CoreEvent::ToolCallEvent(_) => EventKind::ToolCall,
            CoreEvent::ToolResult(_) => EventKind::ToolResult,
            CoreEvent::RequestHeader(_) => EventKind::RequestHeader,
            CoreEvent::RequestContext(_) => EventKind::RequestContext,
            CoreEvent::InboxSpliced(_) => EventKind::InboxSpliced,
            CoreEvent::EndSeed(_) => EventKind::EndSeed,
            CoreEvent::ImageOffload(_) => EventKind::ImageOffload,
        }
    }

    /// The payload as compact JSON text.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        each_core!(self, v => serde_json::to_string(v))
    }

    /// Writes the payload's JSON text to `w` (no intermediate string).
    pub fn write_json<W: std::io::Write>(&self, w: W) -> Result<(), serde_json::Error> {
        each_core!(self, v => serde_json::to_writer(w, v))
    }

    /// Whether the payload serialises to exactly `json` (compared while writing, no copy).
    pub fn serialises_to(&self, json: &str) -> bool {
        let mut w = CompareWriter {
            expected: json.as_bytes(),
            pos: 0,
        };
        let written = each_core!(self, v => serde_json::to_writer(&mut w, v));
        written.is_ok() && w.pos == json.len()
    }

    /// The interpreted message of a surface event (`user/message`'s payload, else
    /// `data.message`).
    pub fn message(&self) -> Option<&Arc<Message>> {
        match self {
            CoreEvent::SystemMessage(e) => Some(&e.message),
            CoreEvent::DeveloperMessage(e) => Some(&e.message),
            CoreEvent::UserMessage(e) => Some(&e.0),
            CoreEvent::AssistantMessage(e) => Some(&e.message),
            CoreEvent::ToolResult(e) => Some(&e.message),
            _ => None,
        }
    }

    /// `(turn, step)` of the payload, where it has them.
    pub fn turn_step(&self) -> (Option<u64>, Option<u64>) {
        match self {
            CoreEvent::TurnStart(e) => (Some(e.turn), None),
            CoreEvent::TurnEnd(e) => (Some(e.turn), None),
            CoreEvent::StepStart(e) => (Some(e.turn), Some(e.step)),
            CoreEvent::StepEnd(e) => (Some(e.turn), Some(e.step)),
            CoreEvent::SystemMessage(e) => (Some(e.turn), Some(e.step)),
            CoreEvent::DeveloperMessage(e) => (Some(e.turn), Some(e.step)),
            CoreEvent::AssistantMessage(e) => (Some(e.turn), Some(e.step)),
            CoreEvent::AssistantAttempt(e) => (Some(e.turn), Some(e.step)),
            CoreEvent::ToolCallEvent(e) => (Some(e.turn), Some(e.step)),
            CoreEvent::ToolResult(e) => (Some(e.turn), Some(e.step)),
            _ => (None, None),
        }
    }
}
