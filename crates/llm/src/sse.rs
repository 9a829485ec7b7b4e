//! A byte-level Server-Sent Events framer shared by adapters.
//!
//! Bytes in, items out. Chunk boundaries carry no meaning: any split of the same byte stream
//! (including inside a UTF-8 sequence or between the `\r` and `\n` of a CRLF) yields the same
//! items. Line ends may be `\n`, `\r\n` or `\r`; a leading UTF-8 BOM is skipped. Comments (`:`
//! lines) are surfaced as their own item so a watchdog can tell keep-alives from data. An event
//! dispatches only on its blank-line terminator; [`SseFramer::finish`] reports an unterminated
//! tail as truncation. A size cap bounds memory on hostile input and fails cleanly.

use thiserror::Error;

/// Default cap on one event (or one line): 8 MiB (`wire-protocol.md` §6).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Line buffers up to this capacity are reused between lines; larger ones are freed.
const KEEP_LINE_CAPACITY: usize = 64 * 1024;

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when present.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field, when present.
    pub id: Option<String>,
}

/// What the framer yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseItem {
    /// A complete event (terminated by a blank line, with at least one `data:` field).
    Event(SseEvent),
    /// A comment line (`: keep-alive` yields `Comment(" keep-alive")`): never an event.
    Comment(String),
}

/// Framing failures.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SseError {
    /// A line or an event grew past the cap.
    #[error("SSE event exceeds {limit} bytes")]
    TooLarge {
        /// The configured cap.
        limit: usize,
    },
    /// A line is not valid UTF-8.
    #[error("SSE line is not valid UTF-8")]
    InvalidUtf8,
    /// The stream ended inside an event (no blank-line terminator).
    #[error("SSE stream ended inside an unterminated event")]
    Truncated,
}

/// Incremental SSE framer; see the module docs.
#[derive(Debug)]
pub struct SseFramer {
    max: usize,
    line: Vec<u8>,
    pending_cr: bool,
    at_start: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
    id: Option<String>,
    failed: Option<SseError>,
}

impl Default for SseFramer {
    fn default() -> Self {
        Self::new()
    }
}

impl SseFramer {
    /// A framer with the default 8 MiB cap.
    pub fn new() -> Self {
        Self::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A framer with a custom cap on one line and on one event's data.
    pub fn with_max_event_bytes(max: usize) -> Self {
        Self {
            max,
            line: Vec::new(),
            pending_cr: false,
            at_start: true,
            data: String::new(),
            has_data: false,
            event: None,
            id: None,
            failed: None,
        }
    }

    /// Feeds bytes; complete items are appended to `out`. After an error the framer stays failed
    /// and returns the same error.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<SseItem>) -> Result<(), SseError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.pending_cr && !bytes.is_empty() {
            self.pending_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        let result = self.push_inner(bytes, out);
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    fn push_inner(&mut self, bytes: &[u8], out: &mut Vec<SseItem>) -> Result<(), SseError> {
        let mut pos = 0;
        while pos < bytes.len() {
            let rest = &bytes[pos..];
            let Some(i) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                if self.line.len() + rest.len() > self.max {
                    return Err(SseError::TooLarge { limit: self.max });
                }
                self.line.extend_from_slice(rest);
                return Ok(());
            };
            let end = rest[i];
            if self.line.is_empty() {
                if i > self.max {
                    return Err(SseError::TooLarge { limit: self.max });
                }
                self.process_line(&rest[..i], out)?;
            } else {
                if self.line.len() + i > self.max {
                    return Err(SseError::TooLarge { limit: self.max });
                }
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&rest[..i]);
                let r = self.process_line(&line, out);
                // Keep a small buffer for the next line; give a huge one (a multi-megabyte
                // event) back instead of holding it for the rest of the stream.
                if line.capacity() <= KEEP_LINE_CAPACITY {
                    line.clear();
                    self.line = line;
                }
                r?;
            }
            pos += i + 1;
            if end == b'\r' {
                if pos < bytes.len() {
                    if bytes[pos] == b'\n' {
                        pos += 1;
                    }
                } else {
                    self.pending_cr = true;
                }
            }
        }
        Ok(())
    }

    fn process_line(&mut self, mut line: &[u8], out: &mut Vec<SseItem>) -> Result<(), SseError> {
        if self.at_start {
            self.at_start = false;
            if let Some(rest) = line.strip_prefix(BOM) {
                line = rest;
            }
        }
        if line.is_empty() {
            if self.has_data {
                out.push(SseItem::Event(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data),
                    id: self.id.take(),
                }));
            }
            self.has_data = false;
            self.data.clear();
            self.event = None;
            self.id = None;
            return Ok(());
        }
        if line[0] == b':' {
            let text = std::str::from_utf8(&line[1..]).map_err(|_| SseError::InvalidUtf8)?;
            out.push(SseItem::Comment(text.to_owned()));
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        let value = std::str::from_utf8(value).map_err(|_| SseError::InvalidUtf8)?;
        match field {
            b"data" => {
                let extra = value.len() + usize::from(self.has_data);
                if self.data.len() + extra > self.max {
                    return Err(SseError::TooLarge { limit: self.max });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            b"event" => self.event = Some(value.to_owned()),
            b"id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            _ => {} // `retry` and unknown fields are ignored.
        }
        Ok(())
    }

    /// Ends the stream: `Err(Truncated)` if bytes of an unfinished line or event are pending
    /// (for example `data: [DONE]\n` without its blank line), or the earlier error if any.
    pub fn finish(&self) -> Result<(), SseError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if !self.line.is_empty() || self.has_data || self.event.is_some() || self.id.is_some() {
            return Err(SseError::Truncated);
        }
        Ok(())
    }

    /// Whether nothing is buffered (no partial line, no pending event).
    pub fn is_idle(&self) -> bool {
        self.line.is_empty() && !self.has_data && self.event.is_none() && self.id.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(chunks: &[&[u8]]) -> (Vec<SseItem>, Result<(), SseError>) {
        let mut f = SseFramer::new();
        let mut out = Vec::new();
        for c in chunks {
            if let Err(e) = f.push(c, &mut out) {
                return (out, Err(e));
            }
        }
        let r = f.finish();
        (out, r)
    }

    fn data(s: &str) -> SseItem {
        SseItem::Event(SseEvent {
            data: s.into(),
            ..Default::default()
        })
    }

    #[test]
    fn line_ends_and_comments() {
        let (items, r) = frame(&[b": keep-alive\r\n\r\ndata: a\rdata:b\r\rdata: c\n\n"]);
        assert_eq!(r, Ok(()));
        assert_eq!(
            items,
            vec![
                SseItem::Comment(" keep-alive".into()),
                data("a\nb"),
                data("c")
            ]
        );
    }

    #[test]
    fn cr_at_chunk_boundary_then_lf() {
        let (items, r) = frame(&[b"data: x\r", b"\n\r", b"\n"]);
        assert_eq!(r, Ok(()));
        assert_eq!(items, vec![data("x")]);
    }

    #[test]
    fn bom_split_and_fields() {
        let (items, r) = frame(&[b"\xEF", b"\xBB\xBFevent: e\nid: 7\nretry: 5\nfoo\ndata\n\n"]);
        assert_eq!(r, Ok(()));
        assert_eq!(
            items,
            vec![SseItem::Event(SseEvent {
                event: Some("e".into()),
                data: String::new(),
                id: Some("7".into())
            })]
        );
    }

    #[test]
    fn unterminated_tail_is_truncation() {
        assert_eq!(frame(&[b"data: [DONE]\n"]).1, Err(SseError::Truncated));
        assert_eq!(frame(&[b"data: [DONE]"]).1, Err(SseError::Truncated));
        assert_eq!(frame(&[b"data: [DONE]\n\n"]).1, Ok(()));
        // A lone trailing CR terminates a blank line: fine.
        assert_eq!(frame(&[b"data: x\n\r"]).0, vec![data("x")]);
    }

    #[test]
    fn cap_fails_cleanly_and_stays_failed() {
        let mut f = SseFramer::with_max_event_bytes(12);
        let mut out = Vec::new();
        assert_eq!(f.push(b"data: 1234", &mut out), Ok(()));
        assert_eq!(
            f.push(b"56789", &mut out),
            Err(SseError::TooLarge { limit: 12 })
        );
        assert_eq!(
            f.push(b"\n\n", &mut out),
            Err(SseError::TooLarge { limit: 12 })
        );
        assert_eq!(f.finish(), Err(SseError::TooLarge { limit: 12 }));
        // The data of one event is capped too, even when every line fits.
        let mut f = SseFramer::with_max_event_bytes(12);
        let r = f.push(b"data:123456\ndata:123456\n", &mut out);
        assert_eq!(r, Err(SseError::TooLarge { limit: 12 }));
        assert!(out.is_empty());
    }

    #[test]
    fn utf8_split_inside_sequence() {
        let s = "data: héllo €\n\n".as_bytes();
        for cut in 0..s.len() {
            let (items, r) = frame(&[&s[..cut], &s[cut..]]);
            assert_eq!(r, Ok(()));
            assert_eq!(items, vec![data("héllo €")]);
        }
        assert_eq!(frame(&[b"data: \xff\n\n"]).1, Err(SseError::InvalidUtf8));
    }
}
