//! The event envelope (format §3.1, §4.2): one immutable, shared log row.
//!
//! An [`Event`] keeps its `data` as the exact JSON text it was written or read with (so rows
//! round-trip byte for byte) and, for a core type, the typed [`CoreEvent`] decoded once when the
//! row was built ([`Event::from_line`] or an append). No JSON tree is kept per event.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use dsh_llm::Message;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

use crate::data::{CoreEvent, PluginEvent};
use crate::error::{EventError, Rejection, SurfaceOpError};
use crate::json::{MAX_SAFE_INTEGER, as_safe_u64, number_as_safe_i64, number_as_safe_u64};
use crate::seqs::{decode_runs, encode_runs};
use crate::vocab::EventKind;

/// A surface operation (format §8): append a node, or replace a span of current nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SurfaceOp {
    /// `"append"`: the event becomes the last surface node.
    Append,
    /// `{"op":"replace","startSeq":s,"endSeq":e}`: the event takes the place of the inclusive
    /// span `s..=e` of current nodes (in surface order).
    Replace {
        /// First shadowed node.
        start_seq: u64,
        /// Last shadowed node.
        end_seq: u64,
    },
}

impl SurfaceOp {
    /// The physical JSON form.
    pub fn to_json(&self) -> Value {
        match self {
            SurfaceOp::Append => Value::String("append".into()),
            SurfaceOp::Replace { start_seq, end_seq } => {
                let mut m = Map::new();
                m.insert("op".into(), "replace".into());
                m.insert("startSeq".into(), (*start_seq).into());
                m.insert("endSeq".into(), (*end_seq).into());
                Value::Object(m)
            }
        }
    }

    fn write_json<W: std::io::Write + ?Sized>(&self, w: &mut W) -> std::io::Result<()> {
        match self {
            SurfaceOp::Append => w.write_all(b"\"append\""),
            SurfaceOp::Replace { start_seq, end_seq } => write!(
                w,
                "{{\"op\":\"replace\",\"startSeq\":{start_seq},\"endSeq\":{end_seq}}}"
            ),
        }
    }

    /// Parses the physical form; both bounds must be earlier than `own_seq`.
    pub fn from_json(value: &Value, own_seq: u64) -> Result<Self, SurfaceOpError> {
        match value {
            Value::String(s) if s == "append" => Ok(SurfaceOp::Append),
            Value::Object(m) => {
                if m.len() != 3 || m.get("op").and_then(Value::as_str) != Some("replace") {
                    return Err(SurfaceOpError::Shape);
                }
                let start = m.get("startSeq").and_then(as_safe_u64);
                let end = m.get("endSeq").and_then(as_safe_u64);
                let (Some(start_seq), Some(end_seq)) = (start, end) else {
                    return Err(SurfaceOpError::Bounds);
                };
                if start_seq >= own_seq || end_seq >= own_seq {
                    return Err(SurfaceOpError::NotEarlier {
                        start: start_seq,
                        end: end_seq,
                        seq: own_seq,
                    });
                }
                Ok(SurfaceOp::Replace { start_seq, end_seq })
            }
            _ => Err(SurfaceOpError::Shape),
        }
    }
}

/// What the payload of an event is, decided once when the event is built.
#[derive(Debug, Clone)]
pub(crate) enum Payload {
    /// A feature, opaque or unknown type: the JSON is the whole payload.
    Opaque,
    /// A core type, decoded and checked (format §4.5, §4.6).
    Core(CoreEvent),
    /// The payload breaks a stateless rule; admission refuses the event with this.
    Invalid(Box<Rejection>),
}

impl Payload {
    /// Decodes and checks the payload of a `kind` event (`given`: the typed payload the JSON was
    /// serialised from).
    ///
    /// `canonical` is whether `json` is the typed payload's serialisation, when known; it is
    /// filled in when a check had to find out.
    fn check(
        kind: &EventKind,
        json: Option<&str>,
        given: Option<CoreEvent>,
        canonical: &mut Option<bool>,
    ) -> Payload {
        // `given`: the typed payload already decoded from (or serialised to) `json`.
        let Some(json) = json else {
            // A typed append whose serialisation was scanned as it was written (no text).
            return match given {
                Some(core) => match crate::validate::check_core(&core, "", canonical) {
                    Ok(()) => Payload::Core(core),
                    Err(e) => Payload::Invalid(Box::new(e)),
                },
                None => Payload::Invalid(Box::new(Rejection::Metadata(
                    "an event without payload text must be typed".into(),
                ))),
            };
        };
        if let Err(e) = crate::json::validate_lossless_str(json, "data") {
            return Payload::Invalid(Box::new(Rejection::NotLossless(e)));
        }
        if !kind.is_known() {
            return Payload::Opaque;
        }
        let core = match given {
            Some(core) => Some(Ok(core)),
            None => CoreEvent::decode(kind, json),
        };
        match core {
            Some(Ok(core)) => match crate::validate::check_core(&core, json, canonical) {
                Ok(()) => Payload::Core(core),
                Err(e) => Payload::Invalid(Box::new(e)),
            },
            Some(Err(e)) => Payload::Invalid(Box::new(Rejection::Decode(Arc::new(e)))),
            None => match crate::validate::check_feature(kind, json) {
                Ok(()) => Payload::Opaque,
                Err(e) => Payload::Invalid(Box::new(e)),
            },
        }
    }
}

/// The typed payload an event is built with, if any.
pub(crate) enum Typed {
    /// Decode it from the text.
    No,
    /// The text is this payload's serialisation (a typed append).
    Canonical(CoreEvent),
    /// Decoded from the text already; the text may be spelled otherwise.
    Decoded(CoreEvent),
    /// Decode it from the text, and keep the text without comparing (an untyped append: the
    /// comparison would cost a second serialisation on the live path).
    KeepText,
}

/// One committed log row. Immutable once appended; readers share it as `Arc<Event>`.
#[derive(Debug, Clone)]
pub struct Event {
    kind: EventKind,
    seq: u64,
    time: i64,
    payload: Payload,
    /// [`IGNORABLE`], [`APPEND`].
    flags: u8,
    /// What few events carry (kept out of line so an event stays small).
    extra: Option<Box<Extra>>,
    /// The transition accessor [`Event::data`]: parsed on first use only.
    value: OnceLock<Box<Value>>,
}

const IGNORABLE: u8 = 1;
const APPEND: u8 = 2;
/// [`Event::is_large`].
const LARGE: u8 = 4;

/// Payload text length from which an event counts as large ([`Event::is_large`]).
pub const LARGE_PAYLOAD: usize = 1 << 20;

/// The rarer parts of an event.
#[derive(Debug, Clone, Default)]
struct Extra {
    /// `surfaceOp: {op:"replace", startSeq, endSeq}`.
    replace: Option<(u64, u64)>,
    /// `sourceEventSeqs`, logical.
    sources: Option<Box<[u64]>>,
    /// The exact JSON text, kept only when it is not what the typed payload serialises to
    /// (opaque types, other writers' spellings); `None`: the text is the typed serialisation.
    data: Option<Box<RawValue>>,
}

fn pack(
    surface_op: Option<SurfaceOp>,
    sources: Option<Vec<u64>>,
    ignorable: bool,
    data: Option<Box<RawValue>>,
) -> (u8, Option<Box<Extra>>) {
    let mut flags = if ignorable { IGNORABLE } else { 0 };
    let replace = match surface_op {
        Some(SurfaceOp::Append) => {
            flags |= APPEND;
            None
        }
        Some(SurfaceOp::Replace { start_seq, end_seq }) => Some((start_seq, end_seq)),
        None => None,
    };
    let extra = Extra {
        replace,
        sources: sources.map(Vec::into_boxed_slice),
        data,
    };
    let empty = extra.replace.is_none() && extra.sources.is_none() && extra.data.is_none();
    (flags, (!empty).then(|| Box::new(extra)))
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.seq == other.seq
            && self.time == other.time
            && self.data_json() == other.data_json()
            && self.surface_op() == other.surface_op()
            && self.source_event_seqs() == other.source_event_seqs()
            && self.ignorable() == other.ignorable()
    }
}

/// The envelope of a stored row, borrowed from the line (format §3.1).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Row<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    seq: Option<Number>,
    #[serde(default)]
    time: Option<Number>,
    #[serde(borrow, default, deserialize_with = "some_raw")]
    data: Option<&'a RawValue>,
    #[serde(rename = "surfaceOp", borrow, default, deserialize_with = "some_raw")]
    surface_op: Option<&'a RawValue>,
    #[serde(
        rename = "sourceEventSeqs",
        borrow,
        default,
        deserialize_with = "some_raw"
    )]
    sources: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "some_raw")]
    ignorable: Option<&'a RawValue>,
}

/// The members after `data` of a row in the writer's order (the fast path of
/// [`Event::from_line`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tail<'a> {
    #[serde(
        rename = "sourceEventSeqs",
        borrow,
        default,
        deserialize_with = "some_raw"
    )]
    sources: Option<&'a RawValue>,
    #[serde(rename = "surfaceOp", borrow, default, deserialize_with = "some_raw")]
    surface_op: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "some_raw")]
    ignorable: Option<&'a RawValue>,
    seq: Number,
    time: Number,
}

/// A present member, `null` included (`Option`'s own handling would read `null` as absent).
fn some_raw<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

fn envelope_error(e: serde_json::Error) -> EventError {
    let text = e.to_string();
    if let Some(rest) = text.strip_prefix("unknown field `")
        && let Some(name) = rest.split('`').next()
    {
        return EventError::UnknownMember(name.to_owned());
    }
    EventError::Malformed(Arc::new(e))
}

impl Event {
    /// The event type tag (`turn/start`, `user/message`, …): the wire name.
    pub fn kind(&self) -> &str {
        self.kind.as_str()
    }
    /// The event type.
    pub fn event_kind(&self) -> &EventKind {
        &self.kind
    }
    /// 0-based dense position in the log.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// Epoch milliseconds (not necessarily monotonic).
    pub fn time(&self) -> i64 {
        self.time
    }
    /// The typed payload of a core event (decoded once, when the event was built).
    pub fn core(&self) -> Option<&CoreEvent> {
        match &self.payload {
            Payload::Core(c) => Some(c),
            _ => None,
        }
    }

    /// Makes a `request/header`'s tool list share `last` (the previous header's list) when
    /// they are equal, then remembers this header's list: one copy per distinct list.
    pub(crate) fn share_header_tools(&mut self, last: &mut Option<Arc<[crate::data::ToolSchema]>>) {
        if let Payload::Core(CoreEvent::RequestHeader(h)) = &mut self.payload {
            h.header.share_tools(last);
            last.clone_from(&h.header.tools);
        }
    }
    /// The interpreted message of a surface event.
    pub fn message(&self) -> Option<&Arc<Message>> {
        self.core().and_then(CoreEvent::message)
    }
    /// The payload's exact JSON text, as committed (unknown members included). Borrowed when
    /// the event keeps the text; serialised from the typed payload when that gives the same
    /// bytes (which is why the event did not keep them).
    pub fn data_json(&self) -> Cow<'_, str> {
        match (
            self.extra.as_ref().and_then(|x| x.data.as_ref()),
            &self.payload,
        ) {
            (Some(raw), _) => Cow::Borrowed(raw.get()),
            (None, Payload::Core(core)) => {
                Cow::Owned(core.to_json().unwrap_or_else(|_| "null".to_owned()))
            }
            (None, _) => Cow::Borrowed("null"),
        }
    }
    /// Whether the event keeps its payload text (see [`Event::data_json`]).
    pub fn keeps_raw_data(&self) -> bool {
        self.extra.as_ref().is_some_and(|x| x.data.is_some())
    }
    /// The payload as a JSON tree. **Transition accessor**: parsed on first use and kept;
    /// prefer [`Event::core`], [`Event::plugin`] or [`Event::data_as`].
    pub fn data(&self) -> &Value {
        self.value.get_or_init(|| {
            Box::new(serde_json::from_str(&self.data_json()).unwrap_or(Value::Null))
        })
    }
    /// The surface operation of a surface event.
    pub fn surface_op(&self) -> Option<SurfaceOp> {
        if self.flags & APPEND != 0 {
            return Some(SurfaceOp::Append);
        }
        self.extra
            .as_ref()
            .and_then(|x| x.replace)
            .map(|(start_seq, end_seq)| SurfaceOp::Replace { start_seq, end_seq })
    }
    /// Logical provenance list (runs expanded).
    pub fn source_event_seqs(&self) -> Option<&[u64]> {
        self.extra.as_ref().and_then(|x| x.sources.as_deref())
    }
    /// Whether the row is marked `ignorable: true`.
    pub fn ignorable(&self) -> bool {
        self.flags & IGNORABLE != 0
    }
    /// Whether the payload's JSON text is at least [`LARGE_PAYLOAD`] bytes (known for appended
    /// events): writers stream such a line instead of buffering a copy of it.
    pub fn is_large(&self) -> bool {
        self.flags & LARGE != 0
    }

    /// Deserializes `data` into a typed view (from the committed JSON text).
    pub fn data_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.data_json())
    }

    /// The payload of a plugin's typed event: `None` when the event is of another type.
    pub fn plugin<T: PluginEvent>(&self) -> Option<Result<T, serde_json::Error>> {
        (self.kind == *T::TYPE).then(|| self.data_as())
    }

    /// The stateless rule this event's payload breaks, if any.
    pub(crate) fn payload_rejection(&self) -> Option<&Rejection> {
        match &self.payload {
            Payload::Invalid(r) => Some(&**r),
            _ => None,
        }
    }

    /// Builds an event from its parts, decoding and checking the payload.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build(
        kind: EventKind,
        seq: u64,
        time: i64,
        data: Box<RawValue>,
        typed: Typed,
        surface_op: Option<SurfaceOp>,
        source_event_seqs: Option<Vec<u64>>,
        ignorable: bool,
    ) -> Self {
        Event::build_from(
            kind,
            seq,
            time,
            DataText::Owned(data),
            typed,
            surface_op,
            source_event_seqs,
            ignorable,
        )
    }

    /// [`Event::build`] for an append: without text, the typed payload is the text.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build_appended(
        kind: EventKind,
        seq: u64,
        time: i64,
        (data, len): (Option<Box<RawValue>>, usize),
        typed: Typed,
        surface_op: Option<SurfaceOp>,
        source_event_seqs: Option<Vec<u64>>,
        ignorable: bool,
    ) -> Self {
        let mut ev = Event::build_from(
            kind,
            seq,
            time,
            data.map_or(DataText::Typed, DataText::Owned),
            typed,
            surface_op,
            source_event_seqs,
            ignorable,
        );
        if len >= LARGE_PAYLOAD {
            ev.flags |= LARGE;
        }
        ev
    }

    /// [`Event::build`] from the payload text in either form: a borrowed text (valid JSON,
    /// already parsed by the caller) is copied into a `RawValue` only when the event keeps it.
    #[allow(clippy::too_many_arguments)]
    fn build_from(
        kind: EventKind,
        seq: u64,
        time: i64,
        data: DataText<'_>,
        typed: Typed,
        surface_op: Option<SurfaceOp>,
        source_event_seqs: Option<Vec<u64>>,
        ignorable: bool,
    ) -> Self {
        let keep = matches!(typed, Typed::KeepText);
        let (mut canonical, given) = match typed {
            Typed::No | Typed::KeepText => (None, None),
            // Appended from a typed payload: the text is its serialisation by construction.
            Typed::Canonical(c) => (Some(true), Some(c)),
            Typed::Decoded(c) => (None, Some(c)),
        };
        let payload = Payload::check(&kind, data.text(), given, &mut canonical);
        let data = match &payload {
            _ if keep => data.into_raw(),
            // Read: keep the text only if the typed payload does not give the same bytes.
            Payload::Core(core)
                if canonical.unwrap_or_else(|| core.serialises_to(data.text().unwrap_or(""))) =>
            {
                None
            }
            _ => data.into_raw(),
        };
        let (flags, extra) = pack(surface_op, source_event_seqs, ignorable, data);
        Event {
            kind,
            seq,
            time,
            payload,
            flags,
            extra,
            value: OnceLock::new(),
        }
    }

    /// Builds an event from a JSON tree payload (tests, v3 conversion, closers).
    pub(crate) fn from_parts(
        kind: impl Into<EventKind>,
        seq: u64,
        time: i64,
        data: Value,
        surface_op: Option<SurfaceOp>,
        source_event_seqs: Option<Vec<u64>>,
        ignorable: bool,
    ) -> Self {
        Event::build(
            kind.into(),
            seq,
            time,
            raw_of(&data),
            Typed::No,
            surface_op,
            source_event_seqs,
            ignorable,
        )
    }

    /// Renumbers the event (v3 conversion rule 7).
    pub(crate) fn set_seq(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// Replaces payload and metadata (used by the v3 conversion); the payload is decoded and
    /// checked again.
    pub(crate) fn set_parts(
        &mut self,
        kind: Option<String>,
        data: Option<Value>,
        surface_op: Option<Option<SurfaceOp>>,
        source_event_seqs: Option<Option<Vec<u64>>>,
    ) {
        let changed = kind.is_some() || data.is_some();
        let text = data.as_ref().map(raw_of);
        if let Some(k) = kind {
            self.kind = EventKind::parse(&k);
        }
        if data.is_some() {
            self.value = OnceLock::new();
        }
        let surface_op = surface_op.unwrap_or_else(|| self.surface_op());
        let sources =
            source_event_seqs.unwrap_or_else(|| self.source_event_seqs().map(<[u64]>::to_vec));
        let kept = self.keeps_raw_data();
        let text = match text {
            Some(t) => t,
            None => match self.extra.as_mut().and_then(|x| x.data.take()) {
                Some(t) => t,
                None => RawValue::from_string(self.data_json().into_owned()).unwrap_or_default(),
            },
        };
        let given = match &self.payload {
            Payload::Core(c) if !changed && kept => Typed::Decoded(c.clone()),
            Payload::Core(c) if !changed => Typed::Canonical(c.clone()),
            _ => Typed::No,
        };
        let rebuilt = Event::build(
            self.kind.clone(),
            self.seq,
            self.time,
            text,
            given,
            surface_op,
            sources,
            self.ignorable(),
        );
        self.payload = rebuilt.payload;
        self.flags = rebuilt.flags;
        self.extra = rebuilt.extra;
    }

    /// Serializes the row as one JSON line (without the trailing `\n`), in the writer key order
    /// `type, data, sourceEventSeqs?, surfaceOp?, ignorable?, seq, time`.
    pub fn to_json_line(&self) -> String {
        let mut out = Vec::new();
        // Writing to a `Vec` cannot fail, and the serialiser writes UTF-8 only.
        let _ = self.write_json_line(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// Writes [`Event::to_json_line`]'s text to `w`, serialising a typed payload straight into
    /// it (a megabyte payload is never held as a second string).
    pub fn write_json_line<W: std::io::Write + ?Sized>(&self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b"{\"type\":")?;
        serde_json::to_writer(&mut *w, self.kind.as_str())?;
        w.write_all(b",\"data\":")?;
        match (
            self.extra.as_ref().and_then(|x| x.data.as_ref()),
            &self.payload,
        ) {
            (Some(raw), _) => w.write_all(raw.get().as_bytes())?,
            (None, Payload::Core(core)) => core.write_json(&mut *w)?,
            (None, _) => w.write_all(b"null")?,
        }
        if let Some(seqs) = self.source_event_seqs() {
            w.write_all(b",\"sourceEventSeqs\":")?;
            serde_json::to_writer(&mut *w, &encode_runs(seqs))?;
        }
        if let Some(op) = self.surface_op() {
            w.write_all(b",\"surfaceOp\":")?;
            op.write_json(&mut *w)?;
        }
        if self.ignorable() {
            w.write_all(b",\"ignorable\":true")?;
        }
        write!(w, ",\"seq\":{},\"time\":{}}}", self.seq, self.time)
    }

    /// The physical row as a JSON value (same content as [`Event::to_json_line`]).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), Value::String(self.kind.to_string()));
        m.insert(
            "data".into(),
            serde_json::from_str(&self.data_json()).unwrap_or(Value::Null),
        );
        if let Some(seqs) = self.source_event_seqs() {
            m.insert("sourceEventSeqs".into(), encode_runs(seqs));
        }
        if let Some(op) = self.surface_op() {
            m.insert("surfaceOp".into(), op.to_json());
        }
        if self.ignorable() {
            m.insert("ignorable".into(), Value::Bool(true));
        }
        m.insert("seq".into(), self.seq.into());
        m.insert("time".into(), self.time.into());
        Value::Object(m)
    }

    /// Decodes one stored line (without its `\n`) and checks the envelope (§4.2): required
    /// `type`, `seq` (equal to `expected_seq`), `time`, `data`; optional `surfaceOp`,
    /// `sourceEventSeqs`, `ignorable` (exactly `true`); nothing else. The line is parsed once;
    /// a core payload is decoded and checked here too (a payload that breaks a rule is not an
    /// envelope error: admission refuses it, naming the rule).
    pub fn from_line(line: &str, expected_seq: u64) -> Result<Self, EventError> {
        match Event::from_writer_line(line, expected_seq) {
            Some(ev) => Ok(ev),
            None => Event::from_any_line(line, expected_seq),
        }
    }

    /// [`Event::from_line`] for any member order and any type.
    fn from_any_line(line: &str, expected_seq: u64) -> Result<Self, EventError> {
        let row: Row<'_> = serde_json::from_str(line).map_err(envelope_error)?;
        let kind = match row.kind {
            Some(k) if !k.is_empty() => k,
            _ => return Err(EventError::MissingType),
        };
        let seq = row
            .seq
            .as_ref()
            .and_then(number_as_safe_u64)
            .ok_or_else(|| EventError::MissingSeq {
                kind: kind.to_string(),
            })?;
        if seq != expected_seq {
            return Err(EventError::SeqMismatch {
                kind: kind.to_string(),
                seq,
                expected: expected_seq,
            });
        }
        let time = row
            .time
            .as_ref()
            .and_then(number_as_safe_i64)
            .ok_or_else(|| EventError::MissingTime {
                seq,
                kind: kind.to_string(),
            })?;
        let data = row.data.ok_or_else(|| EventError::MissingData {
            seq,
            kind: kind.to_string(),
        })?;
        let surface_op = match row.surface_op {
            None => None,
            Some(raw) if raw.get() == "\"append\"" => Some(SurfaceOp::Append),
            Some(raw) => {
                let v: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
                Some(
                    SurfaceOp::from_json(&v, seq).map_err(|reason| EventError::SurfaceOp {
                        seq,
                        kind: kind.to_string(),
                        reason,
                    })?,
                )
            }
        };
        let sources = match row.sources {
            None => None,
            Some(raw) => {
                let v: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
                Some(decode_runs(&v, seq).map_err(|reason| EventError::Sources {
                    seq,
                    kind: kind.to_string(),
                    reason,
                })?)
            }
        };
        let ignorable = match row.ignorable {
            None => false,
            Some(raw) if raw.get() == "true" => true,
            Some(_) => {
                return Err(EventError::Ignorable {
                    seq,
                    kind: kind.to_string(),
                });
            }
        };
        Ok(Event::build(
            EventKind::parse(&kind),
            seq,
            time,
            data.to_owned(),
            Typed::No,
            surface_op,
            sources,
            ignorable,
        ))
    }

    /// The fast path of [`Event::from_line`] for a valid core row in the writer's member order:
    /// the payload is decoded straight from the line while its extent is found, so the line is
    /// scanned once. `None`: anything else (the general path decides, and names the problem).
    fn from_writer_line(line: &str, expected_seq: u64) -> Option<Self> {
        let rest = line.strip_prefix("{\"type\":\"")?;
        let q = rest.find('"')?;
        let name = &rest[..q];
        if name.is_empty() || name.contains('\\') {
            return None;
        }
        let kind = EventKind::parse(name);
        if !CoreEvent::is_core(&kind) {
            return None;
        }
        let after = rest[q + 1..].strip_prefix(",\"data\":")?;
        let (core, len) = CoreEvent::decode_prefix(&kind, after)?.ok()?;
        let data = after.get(..len)?;
        let tail = after[len..].strip_prefix(',')?;
        let mut object = String::with_capacity(tail.len() + 1);
        object.push('{');
        object.push_str(tail);
        let t: Tail<'_> = serde_json::from_str(&object).ok()?;
        let seq = number_as_safe_u64(&t.seq).filter(|s| *s == expected_seq)?;
        let time = number_as_safe_i64(&t.time)?;
        let surface_op = match t.surface_op {
            None => None,
            Some(raw) if raw.get() == "\"append\"" => Some(SurfaceOp::Append),
            Some(raw) => {
                let v: Value = serde_json::from_str(raw.get()).ok()?;
                Some(SurfaceOp::from_json(&v, seq).ok()?)
            }
        };
        let sources = match t.sources {
            None => None,
            Some(raw) => {
                let v: Value = serde_json::from_str(raw.get()).ok()?;
                Some(decode_runs(&v, seq).ok()?)
            }
        };
        let ignorable = match t.ignorable {
            None => false,
            Some(raw) if raw.get() == "true" => true,
            Some(_) => return None,
        };
        Some(Event::build_from(
            kind,
            seq,
            time,
            DataText::Parsed(data),
            Typed::Decoded(core),
            surface_op,
            sources,
            ignorable,
        ))
    }

    /// Decodes a physical row given as a JSON tree (see [`Event::from_line`], the fast path).
    pub fn from_json(row: Value, expected_seq: u64) -> Result<Self, EventError> {
        Event::from_line(&row.to_string(), expected_seq)
    }
}

/// Compact JSON text of a value. Serialising a `Value` cannot fail (all keys are strings).
fn raw_of(data: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(data).unwrap_or_default()
}

/// The payload text an event is built from.
enum DataText<'a> {
    /// Already a `RawValue`.
    Owned(Box<RawValue>),
    /// A text the caller has parsed as JSON (a writer line's `data`).
    Parsed(&'a str),
    /// No text: a typed append, checked as it was serialised (large payloads are never held
    /// twice).
    Typed,
}

impl DataText<'_> {
    fn text(&self) -> Option<&str> {
        match self {
            DataText::Owned(raw) => Some(raw.get()),
            DataText::Parsed(text) => Some(text),
            DataText::Typed => None,
        }
    }

    /// The text as a `RawValue` to keep. A parsed text is valid JSON, so the conversion only
    /// fails on a caller's bug; the event then keeps no text and serialises its typed payload.
    fn into_raw(self) -> Option<Box<RawValue>> {
        match self {
            DataText::Owned(raw) => Some(raw),
            DataText::Parsed(text) => RawValue::from_string(text.to_owned()).ok(),
            DataText::Typed => None,
        }
    }
}

/// The payload of an event to append.
#[derive(Debug, Clone)]
pub enum NewData {
    /// A typed core payload (serialised at append).
    Core(CoreEvent),
    /// A JSON tree (untyped appends, tests).
    Json(Value),
    /// Exact JSON text (plugin events).
    Raw(Box<RawValue>),
}

impl PartialEq for NewData {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (NewData::Core(a), NewData::Core(b)) => a == b,
            (NewData::Json(a), NewData::Json(b)) => a == b,
            (NewData::Raw(a), NewData::Raw(b)) => a.get() == b.get(),
            _ => false,
        }
    }
}

/// An event to append: everything but `seq` (assigned by the log) and optionally `time`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The type.
    pub kind: EventKind,
    /// The payload (validated lossless at append).
    pub data: NewData,
    /// Surface operation; `None` for log-only events. The constructors preset `Append` for the
    /// five surface types.
    pub surface_op: Option<SurfaceOp>,
    /// Logical provenance list.
    pub source_event_seqs: Option<Vec<u64>>,
    /// Mark the row `ignorable: true` (plugin-owned `dsh/…` records).
    pub ignorable: bool,
    /// Explicit time (epoch ms); `None` = the log's clock at append.
    pub time: Option<i64>,
}

impl NewEvent {
    fn with_data(kind: EventKind, data: NewData) -> Self {
        let surface_op = kind.is_surface().then_some(SurfaceOp::Append);
        let ignorable = !kind.is_known();
        NewEvent {
            kind,
            data,
            surface_op,
            source_event_seqs: None,
            ignorable,
            time: None,
        }
    }

    /// A new event of `kind` with an untyped JSON payload; surface types get
    /// `surfaceOp: "append"` by default. A type outside the 60 known names (a plugin's own
    /// log-only type, by convention `dsh/<name>`) is marked `ignorable: true`, as format §17
    /// rule 3 requires. Prefer [`NewEvent::core`] for core events and [`NewEvent::plugin`] for
    /// a plugin's typed events.
    pub fn new(kind: impl Into<EventKind>, data: Value) -> Self {
        NewEvent::with_data(kind.into(), NewData::Json(data))
    }

    /// A typed core event: the one append path for core events.
    pub fn core(event: impl Into<CoreEvent>) -> Self {
        let event = event.into();
        NewEvent::with_data(event.kind(), NewData::Core(event))
    }

    /// A typed core event from a reference (kept for callers that hold the payload; it is
    /// cloned, which shares its messages). Prefer [`NewEvent::core`].
    pub fn typed<T: crate::data::EventData>(data: &T) -> Result<Self, serde_json::Error> {
        Ok(NewEvent::core(data.clone()))
    }

    /// A plugin's typed event (see [`PluginEvent`]).
    pub fn plugin<T: PluginEvent>(data: &T) -> Result<Self, serde_json::Error> {
        let raw = serde_json::value::to_raw_value(data)?;
        Ok(NewEvent::with_data(
            EventKind::parse(T::TYPE),
            NewData::Raw(raw),
        ))
    }

    /// Sets the surface operation.
    pub fn with_surface_op(mut self, op: SurfaceOp) -> Self {
        self.surface_op = Some(op);
        self
    }

    /// Sets a replacement of the inclusive span `start..=end`.
    pub fn replacing(self, start_seq: u64, end_seq: u64) -> Self {
        self.with_surface_op(SurfaceOp::Replace { start_seq, end_seq })
    }

    /// Sets the provenance list.
    pub fn with_sources(mut self, seqs: Vec<u64>) -> Self {
        self.source_event_seqs = Some(seqs);
        self
    }

    /// Marks the row ignorable.
    pub fn ignorable(mut self) -> Self {
        self.ignorable = true;
        self
    }

    /// Sets an explicit time.
    pub fn at(mut self, time: i64) -> Self {
        self.time = Some(time);
        self
    }

    /// The payload as exact JSON text, plus the typed payload when there is one.
    /// `None` text: a typed payload whose serialisation passed the lossless scan as it was
    /// written (its text is not built; `end/seed`, whose check reads the text, always has one).
    /// The length is the text's, in bytes.
    #[allow(clippy::type_complexity)]
    pub(crate) fn into_payload(self) -> Result<((Option<Box<RawValue>>, usize), Typed), Rejection> {
        let sized = |raw: Box<RawValue>| {
            let len = raw.get().len();
            (Some(raw), len)
        };
        match self.data {
            NewData::Core(core) => {
                if !matches!(core, CoreEvent::EndSeed(_)) {
                    let mut scan = crate::json::LossScan::default();
                    core.write_json(&mut scan)
                        .map_err(|e| Rejection::Serialize(Arc::new(e)))?;
                    if !scan.may_be_lossy() {
                        return Ok(((None, scan.len()), Typed::Canonical(core)));
                    }
                }
                let text = core
                    .to_json()
                    .map_err(|e| Rejection::Serialize(Arc::new(e)))?;
                let raw =
                    RawValue::from_string(text).map_err(|e| Rejection::Serialize(Arc::new(e)))?;
                Ok((sized(raw), Typed::Canonical(core)))
            }
            NewData::Json(v) => Ok((sized(raw_of(&v)), Typed::KeepText)),
            NewData::Raw(raw) => Ok((sized(raw), Typed::No)),
        }
    }

    pub(crate) fn check_time(&self) -> Result<(), Rejection> {
        if let Some(t) = self.time
            && !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&t)
        {
            return Err(Rejection::NotLossless(crate::json::JsonError {
                path: "time".into(),
                problem: "integer outside the safe range ±(2^53-1)",
            }));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelope_round_trip_and_order() {
        let row = json!({"type":"tool/result","data":{"a":1},"sourceEventSeqs":[[4,6]],"surfaceOp":"append","seq":7,"time":5});
        let ev = Event::from_json(row, 7).unwrap();
        assert_eq!(ev.source_event_seqs(), Some(&[4, 5, 6][..]));
        assert_eq!(
            ev.to_json_line(),
            r#"{"type":"tool/result","data":{"a":1},"sourceEventSeqs":[[4,6]],"surfaceOp":"append","seq":7,"time":5}"#
        );
    }

    #[test]
    fn lines_keep_their_data_bytes_and_decode_core_payloads_once() {
        let line = r#"{"seq":0,"time":5,"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"},"x":1e2}}"#;
        let ev = Event::from_line(line, 0).unwrap();
        assert_eq!(ev.event_kind(), &EventKind::TurnEnd);
        assert_eq!(
            ev.to_json_line(),
            r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"},"x":1e2},"seq":0,"time":5}"#
        );
        assert!(matches!(
            ev.core(),
            Some(CoreEvent::TurnEnd(t)) if t.turn == 1 && t.reason == crate::data::TurnEndReason::Completed
        ));
        let opaque = Event::from_line(
            r#"{"type":"dsh/x","data":null,"ignorable":true,"seq":3,"time":0}"#,
            3,
        )
        .unwrap();
        assert!(opaque.core().is_none() && opaque.ignorable());
        assert_eq!(opaque.data_json(), "null");
    }

    #[test]
    fn envelope_rejections_by_variant() {
        type Case = (&'static str, fn(&EventError) -> bool);
        let cases: [Case; 9] = [
            (r#"[1]"#, |e| matches!(e, EventError::Malformed(_))),
            (r#"{"type":"x","seq":0,"time":0}"#, |e| {
                matches!(e, EventError::MissingData { seq: 0, .. })
            }),
            (r#"{"type":"x","seq":1,"time":0,"data":{}}"#, |e| {
                matches!(
                    e,
                    EventError::SeqMismatch {
                        seq: 1,
                        expected: 0,
                        ..
                    }
                )
            }),
            (r#"{"type":"x","seq":0,"data":{}}"#, |e| {
                matches!(e, EventError::MissingTime { .. })
            }),
            (
                r#"{"type":"x","seq":0,"time":0,"data":{},"extra":1}"#,
                |e| matches!(e, EventError::UnknownMember(m) if m == "extra"),
            ),
            (
                r#"{"type":"x","seq":0,"time":0,"data":{},"ignorable":false}"#,
                |e| matches!(e, EventError::Ignorable { .. }),
            ),
            (r#"{"seq":0,"time":0,"data":{}}"#, |e| {
                matches!(e, EventError::MissingType)
            }),
            (
                r#"{"type":"x","seq":0,"time":0,"data":{},"surfaceOp":{"op":"replace","start":0,"end":0}}"#,
                |e| {
                    matches!(
                        e,
                        EventError::SurfaceOp {
                            reason: SurfaceOpError::Bounds,
                            ..
                        }
                    )
                },
            ),
            (
                r#"{"type":"x","seq":2,"time":0,"data":{},"sourceEventSeqs":[2]}"#,
                |e| matches!(e, EventError::Sources { .. }),
            ),
        ];
        for (line, ok) in cases {
            let expected = if line.contains("\"seq\":2") { 2 } else { 0 };
            let err = Event::from_line(line, expected).unwrap_err();
            assert!(ok(&err), "{line}: {err:?}");
        }
    }

    #[test]
    fn the_writer_order_fast_path_agrees_with_the_general_reader() {
        let fast = [
            r#"{"type":"turn/start","data":{"turn":1},"seq":0,"time":5}"#,
            r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"},"x":1e2},"seq":0,"time":-5}"#,
            r#"{"type":"tool/result","data":{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"c"},"toolCallId":"c","content":[],"isError":false,"id":"m"}},"sourceEventSeqs":[[0,2]],"surfaceOp":{"op":"replace","startSeq":1,"endSeq":1},"seq":3,"time":5}"#,
            r#"{"type":"step/end","data":{"turn":1,"step":1},"ignorable":true,"seq":0,"time":5}"#,
        ];
        for line in fast {
            let seq = if line.contains("\"seq\":3") { 3 } else { 0 };
            let a = Event::from_writer_line(line, seq).expect(line);
            let b = Event::from_any_line(line, seq).unwrap();
            assert_eq!(a, b, "{line}");
            assert_eq!(a.core(), b.core(), "{line}");
            assert_eq!(a.keeps_raw_data(), b.keeps_raw_data(), "{line}");
            assert_eq!(a.to_json_line(), line);
        }
        // Anything else takes the general path, which names the problem.
        for (line, seq) in [
            (
                r#"{"type":"turn/start","data":{"turn":1},"seq":1,"time":5}"#,
                0,
            ),
            (
                r#"{"type":"turn/start","data":{"turn":1},"seq":0,"time":5,"x":1}"#,
                0,
            ),
            (
                r#"{"type":"turn/start","data":{"turn":1},"type":"x","seq":0,"time":5}"#,
                0,
            ),
            (
                r#"{"type":"turn/start","data":{"turn":"1"},"seq":0,"time":5}"#,
                0,
            ),
            (
                r#"{"type":"dsh/x","data":{},"ignorable":true,"seq":0,"time":5}"#,
                0,
            ),
            (
                r#"{"data":{"turn":1},"type":"turn/start","seq":0,"time":5}"#,
                0,
            ),
            (
                r#"{"type":"turn/start","data":{"turn":1},"ignorable":false,"seq":0,"time":5}"#,
                0,
            ),
        ] {
            assert!(Event::from_writer_line(line, seq).is_none(), "{line}");
        }
        assert!(matches!(
            Event::from_line(r#"{"type":"turn/start","data":{"turn":1},"seq":0,"time":5,"x":1}"#, 0),
            Err(EventError::UnknownMember(m)) if m == "x"
        ));
        assert!(
            Event::from_line(
                r#"{"data":{"turn":1},"type":"turn/start","seq":0,"time":5}"#,
                0
            )
            .unwrap()
            .core()
            .is_some()
        );
    }

    /// Every row of the recorded v4 fixtures that the fast path takes gives the same event as
    /// the general reader (payload, kept text, metadata).
    #[test]
    fn fast_path_agrees_on_every_fixture_row() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/upstream-sessions/v4"
        );
        let mut fast = 0;
        let mut files = 0;
        for scenario in std::fs::read_dir(dir).unwrap() {
            for file in std::fs::read_dir(scenario.unwrap().path()).unwrap() {
                let path = file.unwrap().path();
                if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
                    continue;
                }
                files += 1;
                let text = std::fs::read_to_string(&path).unwrap();
                for (i, row) in text.lines().skip(1).enumerate() {
                    // Recorded rows carry no seq/time (the fixture loader adds them).
                    let Some(body) = row.strip_suffix('}') else {
                        continue;
                    };
                    let line = format!("{body},\"seq\":{i},\"time\":0}}");
                    let line = line.as_str();
                    let Some(a) = Event::from_writer_line(line, i as u64) else {
                        continue;
                    };
                    fast += 1;
                    let b = Event::from_any_line(line, i as u64).unwrap();
                    assert_eq!(a, b, "{}:{i}", path.display());
                    assert_eq!(a.core(), b.core(), "{}:{i}", path.display());
                    assert_eq!(a.keeps_raw_data(), b.keeps_raw_data());
                    assert_eq!(a.to_json_line(), b.to_json_line());
                }
            }
        }
        assert!(files > 5 && fast > 50, "{files} files, {fast} fast rows");
    }

    #[test]
    fn replace_op_parsing() {
        let op = json!({"op":"replace","startSeq":2,"endSeq":3});
        assert_eq!(
            SurfaceOp::from_json(&op, 5).unwrap(),
            SurfaceOp::Replace {
                start_seq: 2,
                end_seq: 3
            }
        );
        assert!(matches!(
            SurfaceOp::from_json(&op, 3),
            Err(SurfaceOpError::NotEarlier {
                start: 2,
                end: 3,
                seq: 3
            })
        ));
        assert_eq!(
            SurfaceOp::from_json(&json!({"op":"replace","startSeq":2,"endSeq":3,"x":1}), 5),
            Err(SurfaceOpError::Shape)
        );
        assert_eq!(
            SurfaceOp::from_json(&json!("prepend"), 5),
            Err(SurfaceOpError::Shape)
        );
    }
}
