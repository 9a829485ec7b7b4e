//! Lossless JSON rules (format §3.2): plain JSON, no `-0`, no non-finite numbers, and integers
//! within the JavaScript safe range, so that a log round-trips through the original harness.

use serde_json::Value;

/// Largest integer a JavaScript number holds exactly (2^53 − 1).
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// Why a JSON value is not lossless.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem} at {path}")]
pub struct JsonError {
    /// JSON-pointer-like location of the offending value (`/data/usage/inputTokens`).
    pub path: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

/// Checks that `value` is lossless JSON: every number finite, no negative zero, and every integer
/// inside ±(2^53 − 1). `root` names the value in the error path.
pub fn validate_lossless(value: &Value, root: &str) -> Result<(), JsonError> {
    let mut path = String::from(root);
    walk(value, &mut path)
}

fn walk(value: &Value, path: &mut String) -> Result<(), JsonError> {
    match value {
        Value::Number(n) => check_number(n).map_err(|problem| JsonError {
            path: path.clone(),
            problem,
        }),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                walk(item, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        Value::Object(map) => {
            for (k, item) in map {
                let len = path.len();
                path.push('/');
                path.push_str(k);
                walk(item, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
    }
}

fn check_number(n: &serde_json::Number) -> Result<(), &'static str> {
    if let Some(i) = n.as_i64() {
        if !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&i) {
            return Err("integer outside the safe range ±(2^53-1)");
        }
        return Ok(());
    }
    if n.as_u64().is_some() {
        return Err("integer outside the safe range ±(2^53-1)");
    }
    match n.as_f64() {
        Some(f) if !f.is_finite() => Err("non-finite number"),
        Some(f) if f == 0.0 && f.is_sign_negative() => Err("negative zero (-0)"),
        Some(_) => Ok(()),
        None => Err("number not representable as f64"),
    }
}

/// Reads a non-negative safe integer (a seq, count or index).
pub fn as_safe_u64(value: &Value) -> Option<u64> {
    let n = value.as_number()?;
    if let Some(u) = n.as_u64() {
        return (u <= MAX_SAFE_INTEGER as u64).then_some(u);
    }
    // A float with an integral value (e.g. `3.0`) is still a JSON number equal to 3.
    let f = n.as_f64()?;
    if f.fract() == 0.0 && f >= 0.0 && f <= MAX_SAFE_INTEGER as f64 && !f.is_sign_negative() {
        return Some(f as u64);
    }
    None
}

/// Reads a safe integer of either sign (a time).
pub fn as_safe_i64(value: &Value) -> Option<i64> {
    let n = value.as_number()?;
    if let Some(i) = n.as_i64() {
        return (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER)
            .contains(&i)
            .then_some(i);
    }
    let f = n.as_f64()?;
    if f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER as f64 && !(f == 0.0 && f.is_sign_negative())
    {
        return Some(f as i64);
    }
    None
}

/// Reads a positive safe integer (turn and step numbers).
pub fn as_positive(value: &Value) -> Option<u64> {
    as_safe_u64(value).filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts_plain_json() {
        let v = json!({"a": [1, 2.5, "x\u{0}", null, true], "b": {"c": -3}});
        assert!(validate_lossless(&v, "data").is_ok());
    }

    #[test]
    fn rejects_negative_zero() {
        let v: Value = serde_json::from_str(r#"{"a":[-0.0]}"#).unwrap();
        let err = validate_lossless(&v, "data").unwrap_err();
        assert_eq!(err.path, "data/a/0");
        assert!(err.problem.contains("negative zero"));
    }

    #[test]
    fn rejects_unsafe_integers() {
        let v = json!({"n": 9_007_199_254_740_992_u64});
        assert!(validate_lossless(&v, "data").is_err());
        let v = json!({"n": -9_007_199_254_740_992_i64});
        assert!(validate_lossless(&v, "data").is_err());
        let v = json!({"n": 9_007_199_254_740_991_u64});
        assert!(validate_lossless(&v, "data").is_ok());
    }

    #[test]
    fn safe_readers() {
        assert_eq!(as_safe_u64(&json!(3)), Some(3));
        assert_eq!(as_safe_u64(&json!(3.0)), Some(3));
        assert_eq!(as_safe_u64(&json!(-1)), None);
        assert_eq!(as_safe_u64(&json!(1.5)), None);
        assert_eq!(as_safe_i64(&json!(-5)), Some(-5));
        assert_eq!(as_positive(&json!(0)), None);
    }
}
