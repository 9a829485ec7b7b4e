//! The model-visible result text of a bash run (`docs/behaviours.md` BA-5).

use dsh_shell::{CapturedStream, ShellOutcome, SpillSkipped, Termination};

/// Text of an empty result.
pub const NO_OUTPUT: &str = "(no output)";

/// The result text of `outcome`, exactly as the reference specifies:
///
/// - the body is stdout; a non-empty stderr follows as `[stderr]\n<stderr>` (with a `\n` first
///   when the body is non-empty and does not end with one);
/// - a truncated stream is followed by `\n[output truncated; full output: <path>]`
///   (`(unavailable)` when there is no spill file) right after its own text; when the spill
///   was not written because the session's spill files reached their cap, the note says so:
///   `\n[output truncated; full output not saved: this session's spill files reached their
///   cap of <n> bytes]`;
/// - an empty body is `(no output)`;
/// - then the markers, each on its own line: `[timed out after <ms>ms]`, then
///   `[killed by signal: <SIG>]` or, for a non-zero exit, `[exit code: <n>]`.
pub fn format_result(outcome: &ShellOutcome) -> String {
    let mut body = stream_text(&outcome.stdout);
    if !outcome.stderr.is_empty() {
        if !body.is_empty() && !body.ends_with('\n') {
            body.push('\n');
        }
        body.push_str("[stderr]\n");
        body.push_str(&stream_text(&outcome.stderr));
    }
    if body.is_empty() {
        body.push_str(NO_OUTPUT);
    }
    let mut markers = Vec::new();
    if outcome.timed_out {
        markers.push(format!(
            "[timed out after {}ms]",
            outcome.timeout.as_millis()
        ));
    }
    match &outcome.termination {
        Termination::Signaled { name, .. } => markers.push(format!("[killed by signal: {name}]")),
        Termination::Exited { code } if *code != 0 => {
            markers.push(format!("[exit code: {code}]"));
        }
        Termination::Exited { .. } => {}
    }
    if !markers.is_empty() {
        if !body.ends_with('\n') {
            body.push('\n');
        }
        body.push_str(&markers.join("\n"));
    }
    body
}

/// One stream's text plus its truncation note.
fn stream_text(stream: &CapturedStream) -> String {
    let mut text = stream.text();
    if stream.truncated {
        if let Some(SpillSkipped::SessionCap { cap }) = stream.spill_skipped {
            text.push_str(&format!(
                "\n[output truncated; full output not saved: this session's spill files reached their cap of {cap} bytes]"
            ));
            return text;
        }
        let path = stream
            .spill_path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(unavailable)".to_owned());
        text.push_str(&format!("\n[output truncated; full output: {path}]"));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;

    fn stream(text: &str) -> CapturedStream {
        CapturedStream {
            tail: text.as_bytes().to_vec(),
            total_bytes: text.len() as u64,
            truncated: false,
            ..Default::default()
        }
    }

    fn outcome(stdout: &str, stderr: &str, termination: Termination) -> ShellOutcome {
        ShellOutcome {
            stdout: stream(stdout),
            stderr: stream(stderr),
            termination,
            timed_out: false,
            cancelled: false,
            timeout: Duration::from_millis(120_000),
            elapsed: Duration::ZERO,
            pid: 1,
        }
    }

    const OK: Termination = Termination::Exited { code: 0 };

    #[test]
    fn stdout_only() {
        assert_eq!(
            format_result(&outcome("dsh-sdk-proof-7391\n", "", OK)),
            "dsh-sdk-proof-7391\n"
        );
    }

    #[test]
    fn empty_is_no_output() {
        assert_eq!(format_result(&outcome("", "", OK)), "(no output)");
        assert_eq!(
            format_result(&outcome("", "", Termination::Exited { code: 3 })),
            "(no output)\n[exit code: 3]"
        );
    }

    #[test]
    fn stderr_section() {
        assert_eq!(
            format_result(&outcome("out", "err\n", OK)),
            "out\n[stderr]\nerr\n"
        );
        assert_eq!(
            format_result(&outcome("out\n", "err", OK)),
            "out\n[stderr]\nerr"
        );
        assert_eq!(format_result(&outcome("", "err", OK)), "[stderr]\nerr");
    }

    #[test]
    fn exit_code_marker() {
        assert_eq!(
            format_result(&outcome("x\n", "", Termination::Exited { code: 2 })),
            "x\n[exit code: 2]"
        );
        assert_eq!(
            format_result(&outcome("x", "boom", Termination::Exited { code: 1 })),
            "x\n[stderr]\nboom\n[exit code: 1]"
        );
    }

    #[test]
    fn timeout_and_signal_markers_in_order() {
        let mut o = outcome(
            "partial",
            "",
            Termination::Signaled {
                signal: 15,
                name: "SIGTERM".into(),
            },
        );
        o.timed_out = true;
        o.timeout = Duration::from_millis(1500);
        assert_eq!(
            format_result(&o),
            "partial\n[timed out after 1500ms]\n[killed by signal: SIGTERM]"
        );
        // A command that traps SIGTERM and exits 0 still gets the timeout marker (U52).
        let mut o = outcome("", "", OK);
        o.timed_out = true;
        o.timeout = Duration::from_millis(200);
        assert_eq!(format_result(&o), "(no output)\n[timed out after 200ms]");
    }

    #[test]
    fn session_cap_note() {
        let mut o = outcome("tail\n", "", OK);
        o.stdout.truncated = true;
        o.stdout.spill_skipped = Some(SpillSkipped::SessionCap { cap: 1000 });
        assert_eq!(
            format_result(&o),
            "tail\n\n[output truncated; full output not saved: this session's spill files reached their cap of 1000 bytes]"
        );
    }

    #[test]
    fn truncation_notes_follow_their_stream() {
        let mut o = outcome("tail-out\n", "tail-err", Termination::Exited { code: 1 });
        o.stdout.truncated = true;
        o.stdout.total_bytes = 1 << 20;
        o.stdout.spill_path = Some(PathBuf::from("/tmp/s/x.stdout"));
        o.stderr.truncated = true;
        o.stderr.total_bytes = 1 << 20;
        assert_eq!(
            format_result(&o),
            "tail-out\n\n[output truncated; full output: /tmp/s/x.stdout]\n[stderr]\n\
             tail-err\n[output truncated; full output: (unavailable)]\n[exit code: 1]"
        );
    }
}
