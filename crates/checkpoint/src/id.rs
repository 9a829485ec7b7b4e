//! Content addresses: SHA-256 of an object's bytes.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use crate::error::CheckpointError;

/// The SHA-256 of a blob or tree object.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub [u8; 32]);

impl ObjectId {
    /// The id of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        ObjectId(Sha256::digest(bytes).into())
    }

    /// Lowercase hex (64 characters).
    pub fn hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 15)]));
        }
        s
    }

    /// The first 12 hex digits, for display.
    pub fn short(&self) -> String {
        self.hex()[..12].to_owned()
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", self.short())
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl FromStr for ObjectId {
    type Err = CheckpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return Err(CheckpointError::NotFound(s.to_owned()));
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let hi = nibble(pair[0]).ok_or_else(|| CheckpointError::NotFound(s.to_owned()))?;
            let lo = nibble(pair[1]).ok_or_else(|| CheckpointError::NotFound(s.to_owned()))?;
            out[i] = (hi << 4) | lo;
        }
        Ok(ObjectId(out))
    }
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl serde::Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.hex())
    }
}

impl<'de> serde::Deserialize<'de> for ObjectId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for ObjectId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ObjectId".into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(g)
    }
}

#[cfg(test)]
mod tests {
    use super::ObjectId;

    #[test]
    fn hex_round_trips() {
        let id = ObjectId::of(b"hello");
        assert_eq!(
            id.hex(),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(id.hex().parse::<ObjectId>().ok(), Some(id));
        assert!("xyz".parse::<ObjectId>().is_err());
    }
}
