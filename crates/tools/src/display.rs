//! How a call looks to a person: what a tool is given to describe a call ([`DisplayInput`]) and
//! the generic display of tools that do not describe themselves ([`generic_display`]).
//!
//! A tool fills in a [`ToolDisplay`] (from `dsh-protocol`) in [`crate::Tool::display`]; front
//! ends render the display and never match tool names or argument keys. The display is derived
//! from the logged call and result only, so a resumed session shows its history the same way.

use dsh_protocol::{OutputSummary, ToolDisplay, ToolKind};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Characters of the generic subject (the compact arguments) before it is cut.
pub const GENERIC_SUBJECT_CHARS: usize = 200;
/// Lines of output the generic display keeps.
pub const GENERIC_OUTPUT_LINES: usize = 3;

/// A call to describe: the tool name, the raw arguments and, once the call ended, its result.
#[derive(Clone, Copy, Debug)]
pub struct DisplayInput<'a> {
    /// The name the tool was called by.
    pub name: &'a str,
    /// The raw argument string, as the model wrote it (and the log keeps it).
    pub arguments: &'a str,
    /// The result, once the call ended.
    pub result: Option<DisplayResult<'a>>,
}

/// The result of a call, as a display sees it.
#[derive(Clone, Copy, Debug)]
pub struct DisplayResult<'a> {
    /// The model-visible text.
    pub text: &'a str,
    /// Whether the result is an error.
    pub is_error: bool,
    /// The error code, for errors.
    pub error_code: Option<&'a str>,
    /// The presentation facts the tool returned (`tool/result.meta`).
    pub meta: Option<&'a Value>,
}

impl<'a> DisplayInput<'a> {
    /// A call of `name` with `arguments`, not ended yet.
    pub fn new(name: &'a str, arguments: &'a str) -> Self {
        DisplayInput {
            name,
            arguments,
            result: None,
        }
    }

    /// Builder: the call ended with `result`.
    pub fn with_result(mut self, result: DisplayResult<'a>) -> Self {
        self.result = Some(result);
        self
    }

    /// The arguments as JSON (`Null` when they are not JSON).
    pub fn args(&self) -> Value {
        serde_json::from_str(self.arguments).unwrap_or(Value::Null)
    }

    /// The arguments deserialised into `T` (`None` when they do not fit: the display of a
    /// malformed call falls back to what it can show).
    pub fn parse<T: DeserializeOwned>(&self) -> Option<T> {
        serde_json::from_str(self.arguments).ok()
    }

    /// The result when the call ended and succeeded.
    pub fn succeeded(&self) -> Option<&DisplayResult<'a>> {
        self.result.as_ref().filter(|r| !r.is_error)
    }

    /// The result's meta, when there is one.
    pub fn meta(&self) -> Option<&'a Value> {
        self.result.and_then(|r| r.meta)
    }

    /// Field `key` of the result's meta.
    pub fn meta_field(&self, key: &str) -> Option<&'a Value> {
        self.meta().and_then(|m| m.get(key))
    }
}

impl<'a> DisplayResult<'a> {
    /// A successful result with `text`.
    pub fn ok(text: &'a str) -> Self {
        DisplayResult {
            text,
            is_error: false,
            error_code: None,
            meta: None,
        }
    }

    /// A failed result with `text` and `code`.
    pub fn error(text: &'a str, code: Option<&'a str>) -> Self {
        DisplayResult {
            text,
            is_error: true,
            error_code: code,
            meta: None,
        }
    }

    /// Builder: the result's meta.
    pub fn with_meta(mut self, meta: Option<&'a Value>) -> Self {
        self.meta = meta;
        self
    }
}

/// The display of a tool that does not describe itself (an MCP or plugin tool, or a tool no
/// longer registered when a session is resumed): kind `other`, the tool name as title, the
/// arguments as one compact line, and the head of a successful result.
pub fn generic_display(input: &DisplayInput<'_>) -> ToolDisplay {
    let mut display = ToolDisplay::new(ToolKind::Other, input.name);
    display.subject = compact_arguments(input.arguments, GENERIC_SUBJECT_CHARS);
    if let Some(r) = input.succeeded() {
        display.output = Some(output_head(r.text, GENERIC_OUTPUT_LINES));
    }
    display
}

/// `arguments` as one line of compact JSON, cut to `max` characters (`None` for no arguments
/// or an empty object).
pub fn compact_arguments(arguments: &str, max: usize) -> Option<String> {
    let line = match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Null) => return None,
        Ok(Value::Object(m)) if m.is_empty() => return None,
        Ok(v) => v.to_string(),
        Err(_) if arguments.trim().is_empty() => return None,
        Err(_) => arguments.split_whitespace().collect::<Vec<_>>().join(" "),
    };
    Some(truncate_chars(&line, max))
}

/// `s` cut to `max` characters, ending in `…` when cut.
pub fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((i, _)) => {
            let mut out = s[..i].trim_end().to_owned();
            out.push('…');
            out
        }
    }
}

/// The summary of `text` keeping its first `n` lines (with the count of lines; `truncated`
/// when lines were left out).
pub fn output_head(text: &str, n: usize) -> OutputSummary {
    let trimmed = text.trim_end_matches('\n');
    let mut lines = trimmed.split('\n');
    let head: Vec<&str> = lines.by_ref().take(n).collect();
    let more = lines.next().is_some();
    OutputSummary {
        text: if trimmed.is_empty() {
            String::new()
        } else {
            head.join("\n")
        },
        lines: Some(line_count(text)),
        truncated: more,
        ..Default::default()
    }
}

/// The summary of `text` keeping its last `n` lines, found from the end (a 10 MB output costs
/// only what is kept); `tail` is set and `truncated` when lines were left out.
pub fn output_tail(text: &str, n: usize) -> OutputSummary {
    let trimmed = text.trim_end_matches('\n');
    let mut tail: Vec<&str> = trimmed.rsplit('\n').take(n + 1).collect();
    let more = tail.len() > n;
    if more {
        tail.pop();
    }
    tail.reverse();
    OutputSummary {
        text: tail.join("\n"),
        bytes: Some(text.len() as u64),
        truncated: more,
        tail: true,
        ..Default::default()
    }
}

/// Lines of `text` (a final line without a newline counts).
pub fn line_count(text: &str) -> u64 {
    text.lines().count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_generic_display_is_the_name_and_the_compact_arguments() {
        let d = generic_display(&DisplayInput::new(
            "lookup",
            "{\n  \"id\": 7,\n  \"deep\": {\"a\": [1, 2]}\n}",
        ));
        assert_eq!(d.kind, ToolKind::Other);
        assert_eq!(d.title, "lookup");
        assert_eq!(d.subject.as_deref(), Some(r#"{"id":7,"deep":{"a":[1,2]}}"#));
        assert!(d.output.is_none());
        assert_eq!(generic_display(&DisplayInput::new("x", "{}")).subject, None);
        assert_eq!(
            generic_display(&DisplayInput::new("x", "not\njson"))
                .subject
                .as_deref(),
            Some("not json")
        );
        let long = json!({ "q": "y".repeat(500) }).to_string();
        let s = generic_display(&DisplayInput::new("x", &long))
            .subject
            .unwrap();
        assert_eq!(s.chars().count(), GENERIC_SUBJECT_CHARS + 1);
        assert!(s.ends_with('…'));
    }

    #[test]
    fn the_generic_display_keeps_the_head_of_a_successful_result() {
        let text = "a\nb\nc\nd\n";
        let ended = DisplayInput::new("x", "{}").with_result(DisplayResult::ok(text));
        let out = generic_display(&ended).output.unwrap();
        assert_eq!(out.text, "a\nb\nc");
        assert!(out.truncated);
        assert_eq!(out.lines, Some(4));
        assert_eq!(out.bytes, None);
        let failed =
            DisplayInput::new("x", "{}").with_result(DisplayResult::error("Error: no", Some("E")));
        assert!(generic_display(&failed).output.is_none());
    }

    #[test]
    fn the_tail_is_found_from_the_end() {
        let out = output_tail("1\n2\n3\n4\n", 2);
        assert_eq!(out.text, "3\n4");
        assert!(out.truncated && out.tail);
        let all = output_tail("1\n2", 2);
        assert_eq!(all.text, "1\n2");
        assert!(!all.truncated);
    }
}
