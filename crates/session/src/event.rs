//! The event envelope (format §3.1, §4.2): one immutable, shared log row.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::json::{as_safe_i64, as_safe_u64, validate_lossless};
use crate::seqs::{decode_runs, encode_runs};

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

    /// Parses the physical form; both bounds must be earlier than `own_seq`.
    pub fn from_json(value: &Value, own_seq: u64) -> Result<Self, String> {
        match value {
            Value::String(s) if s == "append" => Ok(SurfaceOp::Append),
            Value::Object(m) => {
                if m.len() != 3 || m.get("op").and_then(Value::as_str) != Some("replace") {
                    return Err(
                        "surfaceOp must be \"append\" or exactly {op:\"replace\", startSeq, endSeq}"
                            .into(),
                    );
                }
                let start = m.get("startSeq").and_then(as_safe_u64);
                let end = m.get("endSeq").and_then(as_safe_u64);
                let (Some(start_seq), Some(end_seq)) = (start, end) else {
                    return Err(
                        "surfaceOp replace needs non-negative integer startSeq and endSeq".into(),
                    );
                };
                if start_seq >= own_seq || end_seq >= own_seq {
                    return Err(format!(
                        "surfaceOp replace bounds {start_seq}..{end_seq} must be earlier than seq {own_seq}"
                    ));
                }
                Ok(SurfaceOp::Replace { start_seq, end_seq })
            }
            _ => Err("surfaceOp must be \"append\" or {op:\"replace\", startSeq, endSeq}".into()),
        }
    }
}

/// One committed log row. Immutable once appended; readers share it as `Arc<Event>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    kind: Arc<str>,
    seq: u64,
    time: i64,
    data: Value,
    surface_op: Option<SurfaceOp>,
    source_event_seqs: Option<Box<[u64]>>,
    ignorable: bool,
}

impl Event {
    /// The event type tag (`turn/start`, `user/message`, …).
    pub fn kind(&self) -> &str {
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
    /// The payload, exactly as committed (unknown members included).
    pub fn data(&self) -> &Value {
        &self.data
    }
    /// The surface operation of a surface event.
    pub fn surface_op(&self) -> Option<SurfaceOp> {
        self.surface_op
    }
    /// Logical provenance list (runs expanded).
    pub fn source_event_seqs(&self) -> Option<&[u64]> {
        self.source_event_seqs.as_deref()
    }
    /// Whether the row is marked `ignorable: true`.
    pub fn ignorable(&self) -> bool {
        self.ignorable
    }

    /// Deserializes `data` into a typed view (a projection; the JSON stays the truth).
    pub fn data_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(&self.data)
    }

    pub(crate) fn from_parts(
        kind: impl Into<Arc<str>>,
        seq: u64,
        time: i64,
        data: Value,
        surface_op: Option<SurfaceOp>,
        source_event_seqs: Option<Vec<u64>>,
        ignorable: bool,
    ) -> Self {
        Event {
            kind: kind.into(),
            seq,
            time,
            data,
            surface_op,
            source_event_seqs: source_event_seqs.map(Vec::into_boxed_slice),
            ignorable,
        }
    }

    /// Renumbers the event (v3 conversion rule 7).
    pub(crate) fn set_seq(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// Replaces payload and metadata (used by the v3 conversion).
    pub(crate) fn set_parts(
        &mut self,
        kind: Option<String>,
        data: Option<Value>,
        surface_op: Option<Option<SurfaceOp>>,
        source_event_seqs: Option<Option<Vec<u64>>>,
    ) {
        if let Some(k) = kind {
            self.kind = k.into();
        }
        if let Some(d) = data {
            self.data = d;
        }
        if let Some(s) = surface_op {
            self.surface_op = s;
        }
        if let Some(s) = source_event_seqs {
            self.source_event_seqs = s.map(Vec::into_boxed_slice);
        }
    }

    /// Serializes the row as one JSON line (without the trailing `\n`), in the writer key order
    /// `type, data, sourceEventSeqs?, surfaceOp?, ignorable?, seq, time`.
    pub fn to_json_line(&self) -> String {
        let mut out = String::with_capacity(128);
        out.push_str("{\"type\":");
        push_json(&mut out, &Value::String(self.kind.to_string()));
        out.push_str(",\"data\":");
        push_json(&mut out, &self.data);
        if let Some(seqs) = &self.source_event_seqs {
            out.push_str(",\"sourceEventSeqs\":");
            push_json(&mut out, &encode_runs(seqs));
        }
        if let Some(op) = &self.surface_op {
            out.push_str(",\"surfaceOp\":");
            push_json(&mut out, &op.to_json());
        }
        if self.ignorable {
            out.push_str(",\"ignorable\":true");
        }
        let _ = write!(out, ",\"seq\":{},\"time\":{}}}", self.seq, self.time);
        out
    }

    /// The physical row as a JSON value (same content as [`Event::to_json_line`]).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), Value::String(self.kind.to_string()));
        m.insert("data".into(), self.data.clone());
        if let Some(seqs) = &self.source_event_seqs {
            m.insert("sourceEventSeqs".into(), encode_runs(seqs));
        }
        if let Some(op) = &self.surface_op {
            m.insert("surfaceOp".into(), op.to_json());
        }
        if self.ignorable {
            m.insert("ignorable".into(), Value::Bool(true));
        }
        m.insert("seq".into(), self.seq.into());
        m.insert("time".into(), self.time.into());
        Value::Object(m)
    }

    /// Decodes a physical row and checks the envelope (§4.2): required `type`, `seq` (equal to
    /// `expected_seq`), `time`, `data`; optional `surfaceOp`, `sourceEventSeqs`, `ignorable`
    /// (exactly `true`); nothing else.
    pub fn from_json(row: Value, expected_seq: u64) -> Result<Self, String> {
        let Value::Object(mut m) = row else {
            return Err("event row is not a JSON object".into());
        };
        for key in m.keys() {
            if !matches!(
                key.as_str(),
                "type" | "seq" | "time" | "data" | "surfaceOp" | "sourceEventSeqs" | "ignorable"
            ) {
                return Err(format!("event row has unknown envelope member \"{key}\""));
            }
        }
        let kind = match m.remove("type") {
            Some(Value::String(s)) if !s.is_empty() => s,
            _ => return Err("event row lacks a string \"type\"".into()),
        };
        let seq = m
            .get("seq")
            .and_then(as_safe_u64)
            .ok_or_else(|| format!("event \"{kind}\" lacks a valid \"seq\""))?;
        if seq != expected_seq {
            return Err(format!(
                "event \"{kind}\" has seq {seq}, expected {expected_seq}"
            ));
        }
        let time = m
            .get("time")
            .and_then(as_safe_i64)
            .ok_or_else(|| format!("event {seq} (\"{kind}\") lacks a valid \"time\""))?;
        let data = m
            .remove("data")
            .ok_or_else(|| format!("event {seq} (\"{kind}\") lacks \"data\""))?;
        let surface_op = match m.get("surfaceOp") {
            None => None,
            Some(v) => Some(
                SurfaceOp::from_json(v, seq)
                    .map_err(|e| format!("event {seq} (\"{kind}\"): {e}"))?,
            ),
        };
        let sources = match m.get("sourceEventSeqs") {
            None => None,
            Some(v) => {
                Some(decode_runs(v, seq).map_err(|e| format!("event {seq} (\"{kind}\"): {e}"))?)
            }
        };
        let ignorable = match m.get("ignorable") {
            None => false,
            Some(Value::Bool(true)) => true,
            Some(_) => {
                return Err(format!(
                    "event {seq} (\"{kind}\"): ignorable must be exactly true"
                ));
            }
        };
        Ok(Event::from_parts(
            kind, seq, time, data, surface_op, sources, ignorable,
        ))
    }
}

fn push_json(out: &mut String, v: &Value) {
    // Serializing a `Value` to a string cannot fail (all keys are strings).
    if let Ok(s) = serde_json::to_string(v) {
        out.push_str(&s);
    }
}

/// An event to append: everything but `seq` (assigned by the log) and optionally `time`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The type tag.
    pub kind: String,
    /// The payload (validated lossless at append).
    pub data: Value,
    /// Surface operation; `None` for log-only events. [`NewEvent::new`] presets `Append` for the
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
    /// A new event of `kind` with `data`; surface types get `surfaceOp: "append"` by default.
    /// A type outside the 60 known names (a plugin's own log-only type, by convention
    /// `dsh/<name>`) is marked `ignorable: true`, as format §17 rule 3 requires.
    pub fn new(kind: impl Into<String>, data: Value) -> Self {
        let kind = kind.into();
        let surface_op = crate::vocab::is_surface(&kind).then_some(SurfaceOp::Append);
        let ignorable = !crate::vocab::is_known(&kind);
        NewEvent {
            kind,
            data,
            surface_op,
            source_event_seqs: None,
            ignorable,
            time: None,
        }
    }

    /// A typed core event (see [`crate::data::EventData`]).
    pub fn typed<T: crate::data::EventData>(data: &T) -> Result<Self, serde_json::Error> {
        Ok(NewEvent::new(T::TYPE, serde_json::to_value(data)?))
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

    pub(crate) fn check_lossless(&self) -> Result<(), String> {
        validate_lossless(&self.data, "data").map_err(|e| e.to_string())?;
        if let Some(t) = self.time
            && !(-crate::json::MAX_SAFE_INTEGER..=crate::json::MAX_SAFE_INTEGER).contains(&t)
        {
            return Err("time outside the safe integer range".into());
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
    fn envelope_rejections() {
        let bad = [
            json!([1]),
            json!({"type":"x","seq":0,"time":0}),
            json!({"type":"x","seq":1,"time":0,"data":{}}),
            json!({"type":"x","seq":0,"data":{}}),
            json!({"type":"x","seq":0,"time":0,"data":{},"extra":1}),
            json!({"type":"x","seq":0,"time":0,"data":{},"ignorable":false}),
            json!({"seq":0,"time":0,"data":{}}),
            json!({"type":"x","seq":0,"time":0,"data":{},"surfaceOp":{"op":"replace","start":0,"end":0}}),
        ];
        for row in bad {
            assert!(Event::from_json(row.clone(), 0).is_err(), "{row}");
        }
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
        assert!(SurfaceOp::from_json(&op, 3).is_err());
        assert!(
            SurfaceOp::from_json(&json!({"op":"replace","startSeq":2,"endSeq":3,"x":1}), 5)
                .is_err()
        );
        assert!(SurfaceOp::from_json(&json!("prepend"), 5).is_err());
    }
}
