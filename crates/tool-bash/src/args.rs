//! The `bash` tool's arguments: schema and the checks beyond it (BA-3, BA-8).

use std::path::{Path, PathBuf};
use std::time::Duration;

use dsh_shell::limits;
use serde_json::{Value, json};

/// The parameter schema sent to the model (`docs/behaviours.md` §19, without
/// `run_in_background`: dsh has no background jobs yet), with the sandbox escalation
/// fields `sandbox_permissions` and `justification`.
pub fn parameters() -> Value {
    with_escalation(base_parameters())
}

fn base_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "description": {
                "type": "string",
                "description": "What it does in 5-10 words, shown to the user."
            },
            "timeoutMs": {
                "type": "number",
                "description": "Timeout in ms (default 120000, at most 600000)."
            },
            "workdir": {
                "type": "string",
                "description": "Working directory (default: the session's; relative to it)."
            }
        },
        "required": ["command", "description"]
    })
}

/// Why the arguments of a call were refused. The text of each (its `Display`) is the
/// model-actionable `INVALID_ARGS` message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BashArgsError {
    /// The arguments are not a JSON object.
    #[error("invalid arguments: expected an object, got {got}")]
    NotAnObject {
        /// The value, compact and bounded.
        got: String,
    },
    /// `command` or `description` is missing, not a string, or blank.
    #[error("invalid {field}: expected a non-empty string")]
    Blank {
        /// The field.
        field: &'static str,
    },
    /// `timeoutMs` is not a positive finite number.
    #[error("invalid timeoutMs: expected a positive number, got {got}")]
    BadTimeout {
        /// The value, compact and bounded.
        got: String,
    },
    /// `workdir` is not a string.
    #[error("invalid workdir: expected a string, got {got}")]
    BadWorkdir {
        /// The value, compact and bounded.
        got: String,
    },
    /// `run_in_background` asked for a background job.
    #[error(
        "invalid run_in_background: background jobs are not available; run the command in the foreground"
    )]
    Background,
}

/// Validated arguments of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashArgs {
    /// The command, non-blank.
    pub command: String,
    /// The UI label, non-blank.
    pub description: String,
    /// The effective timeout (default or requested, clamped to the maximum).
    pub timeout: Duration,
    /// The requested working directory, unresolved (`None` = the session's).
    pub workdir: Option<String>,
}

impl BashArgs {
    /// Parses and checks `args`. Every message is a model-actionable `INVALID_ARGS` text.
    pub fn parse(args: &Value) -> Result<Self, BashArgsError> {
        let Some(object) = args.as_object() else {
            return Err(BashArgsError::NotAnObject { got: compact(args) });
        };
        let command = non_blank(object.get("command"), "command")?;
        let description = non_blank(object.get("description"), "description")?;
        let timeout = match object.get("timeoutMs") {
            None | Some(Value::Null) => limits::DEFAULT_TIMEOUT,
            Some(value) => parse_timeout(value)?,
        };
        let workdir = match object.get("workdir") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(BashArgsError::BadWorkdir {
                    got: compact(other),
                });
            }
        };
        if let Some(background) = object.get("run_in_background")
            && background != &Value::Bool(false)
            && !background.is_null()
        {
            return Err(BashArgsError::Background);
        }
        Ok(Self {
            command,
            description,
            timeout,
            workdir,
        })
    }

    /// The directory to run in: the session's `cwd`, or `workdir` resolved against it.
    pub fn resolve_workdir(&self, cwd: &Path) -> PathBuf {
        match self.workdir.as_deref() {
            None | Some("") => cwd.to_path_buf(),
            Some(dir) => cwd.join(dir),
        }
    }
}

fn non_blank(value: Option<&Value>, field: &'static str) -> Result<String, BashArgsError> {
    match value {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        _ => Err(BashArgsError::Blank { field }),
    }
}

fn parse_timeout(value: &Value) -> Result<Duration, BashArgsError> {
    let bad = || BashArgsError::BadTimeout {
        got: compact(value),
    };
    let ms = value.as_f64().filter(|ms| ms.is_finite() && *ms > 0.0);
    let Some(ms) = ms else { return Err(bad()) };
    let max = limits::MAX_TIMEOUT.as_millis() as f64;
    // Clamped silently; a fraction of a millisecond rounds up so 0.5 is not zero.
    Ok(Duration::from_millis(ms.min(max).ceil() as u64))
}

/// Compact JSON of a (hostile) value, bounded so an error message stays small.
fn compact(value: &Value) -> String {
    let mut text = serde_json::to_string(value).unwrap_or_else(|_| "?".to_owned());
    if text.len() > 200 {
        let mut cut = 200;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Adds the sandbox escalation arguments (`sandbox_permissions`, `justification`).
fn with_escalation(mut schema: Value) -> Value {
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for (name, prop) in dsh_sandbox::escalation_properties() {
            props.insert(name.to_owned(), prop);
        }
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<BashArgs, BashArgsError> {
        BashArgs::parse(&v)
    }

    #[test]
    fn rejections_by_variant() {
        assert_eq!(
            parse(json!({"command": " ", "description": "x"})),
            Err(BashArgsError::Blank { field: "command" })
        );
        assert_eq!(
            parse(json!({"command": "x", "description": "d", "timeoutMs": -1})),
            Err(BashArgsError::BadTimeout { got: "-1".into() })
        );
        assert_eq!(
            parse(json!({"command": "x", "description": "d", "workdir": 3})),
            Err(BashArgsError::BadWorkdir { got: "3".into() })
        );
        assert_eq!(
            parse(json!({"command": "x", "description": "d", "run_in_background": true})),
            Err(BashArgsError::Background)
        );
        assert_eq!(
            parse(json!(null)),
            Err(BashArgsError::NotAnObject { got: "null".into() })
        );
    }

    #[test]
    fn defaults() {
        let a = parse(json!({"command": "ls", "description": "List files"})).unwrap();
        assert_eq!(a.timeout, limits::DEFAULT_TIMEOUT);
        assert_eq!(a.workdir, None);
        assert_eq!(a.resolve_workdir(Path::new("/w")), PathBuf::from("/w"));
    }

    #[test]
    fn blank_fields_are_rejected_with_the_reference_text() {
        assert_eq!(
            parse(json!({"command": "  ", "description": "x"}))
                .unwrap_err()
                .to_string(),
            "invalid command: expected a non-empty string"
        );
        assert_eq!(
            parse(json!({"command": "ls", "description": ""}))
                .unwrap_err()
                .to_string(),
            "invalid description: expected a non-empty string"
        );
        assert_eq!(
            parse(json!({"description": "x"})).unwrap_err().to_string(),
            "invalid command: expected a non-empty string"
        );
        assert_eq!(
            parse(json!({"command": 5, "description": "x"}))
                .unwrap_err()
                .to_string(),
            "invalid command: expected a non-empty string"
        );
    }

    #[test]
    fn timeouts() {
        let t = |v: Value| parse(json!({"command": "x", "description": "d", "timeoutMs": v}));
        assert_eq!(t(json!(1500)).unwrap().timeout, Duration::from_millis(1500));
        assert_eq!(t(json!(0.5)).unwrap().timeout, Duration::from_millis(1));
        assert_eq!(t(json!(1e12)).unwrap().timeout, limits::MAX_TIMEOUT);
        assert_eq!(
            t(json!(0)).unwrap_err().to_string(),
            "invalid timeoutMs: expected a positive number, got 0"
        );
        assert_eq!(
            t(json!(-5)).unwrap_err().to_string(),
            "invalid timeoutMs: expected a positive number, got -5"
        );
        assert_eq!(
            t(json!("100")).unwrap_err().to_string(),
            "invalid timeoutMs: expected a positive number, got \"100\""
        );
        assert_eq!(
            t(json!(null)).unwrap().timeout,
            limits::DEFAULT_TIMEOUT,
            "null means absent"
        );
    }

    #[test]
    fn workdir_resolution() {
        let a = parse(json!({"command": "x", "description": "d", "workdir": "sub dir/ü"})).unwrap();
        assert_eq!(
            a.resolve_workdir(Path::new("/w")),
            PathBuf::from("/w/sub dir/ü")
        );
        let a = parse(json!({"command": "x", "description": "d", "workdir": "/abs"})).unwrap();
        assert_eq!(a.resolve_workdir(Path::new("/w")), PathBuf::from("/abs"));
        assert_eq!(
            parse(json!({"command": "x", "description": "d", "workdir": 3}))
                .unwrap_err()
                .to_string(),
            "invalid workdir: expected a string, got 3"
        );
    }

    #[test]
    fn background_and_non_objects() {
        assert!(
            parse(json!({"command": "x", "description": "d", "run_in_background": true}))
                .unwrap_err()
                .to_string()
                .contains("background jobs are not available")
        );
        assert!(
            parse(json!({"command": "x", "description": "d", "run_in_background": false})).is_ok()
        );
        assert_eq!(
            parse(json!([1])).unwrap_err().to_string(),
            "invalid arguments: expected an object, got [1]"
        );
        let long = "x".repeat(1000);
        assert!(parse(json!(long)).unwrap_err().to_string().len() < 300);
    }
}
