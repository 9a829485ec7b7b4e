//! Bearer tokens: created once and shown once, stored as SHA-256 hashes in
//! `$DSH_HOME/serve-tokens.json`, compared in constant time.
//!
//! A running server re-reads the file when its modification time changes, so `token create`
//! and `token revoke` act on it without a restart.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use parking_lot::Mutex;
use ring::digest;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenKind {
    /// Everything: open sessions, send ops, close.
    Full,
    /// Watch only: `GET` requests and event streams.
    ReadOnly,
}

impl TokenKind {
    /// The spelling `token list` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Full => "full",
            TokenKind::ReadOnly => "read-only",
        }
    }
}

/// One stored token: never the secret, only its hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenEntry {
    /// A unique name (`token revoke NAME`).
    pub name: String,
    /// What it may do.
    pub kind: TokenKind,
    /// When it was created (RFC 3339).
    pub created: String,
    /// SHA-256 of the secret, lowercase hex.
    pub sha256: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TokenFile {
    #[serde(default)]
    tokens: Vec<TokenEntry>,
}

/// Token store failures.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file could not be read or written.
    #[error("token file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a token file.
    #[error("token file {path} is malformed: {source}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// A token of this name exists.
    #[error("a token named `{0}` exists; revoke it first or choose another name")]
    Exists(String),
    /// No token of this name.
    #[error("no token named `{0}`")]
    NotFound(String),
    /// The system's random source failed.
    #[error("the system random source failed")]
    Random,
    /// A name that cannot be used.
    #[error("invalid token name `{0}` (1-64 characters: letters, digits, `-`, `_`, `.`)")]
    InvalidName(String),
}

/// The token file at a path.
#[derive(Debug)]
pub struct TokenStore {
    path: PathBuf,
    cache: Mutex<Option<(Option<SystemTime>, Vec<TokenEntry>)>>,
}

/// The outcome of checking a request's credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// No token exists: the server is open (loopback or unix socket only).
    Open,
    /// A valid token of this kind.
    Token(TokenKind),
    /// Tokens exist and the request carries none.
    Missing,
    /// The token is not one of the stored ones.
    Invalid,
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn hash(secret: &str) -> Vec<u8> {
    digest::digest(&digest::SHA256, secret.as_bytes())
        .as_ref()
        .to_vec()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Constant-time equality of two equal-length byte strings (length is public: both are
/// SHA-256 digests).
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    // Keep the optimiser from short-circuiting the fold.
    std::hint::black_box(diff) == 0
}

impl TokenStore {
    /// The store at `path` (the file need not exist).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        TokenStore {
            path: path.into(),
            cache: Mutex::new(None),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<Vec<TokenEntry>, TokenError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice::<TokenFile>(&bytes)
                .map(|f| f.tokens)
                .map_err(|source| TokenError::Malformed {
                    path: self.path.clone(),
                    source,
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => Err(TokenError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }

    fn write(&self, tokens: Vec<TokenEntry>) -> Result<(), TokenError> {
        let io = |source| TokenError::Io {
            path: self.path.clone(),
            source,
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let body = serde_json::to_vec_pretty(&TokenFile { tokens }).map_err(|source| {
            TokenError::Malformed {
                path: self.path.clone(),
                source,
            }
        })?;
        let tmp = self.path.with_extension("json.tmp");
        {
            use std::io::Write;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut f = options.open(&tmp).map_err(io)?;
            f.write_all(&body).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        *self.cache.lock() = None;
        Ok(())
    }

    /// The stored tokens (never a secret).
    pub fn list(&self) -> Result<Vec<TokenEntry>, TokenError> {
        self.read()
    }

    /// Creates a token and returns its secret (shown once; only the hash is stored).
    pub fn create(&self, name: &str, kind: TokenKind) -> Result<String, TokenError> {
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            return Err(TokenError::InvalidName(name.to_owned()));
        }
        let mut tokens = self.read()?;
        if tokens.iter().any(|t| t.name == name) {
            return Err(TokenError::Exists(name.to_owned()));
        }
        let mut raw = [0u8; 32];
        SystemRandom::new()
            .fill(&mut raw)
            .map_err(|_| TokenError::Random)?;
        let secret = format!("dshs_{}", hex(&raw));
        tokens.push(TokenEntry {
            name: name.to_owned(),
            kind,
            created: jiff::Timestamp::now().to_string(),
            sha256: hex(&hash(&secret)),
        });
        self.write(tokens)?;
        Ok(secret)
    }

    /// Deletes the token `name`.
    pub fn revoke(&self, name: &str) -> Result<(), TokenError> {
        let mut tokens = self.read()?;
        let before = tokens.len();
        tokens.retain(|t| t.name != name);
        if tokens.len() == before {
            return Err(TokenError::NotFound(name.to_owned()));
        }
        self.write(tokens)
    }

    /// The current tokens, re-read when the file changed.
    fn current(&self) -> Result<Vec<TokenEntry>, TokenError> {
        let mtime = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        let mut cache = self.cache.lock();
        if let Some((t, tokens)) = cache.as_ref()
            && *t == mtime
        {
            return Ok(tokens.clone());
        }
        let tokens = self.read()?;
        *cache = Some((mtime, tokens.clone()));
        Ok(tokens)
    }

    /// Whether any token exists.
    pub fn any(&self) -> Result<bool, TokenError> {
        Ok(!self.current()?.is_empty())
    }

    /// Checks a presented bearer secret. Every stored hash is compared, in constant time.
    pub fn check(&self, presented: Option<&str>) -> Result<Access, TokenError> {
        let tokens = self.current()?;
        if tokens.is_empty() {
            return Ok(Access::Open);
        }
        let Some(secret) = presented else {
            return Ok(Access::Missing);
        };
        let presented = hash(secret);
        let mut found = None;
        for t in &tokens {
            let stored = unhex(&t.sha256).unwrap_or_default();
            if ct_eq(&stored, &presented) && found.is_none() {
                found = Some(t.kind);
            }
        }
        Ok(found.map_or(Access::Invalid, Access::Token))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn create_check_revoke() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().join("serve-tokens.json"));
        assert_eq!(store.check(None).unwrap(), Access::Open);
        let full = store.create("ci", TokenKind::Full).unwrap();
        let ro = store.create("watch", TokenKind::ReadOnly).unwrap();
        assert!(matches!(
            store.create("ci", TokenKind::Full),
            Err(TokenError::Exists(_))
        ));
        assert_eq!(
            store.check(Some(&full)).unwrap(),
            Access::Token(TokenKind::Full)
        );
        assert_eq!(
            store.check(Some(&ro)).unwrap(),
            Access::Token(TokenKind::ReadOnly)
        );
        assert_eq!(store.check(Some("dshs_00")).unwrap(), Access::Invalid);
        assert_eq!(store.check(None).unwrap(), Access::Missing);
        // The file holds hashes, never a secret.
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(!text.contains(&full) && !text.contains(&ro));
        store.revoke("ci").unwrap();
        assert_eq!(store.check(Some(&full)).unwrap(), Access::Invalid);
        assert!(matches!(store.revoke("ci"), Err(TokenError::NotFound(_))));
        assert!(matches!(
            store.create("no spaces", TokenKind::Full),
            Err(TokenError::InvalidName(_))
        ));
    }
}
