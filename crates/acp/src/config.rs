//! Session config options (`session/set_config_option`): the reasoning effort as a select
//! (category `thought_level`), set with `Op::SetEffort`; its current value follows the
//! session's settings (`sessionConfigured`), so `/effort` changes it too.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigOptionValue,
    SessionConfigSelectOption,
};
use dsh_protocol::{Effort, Op, SessionSettings};

/// The id of the effort option.
pub(crate) const EFFORT: &str = "effort";

fn label(e: Effort) -> &'static str {
    match e {
        Effort::Off => "Off",
        Effort::Low => "Low",
        Effort::High => "High",
        Effort::Max => "Max",
    }
}

/// The config options of a session with `settings`: the effort, when the model has one.
pub(crate) fn options(settings: &SessionSettings) -> Vec<SessionConfigOption> {
    let Some(current) = settings.effort else {
        return Vec::new();
    };
    let choices: Vec<SessionConfigSelectOption> = Effort::ALL
        .into_iter()
        .map(|e| SessionConfigSelectOption::new(e.as_str(), label(e)))
        .collect();
    vec![
        SessionConfigOption::select(EFFORT, "Reasoning effort", current.as_str(), choices)
            .category(SessionConfigOptionCategory::ThoughtLevel),
    ]
}

/// Why a config value is refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    /// No option has this id.
    #[error("no config option `{0}` (options: effort)")]
    UnknownOption(String),
    /// The value is not one of the option's.
    #[error("`{value}` is not a value of `{option}`")]
    InvalidValue {
        /// The option.
        option: String,
        /// The value given.
        value: String,
    },
}

/// The op setting option `id` to `value`.
pub(crate) fn op(id: &str, value: &SessionConfigOptionValue) -> Result<Op, ConfigError> {
    if id != EFFORT {
        return Err(ConfigError::UnknownOption(id.to_owned()));
    }
    let invalid = |value: String| ConfigError::InvalidValue {
        option: id.to_owned(),
        value,
    };
    match value {
        SessionConfigOptionValue::ValueId { value } => Effort::parse(&value.0)
            .map(|effort| Op::SetEffort { effort })
            .ok_or_else(|| invalid(value.0.to_string())),
        other => Err(invalid(format!("{other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_effort_is_a_select_of_every_effort_set_with_set_effort() {
        assert!(options(&SessionSettings::default()).is_empty());
        let settings = SessionSettings {
            effort: Some(Effort::High),
            ..Default::default()
        };
        let v = serde_json::to_value(options(&settings)).unwrap();
        assert_eq!(v[0]["id"], "effort");
        assert_eq!(v[0]["type"], "select");
        assert_eq!(v[0]["category"], "thought_level");
        assert_eq!(v[0]["currentValue"], "high");
        let values: Vec<&str> = v[0]["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["value"].as_str().unwrap())
            .collect();
        assert_eq!(values, ["off", "low", "high", "max"]);
        assert_eq!(
            op(EFFORT, &SessionConfigOptionValue::value_id("max")).unwrap(),
            Op::SetEffort {
                effort: Effort::Max
            }
        );
        assert!(matches!(
            op(EFFORT, &SessionConfigOptionValue::value_id("extreme")),
            Err(ConfigError::InvalidValue { .. })
        ));
        assert!(matches!(
            op("model", &SessionConfigOptionValue::value_id("x")),
            Err(ConfigError::UnknownOption(_))
        ));
    }
}
