//! A task as submitted: one JSON object per line of a JSONL file.

use dsh_protocol::Effort;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One task: what to ask and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpec {
    /// The prompt of the task's first turn.
    pub prompt: String,
    /// The repository: a local path or a git URL (cloned per task).
    pub repo: String,
    /// The commit, branch or tag to check out (default: the clone's HEAD).
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    /// The model (`dsh exec --model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The reasoning effort (`dsh exec --effort`; the protocol's type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    /// Limits of a run.
    #[serde(default, skip_serializing_if = "Limits::is_empty")]
    pub limits: Limits,
}

/// Limits of a task's run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Wall-clock seconds an attempt may run before the worker stops it (SIGTERM: the turn is
    /// interrupted and saved) and records it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u32>,
}

impl Limits {
    /// No limit set.
    pub fn is_empty(&self) -> bool {
        self.timeout_seconds.is_none()
    }
}

/// A line of a task file that is not a task.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {}{problem}", field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
pub struct SpecError {
    /// The line (1-based).
    pub line: usize,
    /// The field at fault, when one is.
    pub field: Option<String>,
    /// What is wrong.
    pub problem: String,
}

const FIELDS: &str = "prompt, repo, ref, model, effort, limits";

/// Parses a task file: one JSON object per line; blank lines are skipped. The first bad line
/// fails the whole file, naming its line and field.
///
/// # Errors
/// [`SpecError`] for the first line that is not a task.
pub fn parse_jsonl(text: &str) -> Result<Vec<TaskSpec>, SpecError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse_line(i + 1, line)?);
    }
    Ok(out)
}

fn parse_line(line: usize, text: &str) -> Result<TaskSpec, SpecError> {
    let err = |field: Option<&str>, problem: String| SpecError {
        line,
        field: field.map(str::to_owned),
        problem,
    };
    let value: Value =
        serde_json::from_str(text).map_err(|e| err(None, format!("not JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(err(None, "not a JSON object".into()));
    };
    if let Some(k) = obj
        .keys()
        .find(|k| !["prompt", "repo", "ref", "model", "effort", "limits"].contains(&k.as_str()))
    {
        return Err(err(Some(k), format!("unknown field (fields: {FIELDS})")));
    }
    let text_field = |obj: &Map<String, Value>, name: &str, required: bool| match obj.get(name) {
        None | Some(Value::Null) if required => Err(err(Some(name), "missing".into())),
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Err(err(Some(name), "empty".into())),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(err(
            Some(name),
            format!("must be a string, not {}", kind(other)),
        )),
    };
    let prompt = text_field(&obj, "prompt", true)?.unwrap_or_default();
    let repo = text_field(&obj, "repo", true)?.unwrap_or_default();
    let git_ref = text_field(&obj, "ref", false)?;
    let model = text_field(&obj, "model", false)?;
    let effort = match text_field(&obj, "effort", false)? {
        None => None,
        Some(e) => Some(Effort::parse(&e).ok_or_else(|| {
            err(
                Some("effort"),
                format!(
                    "`{e}` is not one of {}",
                    Effort::ALL.map(Effort::as_str).join(", ")
                ),
            )
        })?),
    };
    let limits = match obj.get("limits") {
        None | Some(Value::Null) => Limits::default(),
        Some(Value::Object(l)) => {
            if let Some(k) = l.keys().find(|k| k.as_str() != "timeoutSeconds") {
                return Err(err(
                    Some(&format!("limits.{k}")),
                    "unknown limit (limits: timeoutSeconds)".into(),
                ));
            }
            let timeout_seconds = match l.get("timeoutSeconds") {
                None | Some(Value::Null) => None,
                Some(v) => Some(
                    v.as_u64()
                        .filter(|n| *n > 0)
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| {
                            err(
                                Some("limits.timeoutSeconds"),
                                format!("must be a positive whole number of seconds, not {v}"),
                            )
                        })?,
                ),
            };
            Limits { timeout_seconds }
        }
        Some(other) => {
            return Err(err(
                Some("limits"),
                format!("must be an object, not {}", kind(other)),
            ));
        }
    };
    Ok(TaskSpec {
        prompt,
        repo,
        git_ref,
        model,
        effort,
        limits,
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_tasks_and_skips_blank_lines() {
        let specs = parse_jsonl(
            "{\"prompt\":\"fix it\",\"repo\":\"/r\"}\n\n{\"prompt\":\"p\",\"repo\":\"https://x/y.git\",\"ref\":\"v1\",\"model\":\"m\",\"effort\":\"high\",\"limits\":{\"timeoutSeconds\":600}}\n",
        )
        .unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].git_ref, None);
        assert_eq!(specs[1].git_ref.as_deref(), Some("v1"));
        assert_eq!(specs[1].effort, Some(Effort::High));
        assert_eq!(specs[1].limits.timeout_seconds, Some(600));
        assert!(specs[0].limits.is_empty());
    }

    #[test]
    fn a_bad_line_is_named_with_its_field() {
        let cases = [
            ("{\"repo\":\"/r\"}", "line 2: field `prompt`: missing"),
            (
                "{\"prompt\":3,\"repo\":\"/r\"}",
                "line 2: field `prompt`: must be a string, not a number",
            ),
            (
                "{\"prompt\":\"p\",\"repo\":\"/r\",\"effort\":\"huge\"}",
                "line 2: field `effort`: `huge` is not one of off, low, high, max",
            ),
            (
                "{\"prompt\":\"p\",\"repo\":\"/r\",\"colour\":1}",
                "line 2: field `colour`: unknown field (fields: prompt, repo, ref, model, effort, limits)",
            ),
            ("[1]", "line 2: not a JSON object"),
            (
                "{\"prompt\":\"p\",\"repo\":\"/r\",\"limits\":{\"timeoutSeconds\":0}}",
                "line 2: field `limits.timeoutSeconds`: must be a positive whole number of seconds, not 0",
            ),
            (
                "{\"prompt\":\"p\",\"repo\":\"/r\",\"limits\":{\"turns\":3}}",
                "line 2: field `limits.turns`: unknown limit (limits: timeoutSeconds)",
            ),
            (
                "{\"prompt\":\"p\",\"repo\":\"  \"}",
                "line 2: field `repo`: empty",
            ),
        ];
        for (bad, want) in cases {
            let text = format!("{{\"prompt\":\"ok\",\"repo\":\"/r\"}}\n{bad}\n");
            assert_eq!(parse_jsonl(&text).unwrap_err().to_string(), want, "{bad}");
        }
        let e = parse_jsonl("{\"prompt\":\"p\",\"repo\"\n").unwrap_err();
        assert!(e.to_string().starts_with("line 1: not JSON: "), "{e}");
    }
}
