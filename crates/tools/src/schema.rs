//! The argument-schema subset tools may declare, and the validator that checks model arguments
//! against it with upstream's exact violation texts.
//!
//! Supported keywords: `type` (one string), `properties`, `required`, `additionalProperties`
//! (boolean), `items`, `enum`, `const`, `oneOf`, plus the annotations `description` and `title`.
//! Anything else is rejected when the tool is registered ([`check_schema`]), so a schema the
//! validator would silently ignore never reaches the model.

use serde_json::{Map, Value};

/// The JSON types a `type` keyword may name.
const TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "null", "object", "array",
];

/// Keywords accepted in a schema node.
const KEYWORDS: [&str; 10] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "oneOf",
    "description",
    "title",
];

/// Why a parameter schema was refused at registration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The schema is not a JSON object.
    #[error("parameters must be a JSON object")]
    RootNotAnObject,
    /// The root is not `"type": "object"`.
    #[error(r#"parameters must have "type": "object" at the root"#)]
    RootNotObjectType,
    /// The root sets `additionalProperties` (upstream never sends one).
    #[error("parameters must not set additionalProperties at the root")]
    RootAdditionalProperties,
    /// A sub-schema is not a JSON object.
    #[error("{at}: a schema must be a JSON object")]
    NotAnObject {
        /// Where, e.g. `parameters.properties.a`.
        at: String,
    },
    /// A keyword outside the supported subset.
    #[error("{at}: unsupported schema keyword \"{keyword}\"")]
    UnsupportedKeyword {
        /// Where.
        at: String,
        /// The keyword.
        keyword: String,
    },
    /// `type` is not one of the supported type names.
    #[error("{at}: \"type\" must be one of {TYPES:?}")]
    UnsupportedType {
        /// Where.
        at: String,
    },
    /// A supported keyword with a value of the wrong shape.
    #[error("{at}: \"{keyword}\" must be {expected}")]
    BadKeywordValue {
        /// Where.
        at: String,
        /// The keyword (`required`, `enum`, ...).
        keyword: &'static str,
        /// What it must be (`an array of strings`, ...).
        expected: &'static str,
    },
}

/// Check that `schema` is a valid tool-parameter schema in the supported subset.
///
/// The root must be `{"type":"object", ...}` without a root-level `additionalProperties`
/// (upstream never sends one). The error names the offending location.
pub fn check_schema(schema: &Value) -> Result<(), SchemaError> {
    let Some(root) = schema.as_object() else {
        return Err(SchemaError::RootNotAnObject);
    };
    if root.get("type").and_then(Value::as_str) != Some("object") {
        return Err(SchemaError::RootNotObjectType);
    }
    if root.contains_key("additionalProperties") {
        return Err(SchemaError::RootAdditionalProperties);
    }
    check_node(schema, "parameters")
}

/// Check a foreign schema sent verbatim (an MCP server's `inputSchema`): only that it is a
/// JSON object whose root is `"type": "object"`; its keywords are the owner's business.
pub fn check_foreign_schema(schema: &Value) -> Result<(), SchemaError> {
    let Some(root) = schema.as_object() else {
        return Err(SchemaError::RootNotAnObject);
    };
    if root.get("type").and_then(Value::as_str) != Some("object") {
        return Err(SchemaError::RootNotObjectType);
    }
    Ok(())
}

fn check_node(node: &Value, at: &str) -> Result<(), SchemaError> {
    let bad = |keyword: &'static str, expected: &'static str| SchemaError::BadKeywordValue {
        at: at.to_owned(),
        keyword,
        expected,
    };
    let Some(obj) = node.as_object() else {
        return Err(SchemaError::NotAnObject { at: at.to_owned() });
    };
    for key in obj.keys() {
        if !KEYWORDS.contains(&key.as_str()) {
            return Err(SchemaError::UnsupportedKeyword {
                at: at.to_owned(),
                keyword: key.clone(),
            });
        }
    }
    if let Some(ty) = obj.get("type") {
        match ty.as_str() {
            Some(t) if TYPES.contains(&t) => {}
            _ => return Err(SchemaError::UnsupportedType { at: at.to_owned() }),
        }
    }
    if obj.get("description").is_some_and(|v| !v.is_string()) {
        return Err(bad("description", "a string"));
    }
    if obj.get("title").is_some_and(|v| !v.is_string()) {
        return Err(bad("title", "a string"));
    }
    if let Some(props) = obj.get("properties") {
        let Some(props) = props.as_object() else {
            return Err(bad("properties", "an object"));
        };
        for (name, sub) in props {
            check_node(sub, &format!("{at}.properties.{name}"))?;
        }
    }
    if let Some(req) = obj.get("required") {
        let names = req.as_array().filter(|a| a.iter().all(Value::is_string));
        if names.is_none() {
            return Err(bad("required", "an array of strings"));
        }
    }
    if obj
        .get("additionalProperties")
        .is_some_and(|v| !v.is_boolean())
    {
        return Err(bad("additionalProperties", "a boolean"));
    }
    if let Some(items) = obj.get("items") {
        check_node(items, &format!("{at}.items"))?;
    }
    if obj.get("enum").is_some_and(|v| !v.is_array()) {
        return Err(bad("enum", "an array"));
    }
    if let Some(one_of) = obj.get("oneOf") {
        let Some(alts) = one_of.as_array().filter(|a| !a.is_empty()) else {
            return Err(bad("oneOf", "a non-empty array"));
        };
        for (i, alt) in alts.iter().enumerate() {
            check_node(alt, &format!("{at}.oneOf[{i}]"))?;
        }
    }
    Ok(())
}

/// Validate `value` against `schema` (already accepted by [`check_schema`]).
///
/// Returns the violations in schema-walk order; the caller joins them into
/// `invalid arguments: <v1>; <v2>`. The root is named `arguments`; nested paths use dots and
/// `[i]` (`todos[0].status`).
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, value, &Path::Root, &mut out);
    out
}

/// Format violations the way the pipeline reports them (`INVALID_ARGS`).
pub fn violations_message(violations: &[String]) -> String {
    format!("invalid arguments: {}", violations.join("; "))
}

enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn render(&self) -> String {
        match self {
            Path::Root => "arguments".to_owned(),
            Path::Key(Path::Root, k) => (*k).to_owned(),
            Path::Key(p, k) => format!("{}.{k}", p.render()),
            Path::Index(p, i) => format!("{}[{i}]", p.render()),
        }
    }
}

fn type_matches(ty: &str, v: &Value) -> bool {
    match ty {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => match v {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        _ => true,
    }
}

fn type_phrase(ty: &str) -> &'static str {
    match ty {
        "string" => "a string",
        "number" => "a number",
        "integer" => "an integer",
        "boolean" => "a boolean",
        "null" => "null",
        "object" => "an object",
        "array" => "an array",
        _ => "valid",
    }
}

fn json(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}

fn walk(schema: &Value, value: &Value, path: &Path<'_>, out: &mut Vec<String>) {
    let Some(node) = schema.as_object() else {
        return;
    };
    if let Some(ty) = node.get("type").and_then(Value::as_str) {
        if !type_matches(ty, value) {
            out.push(format!("\"{}\" must be {}", path.render(), type_phrase(ty)));
            return;
        }
        if matches!(ty, "number" | "integer") && value.as_f64().is_some_and(|f| !f.is_finite()) {
            out.push(format!(
                "\"{}\" must be a finite JSON number",
                path.render()
            ));
            return;
        }
    }
    if let Some(allowed) = node.get("enum").and_then(Value::as_array)
        && !allowed.iter().any(|a| json_eq(a, value))
    {
        out.push(format!(
            "\"{}\" must be one of {}",
            path.render(),
            json(&Value::Array(allowed.clone()))
        ));
        return;
    }
    if let Some(c) = node.get("const")
        && !json_eq(c, value)
    {
        out.push(format!("\"{}\" must be {}", path.render(), json(c)));
        return;
    }
    if let Some(alts) = node.get("oneOf").and_then(Value::as_array) {
        let matching = alts
            .iter()
            .filter(|alt| {
                let mut scratch = Vec::new();
                walk(alt, value, path, &mut scratch);
                scratch.is_empty()
            })
            .count();
        if matching != 1 {
            out.push(format!(
                "\"{}\" must match exactly one of the allowed schemas (matched {matching})",
                path.render()
            ));
            return;
        }
    }
    if let Value::Object(map) = value {
        walk_object(node, map, path, out);
    }
    if let (Value::Array(items), Some(item_schema)) = (value, node.get("items")) {
        for (i, item) in items.iter().enumerate() {
            walk(item_schema, item, &Path::Index(path, i), out);
        }
    }
}

fn walk_object(
    node: &Map<String, Value>,
    map: &Map<String, Value>,
    path: &Path<'_>,
    out: &mut Vec<String>,
) {
    let props = node.get("properties").and_then(Value::as_object);
    if let Some(required) = node.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(name) {
                out.push(format!(
                    "missing required property \"{}\"",
                    Path::Key(path, name).render()
                ));
            }
        }
    }
    if let Some(props) = props {
        for (name, sub) in props {
            if let Some(v) = map.get(name) {
                walk(sub, v, &Path::Key(path, name), out);
            }
        }
    }
    if node.get("additionalProperties") == Some(&Value::Bool(false)) {
        for name in map.keys() {
            if !props.is_some_and(|p| p.contains_key(name)) {
                out.push(format!(
                    "\"{}\" is not a declared property (additionalProperties: false)",
                    Path::Key(path, name).render()
                ));
            }
        }
    }
}

/// JSON equality where numbers compare by value (`1` equals `1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Parse a raw argument string the way the pipeline does: `""` (or only whitespace) is `{}`;
/// invalid JSON is kept as the raw string so validation reports it as not an object.
pub fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Map::new());
    }
    if raw.len() > LARGE_ARGUMENTS
        && let Some(v) = crate::parse::large_object(raw)
    {
        return v;
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// Arguments longer than this are large: parsed member by member ([`crate::parse`], no string
/// scratch of the size of the largest member), never parsed to classify a call's concurrency,
/// and moved into the tool body rather than copied.
pub const LARGE_ARGUMENTS: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn todo_schema() -> Value {
        json!({"type":"object","properties":{
          "todos":{"type":"array","items":{"type":"object","additionalProperties":false,
            "properties":{"content":{"type":"string"},
                          "status":{"type":"string","enum":["pending","in_progress","completed"]}},
            "required":["content","status"]}}},
         "required":["todos"]})
    }

    #[test]
    fn accepts_catalog_schemas_and_rejects_unsupported_keywords() {
        assert_eq!(check_schema(&todo_schema()), Ok(()));
        let bad = json!({"type":"object","properties":{"a":{"type":"string","format":"uri"}}});
        let err = check_schema(&bad).unwrap_err();
        assert_eq!(
            err,
            SchemaError::UnsupportedKeyword {
                at: "parameters.properties.a".into(),
                keyword: "format".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "parameters.properties.a: unsupported schema keyword \"format\""
        );
        let root_ap = json!({"type":"object","properties":{},"additionalProperties":false});
        assert_eq!(
            check_schema(&root_ap),
            Err(SchemaError::RootAdditionalProperties)
        );
        assert_eq!(
            check_schema(&json!({"type":"array"})),
            Err(SchemaError::RootNotObjectType)
        );
        assert_eq!(
            check_schema(&json!({"type":"object","properties":{"a":{"required":"x"}}})),
            Err(SchemaError::BadKeywordValue {
                at: "parameters.properties.a".into(),
                keyword: "required",
                expected: "an array of strings"
            })
        );
        assert!(
            check_schema(&json!({"type":"object","properties":{"a":{"type":["string"]}}})).is_err()
        );
    }

    #[test]
    fn violation_texts_match_upstream() {
        let s = todo_schema();
        assert_eq!(
            validate(&s, &json!({})),
            vec!["missing required property \"todos\""]
        );
        assert_eq!(
            validate(&s, &json!("x")),
            vec!["\"arguments\" must be an object"]
        );
        assert_eq!(
            validate(&s, &json!({"todos":{}})),
            vec!["\"todos\" must be an array"]
        );
        let v = validate(
            &s,
            &json!({"todos":[{"content":"a","status":"done","x":1},{"status":"pending"}]}),
        );
        assert_eq!(
            v,
            vec![
                "\"todos[0].status\" must be one of [\"pending\",\"in_progress\",\"completed\"]",
                "\"todos[0].x\" is not a declared property (additionalProperties: false)",
                "missing required property \"todos[1].content\"",
            ]
        );
        assert_eq!(
            violations_message(&v[..1]),
            "invalid arguments: \"todos[0].status\" must be one of [\"pending\",\"in_progress\",\"completed\"]"
        );
    }

    #[test]
    fn scalar_types_const_and_integers() {
        let s = json!({"type":"object","properties":{
            "n":{"type":"number"},"i":{"type":"integer"},"b":{"type":"boolean"},
            "z":{"type":"null"},"c":{"const":"x"}}});
        assert!(validate(&s, &json!({"n":1.5,"i":2.0,"b":true,"z":null,"c":"x"})).is_empty());
        assert_eq!(
            validate(&s, &json!({"n":"1","i":1.5,"b":0,"z":1,"c":"y"})),
            vec![
                "\"n\" must be a number",
                "\"i\" must be an integer",
                "\"b\" must be a boolean",
                "\"z\" must be null",
                "\"c\" must be \"x\""
            ]
        );
    }

    #[test]
    fn one_of_and_argument_parsing() {
        let s = json!({"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"number"}]}}});
        assert!(validate(&s, &json!({"v":1})).is_empty());
        assert_eq!(validate(&s, &json!({"v":true})).len(), 1);
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments("  "), json!({}));
        assert_eq!(parse_arguments("{\"a\":1}"), json!({"a":1}));
        assert_eq!(parse_arguments("{oops"), json!("{oops"));
    }
}
