//! Embedded stream records (format §3.4): lossless packing of an attempt's timed chunks, the
//! inverse expansion, and validation.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value, json};

use crate::json::{
    MAX_SAFE_INTEGER, as_safe_i64, as_safe_u64, number_as_safe_i64, number_as_safe_u64,
};

/// A malformed embedded stream (format §3.4); the text names the record and member.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StreamError(pub String);

impl From<String> for StreamError {
    fn from(s: String) -> Self {
        StreamError(s)
    }
}

impl From<&str> for StreamError {
    fn from(s: &str) -> Self {
        StreamError(s.to_owned())
    }
}

pub use crate::packed::{PackedStream, StreamPacker};

/// Expands stream records into `(time, chunk JSON)` pairs (the chunks as JSON, so plugin block
/// tags survive). Fails on invalid records.
pub fn expand_stream(records: &[Value]) -> Result<Vec<(i64, Value)>, StreamError> {
    let mut out = Vec::new();
    walk(records, 0, Some(&mut out))?;
    Ok(out)
}

/// Validates (and, with `out`, expands) records; `base` offsets record numbers in errors.
fn walk(
    records: &[Value],
    base: usize,
    mut out: Option<&mut Vec<(i64, Value)>>,
) -> Result<(), StreamError> {
    for (i, rec) in records.iter().enumerate() {
        let i = i + base;
        let m = rec
            .as_object()
            .ok_or_else(|| format!("stream record {i} is not an object"))?;
        let kind = m.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "chunk" => {
                exact_keys(m, &["type", "time", "chunk"], &[], i)?;
                let t = m
                    .get("time")
                    .and_then(as_safe_i64)
                    .ok_or_else(|| format!("stream record {i}: bad time"))?;
                let chunk = m.get("chunk").unwrap_or(&Value::Null);
                if !chunk.is_object() || chunk.get("type").and_then(Value::as_str).is_none() {
                    return Err(format!("stream record {i}: chunk is not a typed object").into());
                }
                let chunk = chunk.clone();
                if let Some(out) = out.as_deref_mut() {
                    out.push((t, chunk));
                }
            }
            "text-chunks" | "reasoning-chunks" | "tool-call-chunks" => {
                let tool = kind == "tool-call-chunks";
                let (req, opt): (&[&str], &[&str]) = if tool {
                    (&["type", "time0", "index", "dt", "id", "args"], &["name"])
                } else {
                    (&["type", "time0", "index", "dt", "texts"], &[])
                };
                exact_keys(m, req, opt, i)?;
                let t0 = m
                    .get("time0")
                    .and_then(as_safe_i64)
                    .ok_or_else(|| format!("stream record {i}: bad time0"))?;
                let index = m
                    .get("index")
                    .and_then(as_safe_u64)
                    .ok_or_else(|| format!("stream record {i}: bad index"))?;
                let members = m
                    .get(if tool { "args" } else { "texts" })
                    .and_then(Value::as_array)
                    .filter(|a| !a.is_empty() && a.iter().all(Value::is_string))
                    .ok_or_else(|| {
                        format!("stream record {i}: members must be a non-empty string array")
                    })?;
                let dt = m
                    .get("dt")
                    .and_then(Value::as_array)
                    .ok_or_else(|| format!("stream record {i}: dt must be an array"))?;
                if dt.len() + 1 != members.len() {
                    return Err(format!("stream record {i}: dt length must be members - 1").into());
                }
                let id = m.get("id").and_then(Value::as_str);
                let name = m.get("name");
                if tool {
                    if id.is_none_or(str::is_empty) {
                        return Err(format!(
                            "stream record {i}: tool-call-chunks id must be non-empty"
                        )
                        .into());
                    }
                    if let Some(n) = name
                        && n.as_str().is_none_or(str::is_empty)
                    {
                        return Err(format!(
                            "stream record {i}: tool-call-chunks name must be non-empty"
                        )
                        .into());
                    }
                }
                let mut t = t0;
                for (k, member) in members.iter().enumerate() {
                    if k > 0 {
                        let d = as_safe_i64(&dt[k - 1])
                            .ok_or_else(|| format!("stream record {i}: bad dt"))?;
                        t = t
                            .checked_add(d)
                            .filter(|t| t.abs() <= MAX_SAFE_INTEGER)
                            .ok_or_else(|| format!("stream record {i}: time overflow"))?;
                    }
                    let Some(out) = out.as_deref_mut() else {
                        continue;
                    };
                    let chunk = match kind {
                        "text-chunks" => {
                            json!({"type": "text-delta", "index": index, "text": member})
                        }
                        "reasoning-chunks" => {
                            json!({"type": "reasoning-delta", "index": index, "text": member})
                        }
                        _ => {
                            let mut c = Map::new();
                            c.insert("type".into(), "tool-call-delta".into());
                            c.insert("index".into(), index.into());
                            c.insert("id".into(), id.unwrap_or_default().into());
                            if let Some(n) = name {
                                c.insert("name".into(), n.clone());
                            }
                            c.insert("argumentsDelta".into(), member.clone());
                            Value::Object(c)
                        }
                    };
                    out.push((t, chunk));
                }
            }
            other => {
                return Err(format!("stream record {i} has unknown type \"{other}\"").into());
            }
        }
    }
    Ok(())
}

fn exact_keys(
    m: &Map<String, Value>,
    req: &[&str],
    opt: &[&str],
    i: usize,
) -> Result<(), StreamError> {
    for k in req {
        if !m.contains_key(*k) {
            return Err(format!("stream record {i} lacks \"{k}\"").into());
        }
    }
    for k in m.keys() {
        if !req.contains(&k.as_str()) && !opt.contains(&k.as_str()) {
            return Err(format!("stream record {i} has unknown member \"{k}\"").into());
        }
    }
    Ok(())
}

/// Validates a stream (§3.4, §4.5) without expanding it: record shapes and times, and no
/// retired `tool-result` or tool-change tags in `block-start`/`block-end` chunks.
pub fn validate_stream(stream: &Value) -> Result<(), StreamError> {
    let records = stream.as_array().ok_or("stream must be an array")?;
    for (i, rec) in records.iter().enumerate() {
        let m = rec
            .as_object()
            .ok_or_else(|| format!("stream record {i} is not an object"))?;
        match m.get("type").and_then(Value::as_str) {
            Some("chunk") => {
                exact_keys(m, &["type", "time", "chunk"], &[], i)?;
                m.get("time")
                    .and_then(as_safe_i64)
                    .ok_or_else(|| format!("stream record {i}: bad time"))?;
                let chunk = m
                    .get("chunk")
                    .and_then(Value::as_object)
                    .ok_or_else(|| format!("stream record {i}: chunk is not an object"))?;
                let tag = match chunk.get("type").and_then(Value::as_str) {
                    Some("block-start") => chunk.get("blockType").and_then(Value::as_str),
                    Some("block-end") => chunk
                        .get("block")
                        .and_then(|b| b.get("type"))
                        .and_then(Value::as_str),
                    Some(_) => None,
                    None => return Err(format!("stream record {i}: chunk has no type").into()),
                };
                if let Some(t @ ("tool-result" | "tool-addition" | "tool-removal")) = tag {
                    return Err(format!("stream holds a retired or misplaced \"{t}\" block").into());
                }
            }
            Some("text-chunks" | "reasoning-chunks" | "tool-call-chunks") => {
                walk(std::slice::from_ref(rec), i, None)?;
            }
            other => return Err(format!("stream record {i} has unknown type {other:?}").into()),
        }
    }
    Ok(())
}

/// One stream record, decoded from the payload text for validation only (strings borrowed;
/// a shape this view refuses is re-checked by [`validate_stream`] for a precise message).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordView<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    time: Option<Number>,
    #[serde(default)]
    time0: Option<Number>,
    #[serde(default)]
    index: Option<Number>,
    #[serde(default)]
    dt: Option<Vec<Number>>,
    #[serde(default)]
    texts: Option<Strings>,
    #[serde(default)]
    args: Option<Strings>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "some_raw", borrow)]
    name: Option<&'a RawValue>,
    #[serde(default, borrow)]
    chunk: Option<ChunkView<'a>>,
}

fn some_raw<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

/// The number of members of an array of strings (anything else does not decode).
struct Strings(usize);

impl<'de> Deserialize<'de> for Strings {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Strings;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of strings")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Strings, A::Error> {
                let mut n = 0;
                while seq.next_element::<AnyStr>()?.is_some() {
                    n += 1;
                }
                Ok(Strings(n))
            }
        }
        d.deserialize_seq(V)
    }
}

/// Any string, not kept.
struct AnyStr;

impl<'de> Deserialize<'de> for AnyStr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = AnyStr;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E>(self, _: &str) -> Result<AnyStr, E> {
                Ok(AnyStr)
            }
        }
        d.deserialize_str(V)
    }
}

/// The `type` tags a `chunk` record's chunk carries (validation only).
#[derive(Deserialize)]
struct ChunkView<'a> {
    #[serde(rename = "type", default, deserialize_with = "some_raw", borrow)]
    kind: Option<&'a RawValue>,
    #[serde(rename = "blockType", default, deserialize_with = "some_raw", borrow)]
    block_type: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "some_raw", borrow)]
    block: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct BlockView<'a> {
    #[serde(rename = "type", default, deserialize_with = "some_raw", borrow)]
    kind: Option<&'a RawValue>,
}

fn raw_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    serde_json::from_str::<Cow<'_, str>>(raw.get()).ok()
}

/// Validates a stream given as JSON text (§3.4, §4.5): the same rules as [`validate_stream`],
/// without building a JSON tree (this runs for every assistant event of a log being opened).
pub fn validate_stream_json(stream: &str) -> Result<(), StreamError> {
    match serde_json::from_str::<Vec<RecordView<'_>>>(stream) {
        Ok(records) => check_views(&records),
        // The view refuses the shape: the tree check names the record and member.
        Err(e) => match serde_json::from_str::<Value>(stream) {
            Ok(v) => {
                validate_stream(&v).and(Err(StreamError(format!("stream does not decode: {e}"))))
            }
            Err(_) => Err("stream must be an array".into()),
        },
    }
}

fn check_views(records: &[RecordView<'_>]) -> Result<(), StreamError> {
    for (i, view) in records.iter().enumerate() {
        let err = |m: &str| StreamError(format!("stream record {i}{m}"));
        let unknown = |name: &str| err(&format!(" has unknown member \"{name}\""));
        let lacks = |name: &str| err(&format!(" lacks \"{name}\""));
        let kind = view.kind.as_ref();
        match kind {
            "chunk" => {
                let others = [
                    ("time0", view.time0.is_some()),
                    ("index", view.index.is_some()),
                    ("dt", view.dt.is_some()),
                    ("texts", view.texts.is_some()),
                    ("args", view.args.is_some()),
                    ("id", view.id.is_some()),
                    ("name", view.name.is_some()),
                ];
                if let Some((n, _)) = others.iter().find(|(_, present)| *present) {
                    return Err(unknown(n));
                }
                view.time
                    .as_ref()
                    .ok_or_else(|| lacks("time"))
                    .and_then(|t| number_as_safe_i64(t).ok_or_else(|| err(": bad time")))?;
                let chunk = view.chunk.as_ref().ok_or_else(|| lacks("chunk"))?;
                let tag = match chunk.kind.and_then(raw_str).as_deref() {
                    Some("block-start") => chunk.block_type.and_then(raw_str),
                    Some("block-end") => chunk
                        .block
                        .and_then(|b| serde_json::from_str::<BlockView<'_>>(b.get()).ok())
                        .and_then(|b| b.kind.and_then(raw_str)),
                    Some(_) => None,
                    None => return Err(err(": chunk has no type")),
                };
                if let Some(t @ ("tool-result" | "tool-addition" | "tool-removal")) = tag.as_deref()
                {
                    return Err(format!("stream holds a retired or misplaced \"{t}\" block").into());
                }
            }
            "text-chunks" | "reasoning-chunks" | "tool-call-chunks" => {
                let tool = kind == "tool-call-chunks";
                if view.time.is_some() {
                    return Err(unknown("time"));
                }
                if view.chunk.is_some() {
                    return Err(unknown("chunk"));
                }
                let members = if tool {
                    if view.texts.is_some() {
                        return Err(unknown("texts"));
                    }
                    if view.id.is_none() {
                        return Err(lacks("id"));
                    }
                    view.args.as_ref().ok_or_else(|| lacks("args"))?
                } else {
                    for (n, present) in [
                        ("args", view.args.is_some()),
                        ("id", view.id.is_some()),
                        ("name", view.name.is_some()),
                    ] {
                        if present {
                            return Err(unknown(n));
                        }
                    }
                    view.texts.as_ref().ok_or_else(|| lacks("texts"))?
                };
                let t0 = view
                    .time0
                    .as_ref()
                    .ok_or_else(|| lacks("time0"))
                    .and_then(|t| number_as_safe_i64(t).ok_or_else(|| err(": bad time0")))?;
                view.index
                    .as_ref()
                    .ok_or_else(|| lacks("index"))
                    .and_then(|n| number_as_safe_u64(n).ok_or_else(|| err(": bad index")))?;
                let dt = view.dt.as_ref().ok_or_else(|| lacks("dt"))?;
                if members.0 == 0 {
                    return Err(err(": members must be a non-empty string array"));
                }
                if dt.len() + 1 != members.0 {
                    return Err(err(": dt length must be members - 1"));
                }
                if tool {
                    if view.id.as_deref().is_none_or(str::is_empty) {
                        return Err(err(": tool-call-chunks id must be non-empty"));
                    }
                    if let Some(n) = view.name
                        && raw_str(n).is_none_or(|s| s.is_empty())
                    {
                        return Err(err(": tool-call-chunks name must be non-empty"));
                    }
                }
                let mut t = t0;
                for d in dt {
                    let d = number_as_safe_i64(d).ok_or_else(|| err(": bad dt"))?;
                    t = t
                        .checked_add(d)
                        .filter(|t| t.abs() <= MAX_SAFE_INTEGER)
                        .ok_or_else(|| err(": time overflow"))?;
                }
            }
            other => return Err(err(&format!(" has unknown type {other:?}"))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_llm::{FinishReason, StreamChunk, TokenUsage};

    #[test]
    fn packs_like_the_recorded_two_run_tool_call() {
        let mut p = StreamPacker::new();
        p.push(
            0,
            &StreamChunk::ToolCallDelta {
                index: 0,
                id: "advanced-code".into(),
                name: Some("run_code".into()),
                arguments_delta: String::new(),
            },
        );
        p.push(
            0,
            &StreamChunk::ToolCallDelta {
                index: 0,
                id: "advanced-code".into(),
                name: None,
                arguments_delta: "{}".into(),
            },
        );
        p.push(
            0,
            &StreamChunk::Usage {
                usage: TokenUsage {
                    input_tokens: 3,
                    output_tokens: 3,
                    ..Default::default()
                },
            },
        );
        p.push(0, &StreamChunk::finish(FinishReason::Stop));
        let recs = p.into_records();
        assert_eq!(recs.len(), 4);
        assert_eq!(
            recs[0],
            json!({"type":"tool-call-chunks","time0":0,"index":0,"dt":[],"id":"advanced-code","name":"run_code","args":[""]})
        );
        assert_eq!(
            recs[1],
            json!({"type":"tool-call-chunks","time0":0,"index":0,"dt":[],"id":"advanced-code","args":["{}"]})
        );
        let text = Value::Array(recs.clone()).to_string();
        assert!(validate_stream_json(&text).is_ok());
        assert!(validate_stream(&Value::Array(recs)).is_ok());
    }

    #[test]
    fn text_runs_expand_with_times() {
        let mut p = StreamPacker::new();
        p.push(
            100,
            &StreamChunk::TextDelta {
                index: 0,
                text: "a".into(),
            },
        );
        p.push(
            103,
            &StreamChunk::TextDelta {
                index: 0,
                text: "".into(),
            },
        );
        p.push(
            110,
            &StreamChunk::TextDelta {
                index: 0,
                text: "c".into(),
            },
        );
        let recs = p.clone().into_records();
        assert_eq!(p.finish().records().unwrap(), recs);
        assert_eq!(
            recs,
            vec![
                json!({"type":"text-chunks","time0":100,"index":0,"dt":[3,7],"texts":["a","","c"]})
            ]
        );
        let exp = expand_stream(&recs).unwrap();
        assert_eq!(
            exp.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
            vec![100, 103, 110]
        );
    }

    #[test]
    fn rejects_bad_records() {
        for bad in [
            json!([{"type":"text-chunks","time0":0,"index":0,"dt":[1],"texts":["a"]}]),
            json!([{"type":"text-chunks","time0":0,"index":0,"dt":[],"texts":[]}]),
            json!([{"type":"tool-call-chunks","time0":0,"index":0,"dt":[],"id":"","args":["a"]}]),
            json!([{"type":"chunk","time":0,"chunk":{"type":"block-start","index":0,"blockType":"tool-result"}}]),
            json!([{"type":"chunk","time":0}]),
            json!([{"type":"mystery"}]),
            json!([{"type":"text-chunks","time0":0,"index":0,"dt":[],"texts":["a"],"id":"x"}]),
            json!([{"type":"text-chunks","time0":0,"index":-1,"dt":[],"texts":["a"]}]),
            json!([{"type":"text-chunks","time0":0,"index":0,"dt":[],"texts":[1]}]),
            json!([{"type":"text-chunks","time0":9007199254740991_i64,"index":0,"dt":[1],"texts":["a","b"]}]),
            json!([{"type":"tool-call-chunks","time0":0,"index":0,"dt":[],"id":"i","name":"","args":["a"]}]),
            json!([{"type":"chunk","time":0,"chunk":{"type":"block-end","index":0,"block":{"type":"tool-addition"}}}]),
            json!([{"type":"chunk","time":0,"chunk":{"index":0}}]),
            json!({"type":"chunk"}),
        ] {
            assert!(validate_stream(&bad).is_err(), "{bad}");
            assert!(validate_stream_json(&bad.to_string()).is_err(), "{bad}");
        }
        for good in [
            json!([]),
            json!([{"type":"chunk","time":0,"chunk":{"type":"usage","usage":{"inputTokens":1}}}]),
            json!([{"type":"tool-call-chunks","time0":0,"index":0,"dt":[-3],"id":"i","args":["a","b"]}]),
            json!([{"type":"reasoning-chunks","time0":5,"index":1,"dt":[0,2],"texts":["a","\"",""]}]),
        ] {
            assert!(validate_stream(&good).is_ok(), "{good}");
            assert!(validate_stream_json(&good.to_string()).is_ok(), "{good}");
        }
    }
}
