//! The settings fields of a `POST /v1/sessions` body checked one by one, so a bad value answers
//! 400 naming its field (serde's message for the whole body, a tagged enum with flattened
//! options, names the expected values but not the field).

use dsh_protocol::{ApprovalPolicy, Effort, SandboxMode};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;

/// One field: its name in the body and what it must be.
fn check<T: DeserializeOwned>(body: &Value, field: &str, what: &str) -> Result<(), ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(()),
        Some(v) => serde_json::from_value::<T>(v.clone())
            .map(drop)
            .map_err(|e| ApiError::invalid(format!("`{field}` is not {what}: {e} (got {v})"))),
    }
}

/// Refuses a body whose `sandbox`, `approvalPolicy`, `effort`, `cwd`, `model` or `route` has the
/// wrong type or an unknown value.
pub(crate) fn check_session_settings(body: &Value) -> Result<(), ApiError> {
    check::<SandboxMode>(body, "sandbox", "a sandbox mode")?;
    check::<ApprovalPolicy>(body, "approvalPolicy", "an approval policy")?;
    check::<Effort>(body, "effort", "a reasoning effort")?;
    check::<String>(body, "cwd", "a directory path")?;
    check::<String>(body, "model", "a model id")?;
    check::<String>(body, "route", "a provider route")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_value_is_refused_naming_its_field_and_good_ones_pass() {
        let ok = serde_json::json!({
            "sandbox": "read-only",
            "approvalPolicy": "untrusted",
            "effort": "high",
            "cwd": "/tmp",
        });
        assert!(check_session_settings(&ok).is_ok());
        assert!(check_session_settings(&serde_json::json!({})).is_ok());
        for (body, field) in [
            (serde_json::json!({"sandbox": "bogus"}), "`sandbox`"),
            (
                serde_json::json!({"approvalPolicy": "sometimes"}),
                "`approvalPolicy`",
            ),
            (serde_json::json!({"effort": 3}), "`effort`"),
            (serde_json::json!({"cwd": ["a"]}), "`cwd`"),
        ] {
            let e = check_session_settings(&body).unwrap_err();
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
            assert!(e.error.message.starts_with(field), "{}", e.error.message);
        }
        let e = check_session_settings(&serde_json::json!({"sandbox": "bogus"})).unwrap_err();
        assert!(
            e.error.message.contains("read-only") && e.error.message.contains("\"bogus\""),
            "{}",
            e.error.message
        );
    }
}
