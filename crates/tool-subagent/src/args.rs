//! The sub-agent tools' arguments, deserialised from the (schema-validated) call.

use dsh_tools::ToolError;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The arguments as `T`. The registry validated them against the tool's schema, so this fails
/// only for a caller that skipped it: `invalid arguments: <serde's reason>`.
pub(crate) fn parse<T: DeserializeOwned>(args: &Value) -> Result<T, ToolError> {
    T::deserialize(args).map_err(|e| ToolError::invalid_args(format!("invalid arguments: {e}")))
}

/// A required non-empty string: `invalid <key>: expected a non-empty string`.
pub(crate) fn non_empty(value: Option<String>, key: &str) -> Result<String, ToolError> {
    match value {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(ToolError::invalid_args(format!(
            "invalid {key}: expected a non-empty string"
        ))),
    }
}

/// `run_in_background` as given: the schema names it only when background runs are enabled,
/// so any value can arrive and a non-boolean is refused with its own text.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum Flag {
    /// A boolean.
    Bool(bool),
    /// Anything else (refused).
    Other(Value),
}

/// `subagent` / `subagent_fork`.
#[derive(Deserialize)]
pub(crate) struct DelegateArgs {
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub run_in_background: Option<Flag>,
}

/// Which sub-agents `list_subagents` lists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Scope {
    /// The subagents the caller started.
    #[default]
    Children,
    /// Theirs too.
    Descendants,
}

/// The subagent listing tool.
#[derive(Deserialize)]
pub(crate) struct ListArgs {
    #[serde(default)]
    pub scope: Option<Scope>,
}

/// The interrupt and message tools.
#[derive(Deserialize)]
pub(crate) struct AgentArgs {
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn run_in_background_keeps_a_non_boolean_to_refuse_it() {
        let a: DelegateArgs = parse(&json!({"description": "d", "prompt": "p"})).unwrap();
        assert!(a.run_in_background.is_none() && a.cwd.is_none());
        let a: DelegateArgs = parse(&json!({"run_in_background": null})).unwrap();
        assert!(a.run_in_background.is_none());
        let a: DelegateArgs = parse(&json!({"run_in_background": false})).unwrap();
        assert!(matches!(a.run_in_background, Some(Flag::Bool(false))));
        let a: DelegateArgs = parse(&json!({"run_in_background": "yes"})).unwrap();
        assert!(matches!(a.run_in_background, Some(Flag::Other(v)) if v == json!("yes")));
    }

    #[test]
    fn scope_and_required_strings() {
        let a: ListArgs = parse(&json!({})).unwrap();
        assert_eq!(a.scope.unwrap_or_default(), Scope::Children);
        let a: ListArgs = parse(&json!({"scope": "descendants"})).unwrap();
        assert_eq!(a.scope, Some(Scope::Descendants));
        assert!(parse::<ListArgs>(&json!({"scope": "all"})).is_err());
        let a: AgentArgs = parse(&json!({"agent_id": ""})).unwrap();
        assert_eq!(
            non_empty(a.agent_id, "agent_id").unwrap_err(),
            ToolError::invalid_args("invalid agent_id: expected a non-empty string")
        );
        assert_eq!(non_empty(Some("x".into()), "message").unwrap(), "x");
    }
}
