//! Argument checks beyond the schema, with upstream's texts (`INVALID_ARGS`). Each tool
//! deserialises its (schema-validated) arguments into its own struct with [`parse`], then
//! checks what the schema cannot say (non-blank strings, positive integers).

use serde::de::DeserializeOwned;
use serde_json::{Number, Value};

use dsh_tools::ToolError;

/// The arguments as `T`. The registry validated them against the tool's schema, so this fails
/// only for a caller that skipped it: `invalid arguments: <serde's reason>`.
pub fn parse<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args)
        .map_err(|e| ToolError::invalid_args(format!("invalid arguments: {e}")))
}

/// A required non-blank string argument: `<name> must be a non-empty string`.
pub fn nonblank<'a>(value: &'a str, name: &str) -> Result<&'a str, ToolError> {
    if value.trim().is_empty() {
        return Err(ToolError::invalid_args(format!(
            "{name} must be a non-empty string"
        )));
    }
    Ok(value)
}

/// An optional string that must be non-blank when given:
/// `<name> must be a non-empty string when given`.
pub fn opt_nonblank<'a>(value: Option<&'a str>, name: &str) -> Result<Option<&'a str>, ToolError> {
    match value {
        Some(s) if s.trim().is_empty() => Err(ToolError::invalid_args(format!(
            "{name} must be a non-empty string when given"
        ))),
        other => Ok(other),
    }
}

/// An optional positive integer (the schema says `number`): `<name> must be a positive
/// integer`.
pub fn opt_positive_int(value: Option<&Number>, name: &str) -> Result<Option<u64>, ToolError> {
    let err = || ToolError::invalid_args(format!("{name} must be a positive integer"));
    let Some(n) = value else {
        return Ok(None);
    };
    if let Some(u) = n.as_u64() {
        return if u >= 1 { Ok(Some(u)) } else { Err(err()) };
    }
    match n.as_f64() {
        Some(f) if f.is_finite() && f >= 1.0 && f.fract() == 0.0 && f < 9.0e15 => {
            Ok(Some(f as u64))
        }
        _ => Err(err()),
    }
}
