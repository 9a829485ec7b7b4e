//! The in-repo MCP test server, as a stdio server a test configures.

use std::path::PathBuf;

/// The path of this crate's `acp_mcp_test_server` example (built with its tests).
pub fn test_server() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("acp_mcp_test_server");
    assert!(
        bin.is_file(),
        "{} is missing: `cargo test -p dsh-acp` builds it",
        bin.display()
    );
    bin
}
