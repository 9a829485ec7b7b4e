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

/// Checks that JSON text is lossless (the rules of [`validate_lossless`]) without building a
/// tree: one pass of the parser, no allocation but for error paths. `root` names the value in
/// the error path.
pub fn validate_lossless_str(json: &str, root: &str) -> Result<(), JsonError> {
    if !may_be_lossy(json.as_bytes()) {
        return Ok(());
    }
    let mut de = serde_json::Deserializer::from_str(json);
    let mut problem: Option<&'static str> = None;
    let seed = Check {
        problem: &mut problem,
    };
    let parsed = serde::de::DeserializeSeed::deserialize(seed, &mut de).and_then(|()| de.end());
    match (problem, parsed) {
        (Some(problem), _) => {
            // Rare: find the path with the tree walk.
            let path = serde_json::from_str::<Value>(json)
                .ok()
                .and_then(|v| validate_lossless(&v, root).err())
                .map_or_else(|| root.to_owned(), |e| e.path);
            Err(JsonError { path, problem })
        }
        (None, Ok(())) => Ok(()),
        (None, Err(_)) => Err(JsonError {
            path: root.to_owned(),
            problem: "not valid JSON",
        }),
    }
}

/// A byte scan that clears almost every payload without parsing: a JSON text can break the
/// lossless rules only with a number, and a number only with a run of 16 or more digits (an
/// integer beyond ±(2^53 − 1), or a float too long for its f64), a `-0`, or an exponent
/// (`1e400`). String contents are skipped (ids such as `m-01a2…71e2` are not numbers); an
/// unterminated string or any other malformation is left to the full check.
fn may_be_lossy(bytes: &[u8]) -> bool {
    let mut run = 0usize;
    let mut prev = 0u8;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'"' {
            // Skip to the closing quote (escapes skip their next byte).
            i += 1;
            loop {
                let Some(k) = bytes.get(i..).and_then(|r| memchr::memchr2(b'"', b'\\', r)) else {
                    return true;
                };
                i += k;
                if bytes[i] == b'"' {
                    break;
                }
                i += 2;
            }
            run = 0;
            prev = b'"';
            i += 1;
            continue;
        }
        if b.is_ascii_digit() {
            run += 1;
            if run >= 16 || (b == b'0' && prev == b'-') {
                return true;
            }
        } else {
            if (b == b'e' || b == b'E') && run > 0 {
                return true;
            }
            run = 0;
        }
        prev = b;
        i += 1;
    }
    false
}

/// [`may_be_lossy`] over a text written in pieces (a serialiser's output): a typed payload is
/// checked as it is serialised, without its text being built or kept. Same rules, same
/// conservatism (an unterminated string counts as possibly lossy).
#[derive(Debug, Default)]
pub(crate) struct LossScan {
    in_string: bool,
    escaped: bool,
    run: usize,
    prev: u8,
    hit: bool,
    len: usize,
}

impl LossScan {
    /// Bytes scanned.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.len += bytes.len();
        let mut i = 0;
        while i < bytes.len() && !self.hit {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    i += 1;
                    continue;
                }
                let Some(k) = memchr::memchr2(b'"', b'\\', &bytes[i..]) else {
                    return;
                };
                i += k;
                if bytes[i] == b'"' {
                    self.in_string = false;
                    self.run = 0;
                    self.prev = b'"';
                } else {
                    self.escaped = true;
                }
                i += 1;
                continue;
            }
            let b = bytes[i];
            i += 1;
            if b == b'"' {
                self.in_string = true;
                continue;
            }
            if b.is_ascii_digit() {
                self.run += 1;
                if self.run >= 16 || (b == b'0' && self.prev == b'-') {
                    self.hit = true;
                }
            } else {
                if (b == b'e' || b == b'E') && self.run > 0 {
                    self.hit = true;
                }
                self.run = 0;
            }
            self.prev = b;
        }
    }

    /// Whether the text written so far may break the lossless rules (then check it fully).
    pub(crate) fn may_be_lossy(&self) -> bool {
        self.hit || self.in_string || self.escaped
    }
}

impl std::io::Write for LossScan {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.feed(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A visitor that checks every number and records the first problem.
struct Check<'p> {
    problem: &'p mut Option<&'static str>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Check<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Check<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        if !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&v) {
            self.problem
                .get_or_insert("integer outside the safe range ±(2^53-1)");
        }
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        if v > MAX_SAFE_INTEGER as u64 {
            self.problem
                .get_or_insert("integer outside the safe range ±(2^53-1)");
        }
        Ok(())
    }
    fn visit_f64<E>(self, f: f64) -> Result<(), E> {
        if !f.is_finite() {
            self.problem.get_or_insert("non-finite number");
        } else if f == 0.0 && f.is_sign_negative() {
            self.problem.get_or_insert("negative zero (-0)");
        }
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_borrowed_str<E>(self, _: &'de str) -> Result<(), E> {
        Ok(())
    }
    fn visit_string<E>(self, _: String) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(Check {
                problem: &mut *self.problem,
            })?
            .is_some()
        {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key::<serde::de::IgnoredAny>()?.is_some() {
            map.next_value_seed(Check {
                problem: &mut *self.problem,
            })?;
        }
        Ok(())
    }
}

/// Reads a non-negative safe integer from a JSON number.
pub fn number_as_safe_u64(n: &serde_json::Number) -> Option<u64> {
    if let Some(u) = n.as_u64() {
        return (u <= MAX_SAFE_INTEGER as u64).then_some(u);
    }
    let f = n.as_f64()?;
    if f.fract() == 0.0 && f >= 0.0 && f <= MAX_SAFE_INTEGER as f64 && !f.is_sign_negative() {
        return Some(f as u64);
    }
    None
}

/// Reads a safe integer of either sign from a JSON number.
pub fn number_as_safe_i64(n: &serde_json::Number) -> Option<i64> {
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

/// Reads a non-negative safe integer (a seq, count or index).
pub fn as_safe_u64(value: &Value) -> Option<u64> {
    // A float with an integral value (e.g. `3.0`) is still a JSON number equal to 3.
    number_as_safe_u64(value.as_number()?)
}

/// Reads a safe integer of either sign (a time).
pub fn as_safe_i64(value: &Value) -> Option<i64> {
    number_as_safe_i64(value.as_number()?)
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
    fn the_prefilter_skips_strings_but_not_numbers() {
        for lossy in [
            r#"{"a":1e5}"#,
            r#"{"a":-0}"#,
            r#"{"a":[1,-0.0]}"#,
            r#"{"a":12345678901234567}"#,
            r#"{"a":"x","b":2E3}"#,
            r#"{"a":"unterminated"#,
        ] {
            assert!(may_be_lossy(lossy.as_bytes()), "{lossy}");
        }
        for clean in [
            r#"{"id":"m-01a23398-9a1d-71e2-a4fb-774e6c0d1e7b"}"#,
            r#"{"a":"1234567890123456789","b":"-0","c":"1e400"}"#,
            r#"{"a":"q\"71e2\\","t":1796161968669}"#,
            r#"{"a":[1,2.5,-3]}"#,
        ] {
            assert!(!may_be_lossy(clean.as_bytes()), "{clean}");
        }
        assert!(validate_lossless_str(r#"{"id":"71e2","n":-0}"#, "data").is_err());
        assert!(validate_lossless_str(r#"{"id":"71e2","n":0}"#, "data").is_ok());
    }

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
    fn text_check_agrees_with_the_tree_check() {
        for (json, ok) in [
            (r#"{"a":[1,2.5,"x",null,true],"b":{"c":-3}}"#, true),
            (r#"{"a":[-0.0]}"#, false),
            (r#"{"a":-0}"#, false),
            (r#"{"n":9007199254740992}"#, false),
            (r#"{"n":-9007199254740992}"#, false),
            (r#"{"n":9007199254740991,"s":"\u0000"}"#, true),
            (r#"{"n":1e400}"#, false),
        ] {
            let text = validate_lossless_str(json, "data");
            assert_eq!(text.is_ok(), ok, "{json}: {text:?}");
        }
        assert!(validate_lossless_str(r#"{"s":"-0 and 1e5 and 12345678901234567"}"#, "d").is_ok());
        assert!(validate_lossless_str(r#"{"n":1E400}"#, "d").is_err());
        assert!(validate_lossless_str(r#"{"n":-0}"#, "d").is_err());
        assert!(validate_lossless_str(r#"{"n":[1,-0]}"#, "d").is_err());
        let err = validate_lossless_str(r#"{"a":{"b":[0,-0.0]}}"#, "data").unwrap_err();
        assert_eq!(err.path, "data/a/b/1");
        assert_eq!(err.problem, "negative zero (-0)");
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

    #[test]
    fn the_piecewise_scan_agrees_with_the_byte_scan() {
        let texts = [
            r#"{"a":"x\"1234567890123456\\","b":12}"#,
            r#"{"a":12345678901234567}"#,
            r#"{"a":-0}"#,
            r#"{"a":1e5,"s":"e1"}"#,
            r#"{"id":"m-01a2e3","n":[1,2,3]}"#,
            r#"{"a":"unterminated"#,
        ];
        for text in texts {
            for cut in 1..text.len() {
                let mut scan = super::LossScan::default();
                std::io::Write::write_all(&mut scan, &text.as_bytes()[..cut]).unwrap();
                std::io::Write::write_all(&mut scan, &text.as_bytes()[cut..]).unwrap();
                assert_eq!(
                    scan.may_be_lossy(),
                    super::may_be_lossy(text.as_bytes()),
                    "{text} cut at {cut}"
                );
            }
        }
    }
}
