//! Parsing large argument objects without serde_json's string scratch.
//!
//! `serde_json` unescapes a string into a scratch buffer that grows by doubling and then copies
//! it into the `Value`: a 5 MB `content` costs up to 13 MB while it is parsed. Here the object's
//! members are borrowed as raw JSON, and string members are unescaped straight into a `String`
//! sized from the raw text. Anything unusual (not an object, a bad escape, a lone surrogate, a
//! control character) returns `None`, and the caller parses with `serde_json`, which gives the
//! same value or the same error.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The object in `raw`, parsed member by member; `None`: parse it with `serde_json`.
pub(crate) fn large_object(raw: &str) -> Option<Value> {
    let members: Vec<(std::borrow::Cow<'_, str>, &RawValue)> = {
        let map: Vec<(std::borrow::Cow<'_, str>, &RawValue)> =
            serde_json::from_str::<RawMembers<'_>>(raw).ok()?.0;
        map
    };
    let mut out = Map::new();
    for (key, value) in members {
        let text = value.get();
        let parsed = if text.starts_with('"') {
            Value::String(unescape(text)?)
        } else {
            serde_json::from_str(text).ok()?
        };
        out.insert(key.into_owned(), parsed);
    }
    Some(Value::Object(out))
}

/// An object's members in order, values borrowed as raw JSON.
struct RawMembers<'a>(Vec<(std::borrow::Cow<'a, str>, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for RawMembers<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawMembers<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    out.push((key, value));
                }
                Ok(RawMembers(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// The value of the JSON string literal `text` (quotes included); `None` on anything JSON
/// refuses (or that this reader leaves to `serde_json`).
fn unescape(text: &str) -> Option<String> {
    let body = text.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(i) = rest
        .find(['\\', '"'])
        .or_else(|| (!rest.is_empty()).then_some(rest.len()))
    {
        let (plain, tail) = rest.split_at(i);
        if plain.bytes().any(|b| b < 0x20) {
            return None;
        }
        out.push_str(plain);
        let mut chars = tail.chars();
        match chars.next() {
            None => break,
            Some('"') => return None,
            Some(_) => {}
        }
        let c = match chars.next()? {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => {
                let hi = hex4(chars.as_str())?;
                chars = chars.as_str().get(4..)?.chars();
                if (0xD800..0xDC00).contains(&hi) {
                    let after = chars.as_str().strip_prefix("\\u")?;
                    let lo = hex4(after)?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return None;
                    }
                    chars = after.get(4..)?.chars();
                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?
                } else {
                    char::from_u32(hi)?
                }
            }
            _ => return None,
        };
        out.push(c);
        rest = chars.as_str();
    }
    Some(out)
}

fn hex4(s: &str) -> Option<u32> {
    let h = s.get(..4)?;
    if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(h, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_parse_as_serde_json_parses_them() {
        let cases = [
            r#"{"file_path":"a.txt","content":"x\"y\\z\n\t\u00e9\ud83d\ude00/\/ end"}"#,
            r#"{"a":1,"b":[1,{"c":"d"}],"s":"","t":"plain","a":2}"#,
            r#"  { "k" : "v" , "n" : null }  "#,
            r#"{"e":"\b\f\r"}"#,
        ];
        for raw in cases {
            let want: Value = serde_json::from_str(raw).unwrap();
            assert_eq!(large_object(raw), Some(want.clone()), "{raw}");
            assert_eq!(
                serde_json::to_string(&large_object(raw).unwrap()).unwrap(),
                serde_json::to_string(&want).unwrap(),
                "member order of {raw}"
            );
        }
    }

    #[test]
    fn what_json_refuses_is_left_to_serde_json() {
        for raw in [
            r#"{"s":"\ud800"}"#,
            r#"{"s":"\ud800\u0041"}"#,
            r#"{"s":"\x"}"#,
            "{\"s\":\"tab\there\"}",
            r#"{"s":"\u12"}"#,
            r#"[1,2]"#,
            r#"{"s":"a"} trailing"#,
            r#"{"s":"unterminated}"#,
        ] {
            assert_eq!(large_object(raw), None, "{raw}");
        }
    }
}
