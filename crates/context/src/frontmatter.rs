//! `---`-delimited YAML front matter of Markdown files (skills, commands).

use serde_json::{Map, Value};

/// A Markdown file split into its front matter (a YAML mapping, possibly empty) and its body.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// The front matter's members (empty when the file has none).
    pub meta: Map<String, Value>,
    /// The text after the front matter.
    pub body: String,
}

/// Why a front matter could not be read.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrontMatterError {
    /// `---` opened a block that never closed.
    #[error("front matter opened with `---` is never closed")]
    Unclosed,
    /// The block is not YAML.
    #[error("front matter is not valid YAML: {0}")]
    Yaml(String),
    /// The block is YAML but not a mapping.
    #[error("front matter must be a YAML mapping of keys to values")]
    NotMapping,
}

/// Splits `text` into front matter and body. A file that does not start with `---` has none.
pub fn parse(text: &str) -> Result<Document, FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok(Document {
            meta: Map::new(),
            body: text.to_owned(),
        });
    };
    let mut offset = 0;
    let mut end = None;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            end = Some((offset, offset + line.len()));
            break;
        }
        offset += line.len();
    }
    let (yaml_end, body_start) = end.ok_or(FrontMatterError::Unclosed)?;
    let yaml = &rest[..yaml_end];
    let meta = if yaml.trim().is_empty() {
        Map::new()
    } else {
        match yaml_serde::from_str::<Value>(yaml) {
            Ok(Value::Object(m)) => m,
            Ok(Value::Null) => Map::new(),
            Ok(_) => return Err(FrontMatterError::NotMapping),
            Err(e) => return Err(FrontMatterError::Yaml(e.to_string())),
        }
    };
    Ok(Document {
        meta,
        body: rest[body_start..].to_owned(),
    })
}

/// A boolean flag in front matter: `true/false`, or `yes/no/on/off/1/0` (as strings or numbers).
pub fn flag(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_u64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Some(true),
            "false" | "no" | "off" | "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_front_matter_and_body() {
        let d = parse("---\nname: x\ndescription: \"d\"\n---\nBody\n").unwrap();
        assert_eq!(d.meta["name"], "x");
        assert_eq!(d.body, "Body\n");
        assert_eq!(parse("plain").unwrap().body, "plain");
        assert_eq!(parse("---\nname: x\n"), Err(FrontMatterError::Unclosed));
        assert_eq!(parse("---\n- a\n---\n"), Err(FrontMatterError::NotMapping));
        assert!(matches!(
            parse("---\na: [\n---\n"),
            Err(FrontMatterError::Yaml(_))
        ));
    }

    #[test]
    fn flags_accept_the_usual_spellings() {
        assert_eq!(flag(&Value::from("Yes")), Some(true));
        assert_eq!(flag(&Value::from(0)), Some(false));
        assert_eq!(flag(&Value::from("maybe")), None);
    }
}
