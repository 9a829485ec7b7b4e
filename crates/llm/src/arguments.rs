//! [`ToolArguments`]: a tool call's raw argument string, shared instead of copied.
//!
//! Arguments can be megabytes (a `write` of a whole file). One assembled string is shared by the
//! stream's `block-end`, the message content, the session log's stream record, the tool
//! pipeline and the next request: clones are reference counts, never copies.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The one buffer behind [`ToolArguments::streamed`] (recognised by its address).
static STREAMED: std::sync::LazyLock<Arc<String>> =
    std::sync::LazyLock::new(|| Arc::new(String::new()));

/// A tool call's raw argument string, verbatim (possibly invalid JSON), cheap to clone.
///
/// It wraps `Arc<String>` rather than `Arc<str>` so that a streamed `String` becomes shared
/// without copying its bytes.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolArguments(Arc<String>);

impl ToolArguments {
    /// The arguments as a string slice.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Whether two values share one buffer (no copy was made).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// The owned string: moved out when this is the only reference, copied otherwise.
    pub fn into_string(self) -> String {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| shared.as_str().to_owned())
    }

    /// "As streamed": in an adapter's `block-end` of a tool call, the arguments are the
    /// concatenation of the block's deltas, which the receiving [`crate::BlockAssembler`]
    /// holds. The adapter then keeps no copy of its own (arguments can be megabytes), and the
    /// assembler puts its text in their place ([`crate::BlockAssembler::fill`]), so nothing
    /// after it (the loop's subscribers, the log, the message) sees the marker. It reads as
    /// `""` if it ever escapes.
    pub fn streamed() -> Self {
        ToolArguments(STREAMED.clone())
    }

    /// Whether this is the [`ToolArguments::streamed`] marker.
    pub fn is_streamed(&self) -> bool {
        Arc::ptr_eq(&self.0, &STREAMED)
    }
}

impl Deref for ToolArguments {
    type Target = str;
    fn deref(&self) -> &str {
        self.0.as_str()
    }
}

impl AsRef<str> for ToolArguments {
    fn as_ref(&self) -> &str {
        self.0.as_str()
    }
}

impl std::borrow::Borrow<str> for ToolArguments {
    fn borrow(&self) -> &str {
        self.0.as_str()
    }
}

impl From<String> for ToolArguments {
    fn from(s: String) -> Self {
        ToolArguments(Arc::new(s))
    }
}

impl From<&str> for ToolArguments {
    fn from(s: &str) -> Self {
        ToolArguments(Arc::new(s.to_owned()))
    }
}

impl From<&String> for ToolArguments {
    fn from(s: &String) -> Self {
        ToolArguments(Arc::new(s.clone()))
    }
}

impl From<ToolArguments> for String {
    fn from(a: ToolArguments) -> Self {
        a.into_string()
    }
}

impl PartialEq<str> for ToolArguments {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ToolArguments {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for ToolArguments {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<ToolArguments> for String {
    fn eq(&self, other: &ToolArguments) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<ToolArguments> for &str {
    fn eq(&self, other: &ToolArguments) -> bool {
        *self == other.as_str()
    }
}

impl fmt::Debug for ToolArguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for ToolArguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ToolArguments {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ToolArguments {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(ToolArguments::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_and_serde_is_a_plain_string() {
        let a = ToolArguments::from(String::from("{\"a\":1}"));
        let b = a.clone();
        assert!(ToolArguments::ptr_eq(&a, &b));
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"{\\\"a\\\":1}\"");
        let back: ToolArguments = serde_json::from_str("\"{\\\"a\\\":1}\"").unwrap();
        assert_eq!(back, a);
        assert_eq!(a, "{\"a\":1}");
        drop(b);
        assert_eq!(a.into_string(), "{\"a\":1}");
    }
}
