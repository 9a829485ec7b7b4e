//! Strict `{{variable}}` rendering.
//!
//! Rules (`behaviours.md` §3.2): `{{name}}` is replaced by the variable's value; the name is
//! the text between `{{` and the next `}}`, trimmed. An unknown name, or a known one without a
//! value, is an error (the loop fails that turn with it). A `{{` with no later `}}` is literal
//! text. Substituted values are never rescanned, so a value containing `{{x}}` stays as it is.

use std::collections::BTreeMap;

/// Why a template could not be rendered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `{{name}}` names no known variable.
    #[error("unknown variable {{{{{0}}}}}")]
    Unknown(String),
    /// `{{name}}` names a known variable that has no value for this assembly.
    #[error("variable {{{{{0}}}}} has no value")]
    Valueless(String),
}

/// The values a template can use: a known name maps to `Some(value)`, or to `None` when it is
/// known but has no value here (e.g. an agent without a working directory).
pub type Variables = BTreeMap<String, Option<String>>;

/// Renders `template` strictly against `vars` (see the module docs).
pub fn render(template: &str, vars: &Variables) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    loop {
        let Some(open) = rest.find("{{") else {
            out.push_str(rest);
            break;
        };
        let after_open = &rest[open + 2..];
        let Some(close) = after_open.find("}}") else {
            // A lone `{{` without a later `}}` is literal.
            out.push_str(rest);
            break;
        };
        let name = after_open[..close].trim();
        let value = match vars.get(name) {
            None => return Err(TemplateError::Unknown(name.to_owned())),
            Some(None) => return Err(TemplateError::Valueless(name.to_owned())),
            Some(Some(v)) => v,
        };
        out.push_str(&rest[..open]);
        out.push_str(value);
        rest = &after_open[close + 2..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Variables {
        let mut v = Variables::new();
        v.insert("model".into(), Some("deepseek-chat".into()));
        v.insert("cwd".into(), Some("/home/u/{{model}}".into()));
        v.insert("provider".into(), None);
        v
    }

    #[test]
    fn substitutes_known_variables() {
        assert_eq!(
            render("model {{model}} in {{ cwd }}.", &vars()),
            Ok("model deepseek-chat in /home/u/{{model}}.".into())
        );
    }

    #[test]
    fn unknown_and_valueless_fail() {
        assert_eq!(
            render("a {{nope}} b", &vars()),
            Err(TemplateError::Unknown("nope".into()))
        );
        assert_eq!(
            render("{{provider}}", &vars()),
            Err(TemplateError::Valueless("provider".into()))
        );
        assert_eq!(
            TemplateError::Unknown("x".into()).to_string(),
            "unknown variable {{x}}"
        );
        assert_eq!(
            TemplateError::Valueless("x".into()).to_string(),
            "variable {{x}} has no value"
        );
    }

    #[test]
    fn lone_open_is_literal() {
        assert_eq!(render("a {{ b", &vars()), Ok("a {{ b".into()));
        assert_eq!(
            render("{{model}} then {{", &vars()),
            Ok("deepseek-chat then {{".into())
        );
        assert_eq!(render("}} only", &vars()), Ok("}} only".into()));
        assert_eq!(render("", &vars()), Ok(String::new()));
    }

    #[test]
    fn multibyte_text_survives() {
        assert_eq!(
            render("é{{model}}ü{{", &vars()),
            Ok("édeepseek-chatü{{".into())
        );
    }
}
