//! Running one command hook: JSON on stdin, a deadline, the process group killed on timeout,
//! output capped; then the exit code and stdout read as the protocol says.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::{Dialect, HookEvent};

/// Most bytes kept of each of stdout and stderr.
pub const MAX_OUTPUT: usize = 1024 * 1024;

/// How a hook process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It was killed by a signal.
    Signal,
    /// It passed its deadline and its process group was killed.
    TimedOut,
    /// It could not be started.
    SpawnFailed(String),
}

/// What one run produced.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// How it ended.
    pub exit: Exit,
    /// Its stdout (lossy UTF-8, capped).
    pub stdout: String,
    /// Its stderr (lossy UTF-8, capped).
    pub stderr: String,
}

fn scrubbed(key: &str) -> bool {
    let k = key.to_ascii_uppercase();
    k.ends_with("_API_KEY") || k.contains("TOKEN") || k.contains("SECRET") || k.contains("PASSWORD")
}

async fn read_capped(mut r: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = MAX_OUTPUT.saturating_sub(buf.len());
                buf.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Runs `command` with `sh -c` in `cwd`, `payload` on stdin, within `timeout`. The environment
/// loses API keys, tokens and secrets and gains `CLAUDE_PROJECT_DIR` and `DSH_PROJECT_DIR`.
pub async fn run(
    command: &str,
    cwd: &Path,
    project: &Path,
    payload: &[u8],
    timeout: Duration,
) -> RunOutput {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    for (k, _) in std::env::vars_os() {
        if scrubbed(&k.to_string_lossy()) {
            cmd.env_remove(k);
        }
    }
    cmd.env("CLAUDE_PROJECT_DIR", project)
        .env("DSH_PROJECT_DIR", project)
        .env("DSH_HOOK", "1");
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return RunOutput {
                exit: Exit::SpawnFailed(e.to_string()),
                stdout: String::new(),
                stderr: String::new(),
            };
        }
    };
    let pid = child.id();
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let payload = payload.to_vec();
    let work = async move {
        let feed = async move {
            if let Some(mut s) = stdin {
                // A hook that never reads stdin must not block us: errors are ignored.
                let _ = s.write_all(&payload).await;
                let _ = s.shutdown().await;
            }
        };
        let out = async move {
            match stdout {
                Some(s) => read_capped(s).await,
                None => String::new(),
            }
        };
        let err = async move {
            match stderr {
                Some(s) => read_capped(s).await,
                None => String::new(),
            }
        };
        let ((), out, err, status) = tokio::join!(feed, out, err, child.wait());
        (out, err, status)
    };
    match tokio::time::timeout(timeout, work).await {
        Ok((stdout, stderr, status)) => {
            let exit = match status {
                Ok(s) => s.code().map(Exit::Code).unwrap_or(Exit::Signal),
                Err(e) => Exit::SpawnFailed(e.to_string()),
            };
            RunOutput {
                exit,
                stdout,
                stderr,
            }
        }
        Err(_) => {
            if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            RunOutput {
                exit: Exit::TimedOut,
                stdout: String::new(),
                stderr: String::new(),
            }
        }
    }
}

/// A permission or block decision, strongest first when merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Decision {
    /// Deny / block.
    Block,
    /// Ask the user.
    Ask,
    /// Allow / approve.
    Allow,
}

/// What one hook said, as the protocol reads it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HookReply {
    /// Its decision, if any.
    pub decision: Option<Decision>,
    /// Why.
    pub reason: Option<String>,
    /// Context for the model.
    pub context: Option<String>,
    /// Replacement tool input (PreToolUse).
    pub updated_input: Option<Value>,
    /// `continue: false` was given (parsed for the audit log, not honoured, as upstream).
    pub stop: bool,
}

/// Why a hook run's output is ignored (logged after "hook ").
#[derive(Debug, thiserror::Error)]
pub enum Ignored {
    /// Exit 0 with stdout starting `{` that is not JSON.
    #[error("stdout starts with `{{` but is not JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// An exit code other than 0 and 2.
    #[error("exited with code {code} (ignored): {stderr}")]
    Exit {
        /// The code.
        code: i32,
        /// Stderr, cut ([`summary`]).
        stderr: String,
    },
    /// Killed by a signal.
    #[error("killed by a signal (ignored)")]
    Signal,
    /// Over its timeout.
    #[error("timed out and was killed (ignored)")]
    TimedOut,
    /// The command could not be started.
    #[error("could not start: {0}")]
    Spawn(String),
}

/// Reads a run: exit 2 blocks with stderr as the reason; exit 0 with stdout starting `{` is the
/// JSON protocol; plain stdout of a Codex `SessionStart` / `UserPromptSubmit` hook is context.
/// Anything else is ignored (`Err` says why, for the log).
pub fn interpret(
    event: HookEvent,
    dialect: Dialect,
    out: &RunOutput,
) -> Result<HookReply, Ignored> {
    match &out.exit {
        Exit::Code(2) => Ok(HookReply {
            decision: Some(Decision::Block),
            reason: Some(out.stderr.trim().to_owned()).filter(|s| !s.is_empty()),
            ..HookReply::default()
        }),
        Exit::Code(0) => {
            let text = out.stdout.trim();
            if text.starts_with('{') {
                let v: Value = serde_json::from_str(text).map_err(Ignored::Json)?;
                return Ok(json_reply(event, &v));
            }
            let plain_context = dialect == Dialect::Codex
                && matches!(event, HookEvent::SessionStart | HookEvent::UserPromptSubmit);
            Ok(HookReply {
                context: (plain_context && !text.is_empty()).then(|| text.to_owned()),
                ..HookReply::default()
            })
        }
        Exit::Code(c) => Err(Ignored::Exit {
            code: *c,
            stderr: summary(&out.stderr),
        }),
        Exit::Signal => Err(Ignored::Signal),
        Exit::TimedOut => Err(Ignored::TimedOut),
        Exit::SpawnFailed(e) => Err(Ignored::Spawn(e.clone())),
    }
}

/// Stderr cut to 500 characters plus `…`.
pub fn summary(stderr: &str) -> String {
    let t = stderr.trim();
    if t.chars().count() <= 500 {
        return t.to_owned();
    }
    let mut s: String = t.chars().take(500).collect();
    s.push('…');
    s
}

fn json_reply(event: HookEvent, v: &Value) -> HookReply {
    let s = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let mut reply = HookReply {
        decision: match v.get("decision").and_then(Value::as_str) {
            Some("block") => Some(Decision::Block),
            Some("approve") => Some(Decision::Allow),
            _ => None,
        },
        reason: s(v.get("reason")),
        stop: v.get("continue").and_then(Value::as_bool) == Some(false),
        ..HookReply::default()
    };
    if let Some(h) = v.get("hookSpecificOutput")
        && h.get("hookEventName").and_then(Value::as_str) == Some(event.as_str())
    {
        if let Some(d) = h.get("permissionDecision").and_then(Value::as_str) {
            reply.decision = match d {
                "deny" => Some(Decision::Block),
                "ask" => Some(Decision::Ask),
                "allow" => Some(Decision::Allow),
                _ => reply.decision,
            };
        }
        if let Some(r) = s(h.get("permissionDecisionReason")) {
            reply.reason = Some(r);
        }
        reply.context = s(h.get("additionalContext"));
        reply.updated_input = h.get("updatedInput").filter(|u| u.is_object()).cloned();
    }
    reply
}

/// Several replies merged: the strongest decision wins (block > ask > allow), the reasons of
/// the winners are joined with a blank line, contexts accumulate, the last `updatedInput` of a
/// non-blocking reply is kept.
pub fn merge(replies: &[HookReply]) -> HookReply {
    let decision = replies.iter().filter_map(|r| r.decision).min();
    let reasons: Vec<&str> = replies
        .iter()
        .filter(|r| r.decision.is_some() && r.decision == decision)
        .filter_map(|r| r.reason.as_deref())
        .collect();
    let contexts: Vec<&str> = replies
        .iter()
        .filter_map(|r| r.context.as_deref())
        .collect();
    HookReply {
        decision,
        reason: (!reasons.is_empty()).then(|| reasons.join("\n\n")),
        context: (!contexts.is_empty()).then(|| contexts.join("\n\n")),
        updated_input: replies
            .iter()
            .filter(|r| r.decision != Some(Decision::Block))
            .rev()
            .find_map(|r| r.updated_input.clone()),
        stop: replies.iter().any(|r| r.stop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(code: i32, stdout: &str, stderr: &str) -> RunOutput {
        RunOutput {
            exit: Exit::Code(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn exit_codes_and_json_are_read_as_the_protocol_says() {
        let r = interpret(
            HookEvent::PreToolUse,
            Dialect::ClaudeCode,
            &out(2, "", "no rm\n"),
        )
        .unwrap();
        assert_eq!(r.decision, Some(Decision::Block));
        assert_eq!(r.reason.as_deref(), Some("no rm"));
        assert!(interpret(HookEvent::PreToolUse, Dialect::ClaudeCode, &out(1, "", "x")).is_err());
        assert!(
            interpret(
                HookEvent::PreToolUse,
                Dialect::ClaudeCode,
                &out(0, "{garbage", "")
            )
            .is_err()
        );
        let j = r#"{"decision":"approve","hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"why","updatedInput":{"a":1}}}"#;
        let r = interpret(HookEvent::PreToolUse, Dialect::ClaudeCode, &out(0, j, "")).unwrap();
        assert_eq!(r.decision, Some(Decision::Block));
        assert_eq!(r.reason.as_deref(), Some("why"));
        // hookSpecificOutput for another event is not honoured.
        let r = interpret(HookEvent::PostToolUse, Dialect::ClaudeCode, &out(0, j, "")).unwrap();
        assert_eq!(r.decision, Some(Decision::Allow));
        let r = interpret(
            HookEvent::UserPromptSubmit,
            Dialect::Codex,
            &out(0, "ctx\n", ""),
        )
        .unwrap();
        assert_eq!(r.context.as_deref(), Some("ctx"));
        let r = interpret(
            HookEvent::UserPromptSubmit,
            Dialect::ClaudeCode,
            &out(0, "ctx\n", ""),
        )
        .unwrap();
        assert_eq!(r.context, None);
    }

    #[test]
    fn merging_prefers_block_then_ask() {
        let a = HookReply {
            decision: Some(Decision::Allow),
            reason: Some("a".into()),
            ..Default::default()
        };
        let k = HookReply {
            decision: Some(Decision::Ask),
            reason: Some("k".into()),
            context: Some("c1".into()),
            ..Default::default()
        };
        let b1 = HookReply {
            decision: Some(Decision::Block),
            reason: Some("b1".into()),
            ..Default::default()
        };
        let b2 = HookReply {
            decision: Some(Decision::Block),
            reason: Some("b2".into()),
            context: Some("c2".into()),
            ..Default::default()
        };
        let m = merge(&[a.clone(), k.clone(), b1, b2]);
        assert_eq!(m.decision, Some(Decision::Block));
        assert_eq!(m.reason.as_deref(), Some("b1\n\nb2"));
        assert_eq!(m.context.as_deref(), Some("c1\n\nc2"));
        assert_eq!(merge(&[a, k]).decision, Some(Decision::Ask));
    }
}
