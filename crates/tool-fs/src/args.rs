//! Argument checks beyond the schema, with upstream's texts (`INVALID_ARGS`).

use std::path::PathBuf;

use dsh_tools::{ToolContext, ToolError};
use serde_json::Value;

use crate::paths::resolve_path;

/// A required non-blank string argument: `<name> must be a non-empty string`.
pub fn required_str<'a>(args: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    match args.get(name).and_then(Value::as_str) {
        Some(s) if !s.trim().is_empty() => Ok(s),
        _ => Err(ToolError::invalid_args(format!(
            "{name} must be a non-empty string"
        ))),
    }
}

/// A required path argument resolved against the session cwd.
pub fn required_path(ctx: &ToolContext, args: &Value, name: &str) -> Result<PathBuf, ToolError> {
    let raw = required_str(args, name)?;
    Ok(resolve_path(ctx.cwd(), raw))
}

/// An optional string that must be non-blank when given:
/// `<name> must be a non-empty string when given`.
pub fn opt_nonblank_str<'a>(args: &'a Value, name: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s)),
        Some(_) => Err(ToolError::invalid_args(format!(
            "{name} must be a non-empty string when given"
        ))),
    }
}

/// An optional positive integer: `<name> must be a positive integer`.
pub fn opt_positive_int(args: &Value, name: &str) -> Result<Option<u64>, ToolError> {
    let err = || ToolError::invalid_args(format!("{name} must be a positive integer"));
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
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
        Some(_) => Err(err()),
    }
}

/// An optional boolean (schema-validated), default false.
pub fn opt_bool(args: &Value, name: &str) -> bool {
    args.get(name).and_then(Value::as_bool).unwrap_or(false)
}
