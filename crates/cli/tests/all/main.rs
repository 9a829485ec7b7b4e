//! End-to-end tests of the `dsh` binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn dsh() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dsh"))
}

#[test]
fn version_prints_the_crate_version() {
    let out = dsh().arg("--version").output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.trim(), format!("dsh {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let out = dsh().arg("--no-such-flag").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("--no-such-flag"), "{stderr}");
}
