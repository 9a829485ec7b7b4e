//! How a `bash` call looks to a person: the command, and once it ended how it exited, how long
//! it ran, how much it printed and its last lines.

use dsh_tools::{DisplayInput, ExitStatus, ToolDisplay, ToolKind};
use serde::Deserialize;
use serde_json::Value;

use crate::tool::NAME;

/// Output lines a card keeps (the last ones).
pub const TAIL_LINES: usize = 6;

/// What the display reads of the arguments (leniently: a malformed call shows what it can).
#[derive(Deserialize)]
struct Shown {
    command: Option<String>,
}

/// The display of a `bash` call.
pub fn display(call: &DisplayInput<'_>) -> ToolDisplay {
    let mut d = ToolDisplay::new(ToolKind::Shell, NAME);
    d.subject = call.parse::<Shown>().and_then(|s| s.command);
    let Some(r) = call.succeeded() else {
        return d;
    };
    let mut out = dsh_tools::display::output_tail(r.text, TAIL_LINES);
    let meta = |key: &str| call.meta_field(key);
    let bytes: u64 = ["stdoutBytes", "stderrBytes"]
        .iter()
        .filter_map(|k| meta(k).and_then(Value::as_u64))
        .sum();
    out.bytes = (bytes > 0).then_some(bytes);
    out.duration_ms = meta("durationMs").and_then(Value::as_u64);
    out.exit = if meta("timedOut").and_then(Value::as_bool) == Some(true) {
        Some(ExitStatus::TimedOut)
    } else if let Some(signal) = meta("signal").and_then(Value::as_str) {
        Some(ExitStatus::Signaled {
            signal: signal.to_owned(),
        })
    } else {
        meta("exitCode")
            .and_then(Value::as_i64)
            .and_then(|c| i32::try_from(c).ok())
            .map(|code| ExitStatus::Exited { code })
    };
    d.with_output(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_tools::DisplayResult;
    use serde_json::json;

    #[test]
    fn a_call_shows_its_command_then_how_it_ended_and_its_last_lines() {
        let args = json!({"command": "cargo test", "description": "Test"}).to_string();
        let call = DisplayInput::new(NAME, &args);
        let running = display(&call);
        assert_eq!(running.kind, ToolKind::Shell);
        assert_eq!(running.title, "bash");
        assert_eq!(running.subject.as_deref(), Some("cargo test"));
        assert!(running.output.is_none());

        let text: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let meta = json!({"exitCode": 0, "durationMs": 1234, "stdoutBytes": 130, "stderrBytes": 2});
        let ended = display(&call.with_result(DisplayResult::ok(&text).with_meta(Some(&meta))));
        let out = ended.output.unwrap();
        assert_eq!(out.exit, Some(ExitStatus::Exited { code: 0 }));
        assert_eq!(out.duration_ms, Some(1234));
        assert_eq!(out.bytes, Some(132));
        assert_eq!(
            out.text,
            "line 15\nline 16\nline 17\nline 18\nline 19\nline 20"
        );
        assert!(out.truncated && out.tail);

        let killed = json!({"exitCode": null, "signal": "SIGKILL", "timedOut": false});
        let out = display(&call.with_result(DisplayResult::ok("").with_meta(Some(&killed))))
            .output
            .unwrap();
        assert_eq!(
            out.exit,
            Some(ExitStatus::Signaled {
                signal: "SIGKILL".into()
            })
        );
        let timed_out = json!({"signal": "SIGKILL", "timedOut": true});
        let out = display(&call.with_result(DisplayResult::ok("").with_meta(Some(&timed_out))))
            .output
            .unwrap();
        assert_eq!(out.exit, Some(ExitStatus::TimedOut));

        let failed = display(&call.with_result(DisplayResult::error("Error: x", Some("E"))));
        assert!(failed.output.is_none());
        let malformed = display(&DisplayInput::new(NAME, "{\"command\": 3}"));
        assert_eq!(malformed.subject, None);
    }
}
