//! Model-facing tool names: `mcp__<server>__<raw>`, shortened with a hash when needed.

use sha2::{Digest, Sha256};

/// The longest tool name the model accepts.
pub const MAX_NAME: usize = 64;

pub use dsh_mcp_api::config::valid_server_name;

/// The name the model sees for the server's tool `raw` (upstream §4.2): `mcp__<server>__<raw>`
/// with every character outside `[A-Za-z0-9_-]` replaced by `_`; when that changed anything or
/// the result is longer than 64 characters, its first 51 characters, `_`, and the first 12
/// hex digits of sha256(`server` NUL `raw`). The raw name is what goes on the wire.
pub fn tool_name(server: &str, raw: &str) -> String {
    let full = format!("mcp__{server}__{raw}");
    let clean: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean == full && clean.len() <= MAX_NAME {
        return clean;
    }
    let mut hasher = Sha256::new();
    hasher.update(server.as_bytes());
    hasher.update([0u8]);
    hasher.update(raw.as_bytes());
    let digest = hasher.finalize();
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    // `clean` is ASCII, so byte slicing is on character boundaries.
    let head = &clean[..clean.len().min(51)];
    format!("{head}_{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_through() {
        assert_eq!(tool_name("fs", "read_file"), "mcp__fs__read_file");
        assert_eq!(tool_name("a-b", "x-y_z9"), "mcp__a-b__x-y_z9");
    }

    #[test]
    fn changed_names_get_the_hash() {
        let n = tool_name("srv", "get.thing");
        // sha256("srv\0get.thing")
        let mut h = Sha256::new();
        h.update(b"srv\0get.thing");
        let hex: String = h
            .finalize()
            .iter()
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(n, format!("mcp__srv__get_thing_{hex}"));
    }

    #[test]
    fn long_names_are_cut_to_64_with_the_hash() {
        let raw = "a".repeat(80);
        let n = tool_name("server", &raw);
        assert_eq!(n.len(), 64);
        assert!(n.starts_with("mcp__server__aaaa"));
        assert_eq!(&n[51..52], "_");
        assert!(n[52..].bytes().all(|b| b.is_ascii_hexdigit()));
        // distinct raw names that share the head stay distinct
        let other = tool_name("server", &format!("{}b", "a".repeat(80)));
        assert_ne!(n, other);
        assert_eq!(n[..51], other[..51]);
    }

    #[test]
    fn exactly_64_is_kept() {
        let raw = "r".repeat(64 - "mcp__s__".len());
        assert_eq!(tool_name("s", &raw).len(), 64);
        assert_eq!(tool_name("s", &raw), format!("mcp__s__{raw}"));
    }

    #[test]
    fn server_names() {
        assert!(valid_server_name("git_hub-2"));
        assert!(!valid_server_name(""));
        assert!(!valid_server_name("a.b"));
        assert!(!valid_server_name(&"x".repeat(33)));
    }
}
