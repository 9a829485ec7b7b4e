//! Paths to the repository's test fixtures (`<repo>/fixtures`, see `fixtures/README.md`).

use std::path::PathBuf;

use bytes::Bytes;

/// `<repo>/fixtures`, resolved from this crate's manifest directory at compile time, so it works
/// from any checkout path.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures"))
}

/// Reads `fixtures/<relative>` (e.g. `deepseek/text.sse`); the error names the full path.
pub fn read_fixture(relative: &str) -> std::io::Result<Bytes> {
    let path = fixtures_dir().join(relative);
    std::fs::read(&path).map(Bytes::from).map_err(|err| {
        std::io::Error::new(err.kind(), format!("cannot read {}: {err}", path.display()))
    })
}
