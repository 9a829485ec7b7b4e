//! A small Server-Sent Events parser for the remote client (the server's own dialect: `\n` or
//! `\r\n` line ends, `id:`, `event:`, `data:`, comments). Bytes in, events out; chunk
//! boundaries carry no meaning.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseMessage {
    /// The `event:` field.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field.
    pub id: Option<String>,
}

/// The parser; `max` bounds one line and one event.
#[derive(Debug)]
pub struct SseParser {
    buf: Vec<u8>,
    current: SseMessage,
    has_data: bool,
    max: usize,
}

/// A line or an event grew past the bound.
#[derive(Debug, thiserror::Error)]
#[error("an SSE event exceeds {0} bytes")]
pub struct TooLarge(pub usize);

impl SseParser {
    /// A parser bounding lines and events to `max` bytes.
    pub fn new(max: usize) -> Self {
        SseParser {
            buf: Vec::new(),
            current: SseMessage::default(),
            has_data: false,
            max,
        }
    }

    /// Feeds bytes; returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseMessage>, TooLarge> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(pos) = self.buf[start..].iter().position(|b| *b == b'\n') {
            let end = start + pos;
            let mut line = &self.buf[start..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let line = String::from_utf8_lossy(line).into_owned();
            start = end + 1;
            self.line(&line, &mut out);
            if self.current.data.len() > self.max {
                return Err(TooLarge(self.max));
            }
        }
        self.buf.drain(..start);
        if self.buf.len() > self.max {
            return Err(TooLarge(self.max));
        }
        Ok(out)
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseMessage>) {
        if line.is_empty() {
            let msg = std::mem::take(&mut self.current);
            if std::mem::take(&mut self.has_data) {
                out.push(msg);
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.current.event = Some(value.to_owned()),
            "id" => self.current.id = Some(value.to_owned()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn any_split_yields_the_same_events() {
        let text = b": keep-alive\n\nevent: a\nid: 4\ndata: {\"x\":1}\n\nevent: b\r\ndata: 1\r\ndata: 2\r\n\r\n";
        let whole = SseParser::new(1024).push(text).unwrap();
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[0].id.as_deref(), Some("4"));
        assert_eq!(whole[1].data, "1\n2");
        for cut in 0..text.len() {
            let mut p = SseParser::new(1024);
            let mut got = p.push(&text[..cut]).unwrap();
            got.extend(p.push(&text[cut..]).unwrap());
            assert_eq!(got, whole, "split at {cut}");
        }
        assert!(SseParser::new(8).push(b"data: 0123456789\n").is_err());
    }
}
