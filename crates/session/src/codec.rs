//! Reading stored log bytes (format §1.8, §1.9, §2, §4.1 steps 1–3): header and version check,
//! row decoding, torn-tail classification, and the v3→v4 conversion.

use serde_json::Value;

use crate::error::LogError;
use crate::event::Event;
use crate::header::SessionHeader;
use crate::json::as_safe_u64;

/// A decoded (and, for v3, converted) log, ready for [`crate::SessionLog::replay`].
#[derive(Debug, Clone)]
pub struct DecodedLog {
    /// The header (version 4 after conversion).
    pub header: SessionHeader,
    /// The committed events (v4 form).
    pub events: Vec<Event>,
    /// The generation read from storage (3 or 4).
    pub source_version: u64,
    /// Byte length of the committed prefix; anything after it is a torn tail that a write open
    /// truncates before its first append.
    pub committed_len: usize,
    /// Whether a torn tail was dropped.
    pub torn: bool,
}

/// The "newer" refusal (format §1.9).
pub fn newer_message(id: &str, version: u64, path: &str) -> String {
    format!(
        "session \"{id}\" uses log format v{version}, but dsh reads only v3 and v4: the log was written by a newer harness — upgrade dsh to open it ({path})"
    )
}

/// The "older" refusal (format §1.9).
pub fn older_message(id: &str, version: u64, path: &str) -> String {
    format!(
        "session \"{id}\" uses log format v{version}, older than the supported v3, and dsh ships no upgrade path for it; resume it once with the original harness (0.1.5 or later) to upgrade it ({path})"
    )
}

/// Refuses a generation by number before reading it (file name selection, §1.4).
pub fn check_generation(id: &str, version: u64, path: &str) -> Result<(), LogError> {
    match version {
        3 | 4 => Ok(()),
        v if v > 4 => Err(LogError::Unsupported(newer_message(id, v, path))),
        v => Err(LogError::Unsupported(older_message(id, v, path))),
    }
}

/// Decodes a plain JSONL log. `expected_version` is the generation named by the file (the header
/// must agree); `path` names the file in refusals; `fallback_id` names the session when the
/// header has no string id.
pub fn decode_jsonl(
    bytes: &[u8],
    expected_version: u64,
    path: &str,
    fallback_id: &str,
) -> Result<DecodedLog, LogError> {
    let corrupt = |m: &str| LogError::Corrupt(format!("{m} ({path})"));
    let Some(nl) = bytes.iter().position(|b| *b == b'\n') else {
        return Err(corrupt("empty or header-less session log"));
    };
    let header_value: Value = serde_json::from_slice(&bytes[..nl])
        .map_err(|_| corrupt("corrupt session log: header line is not valid JSON"))?;
    let Some(hm) = header_value.as_object() else {
        return Err(corrupt(
            "corrupt session log: first line is not a JSON object",
        ));
    };
    // Version (and id) before any other validation: "upgrade", never "corrupt".
    let id = hm
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or(fallback_id)
        .to_string();
    if let Some(v) = hm.get("version").and_then(as_safe_u64) {
        check_generation(&id, v, path)?;
        if v != expected_version {
            return Err(corrupt(&format!(
                "corrupt session log: header version {v} does not match the file generation v{expected_version}"
            )));
        }
    }
    let mut header = SessionHeader::from_json(&header_value).map_err(|m| corrupt(&m))?;

    // Split into complete lines (a last line without '\n' is a torn tail), parse them in
    // parallel, then admit envelopes in order.
    let body = &bytes[nl + 1..];
    let mut lines: Vec<(usize, usize)> = Vec::new(); // (start, end) offsets into `bytes`
    let mut start = nl + 1;
    for (i, b) in body.iter().enumerate() {
        if *b == b'\n' {
            lines.push((start, nl + 1 + i));
            start = nl + 2 + i;
        }
    }
    let mut torn = start < bytes.len();
    let parsed = parse_lines(bytes, &lines);
    let mut events = Vec::with_capacity(lines.len());
    let mut committed_len = nl + 1;
    for (value, (_, end)) in parsed.into_iter().zip(&lines) {
        let seq = events.len() as u64;
        match value.and_then(|v| Event::from_json(v, seq)) {
            Ok(ev) => {
                events.push(ev);
                committed_len = end + 1;
            }
            Err(reason) => {
                // A broken row is a torn tail only if no later row decodes as a turn/end.
                if later_turn_end(&bytes[end + 1..]) {
                    return Err(corrupt(&format!(
                        "corrupt session log: event {seq} is malformed ({reason}) and a later turn/end was committed"
                    )));
                }
                torn = true;
                break;
            }
        }
    }
    let source_version = header.version;
    if source_version == 3 {
        events = crate::migrate::v3_to_v4(&header, events).map_err(|e| e.at(path))?;
        header.version = 4;
    }
    Ok(DecodedLog {
        header,
        events,
        source_version,
        committed_len,
        torn,
    })
}

/// Parses lines into JSON values, on up to 4 threads for large logs.
fn parse_lines(bytes: &[u8], lines: &[(usize, usize)]) -> Vec<Result<Value, String>> {
    let parse = |(s, e): &(usize, usize)| {
        serde_json::from_slice::<Value>(&bytes[*s..*e]).map_err(|err| format!("not JSON: {err}"))
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4);
    if threads < 2 || lines.len() < 2048 {
        return lines.iter().map(parse).collect();
    }
    let chunk = lines.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .map(|part| {
                (
                    part.len(),
                    scope.spawn(move || part.iter().map(parse).collect::<Vec<_>>()),
                )
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|(n, h)| {
                h.join()
                    .unwrap_or_else(|_| vec![Err("parser thread panicked".to_string()); n])
            })
            .collect()
    })
}

fn later_turn_end(rest: &[u8]) -> bool {
    rest.split(|b| *b == b'\n').any(|line| {
        serde_json::from_slice::<Value>(line).ok().is_some_and(|v| {
            v.get("type").and_then(Value::as_str) == Some("turn/end") && v.get("data").is_some()
        })
    })
}

/// Serializes a whole log (header line + one line per event), as the writer does.
pub fn encode_jsonl(header: &SessionHeader, events: &[std::sync::Arc<Event>]) -> Vec<u8> {
    let mut out = header.to_json_line().into_bytes();
    out.push(b'\n');
    for e in events {
        out.extend_from_slice(e.to_json_line().as_bytes());
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = r#"{"type":"session","version":4,"id":"s1","createdAt":1,"isSeeded":false,"delegationDepth":0}"#;

    #[test]
    fn refuses_newer_and_older_by_version_first() {
        let bytes = br#"{"type":"session","version":5,"id":"s1","whatever":true}
"#;
        let e = decode_jsonl(bytes, 5, "/x/session.v5.jsonl", "s1").unwrap_err();
        assert!(
            matches!(&e, LogError::Unsupported(m) if m.contains("newer harness") && m.contains("/x/session.v5.jsonl")),
            "{e}"
        );
        let bytes = br#"{"type":"session","version":2,"id":"s1"}
"#;
        let e = decode_jsonl(bytes, 2, "/p", "s1").unwrap_err();
        assert!(
            matches!(&e, LogError::Unsupported(m) if m.contains("older than the supported v3")),
            "{e}"
        );
    }

    #[test]
    fn header_errors() {
        assert!(
            matches!(decode_jsonl(b"", 4, "p", "s"), Err(LogError::Corrupt(m)) if m.starts_with("empty or header-less"))
        );
        assert!(
            matches!(decode_jsonl(b"{x\n", 4, "p", "s"), Err(LogError::Corrupt(m)) if m.contains("not valid JSON"))
        );
        assert!(
            matches!(decode_jsonl(b"[1]\n", 4, "p", "s"), Err(LogError::Corrupt(m)) if m.contains("not a JSON object"))
        );
        let wrong = format!("{}\n", H.replace("\"version\":4", "\"version\":3"));
        assert!(matches!(
            decode_jsonl(wrong.as_bytes(), 4, "p", "s"),
            Err(LogError::Corrupt(_))
        ));
    }

    #[test]
    fn torn_and_corrupt_rows() {
        let row0 = r#"{"type":"turn/start","data":{"turn":1},"seq":0,"time":1}"#;
        let end = r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}},"seq":2,"time":1}"#;
        // missing newline on the last line: torn
        let b = format!("{H}\n{row0}\n{{\"type\":\"turn/e");
        let d = decode_jsonl(b.as_bytes(), 4, "p", "s").unwrap();
        assert!(d.torn);
        assert_eq!(d.events.len(), 1);
        assert_eq!(d.committed_len, H.len() + 1 + row0.len() + 1);
        // broken complete row, nothing after: torn
        let b = format!("{H}\n{row0}\nnot json\n");
        assert!(decode_jsonl(b.as_bytes(), 4, "p", "s").unwrap().torn);
        // broken row followed by a turn/end: corrupt
        let b = format!("{H}\n{row0}\nnot json\n{end}\n");
        assert!(matches!(
            decode_jsonl(b.as_bytes(), 4, "p", "s"),
            Err(LogError::Corrupt(_))
        ));
    }

    #[test]
    fn large_logs_parse_in_parallel_with_the_same_tail_rules() {
        let mut b = format!("{H}\n");
        for i in 0..3000 {
            if i == 2500 {
                b.push_str(
                    "{\"type\":\"dsh/x\",\"data\":{},\"seq\":2500,\"time\":0,\"bogus\":1}\n",
                );
            } else {
                b.push_str(&format!("{{\"type\":\"dsh/x\",\"data\":{{}},\"ignorable\":true,\"seq\":{i},\"time\":0}}\n"));
            }
        }
        let d = decode_jsonl(b.as_bytes(), 4, "p", "s").unwrap();
        assert_eq!(d.events.len(), 2500);
        assert!(d.torn);
        b.push_str(r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}},"seq":3000,"time":1}"#);
        b.push('\n');
        assert!(matches!(
            decode_jsonl(b.as_bytes(), 4, "p", "s"),
            Err(LogError::Corrupt(_))
        ));
    }
}
