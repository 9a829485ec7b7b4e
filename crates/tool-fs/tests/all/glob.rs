//! `glob`: matching rules, order, caps, errors, symlink loops.

use std::time::{Duration, SystemTime};

use dsh_tools::codes;
use serde_json::json;

use crate::common::{env, stored_path};

fn touch(p: &std::path::Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(p).unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs))
        .unwrap();
}

#[tokio::test]
async fn matches_files_everywhere_oldest_first() {
    let e = env().await;
    touch(&e.file("src/main.rs", "fn main() {}"), 3);
    touch(&e.file("src/lib/deep.rs", ""), 1);
    touch(&e.file(".hidden/h.rs", ""), 2);
    touch(&e.file("ignored.rs", ""), 4);
    e.file(".gitignore", "ignored.rs\n");
    e.file(".git/hooks.rs", "");
    e.file("dir.rs/inner.txt", "");
    e.file("README.md", "");
    let r = e.call("glob", json!({"pattern": "*.rs"})).await;
    assert_eq!(
        r.text(),
        "src/lib/deep.rs\n.hidden/h.rs\nsrc/main.rs\nignored.rs"
    );
    let r = e.call("glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(r.text(), "src/main.rs");
    let r = e.call("glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(
        r.text(),
        "src/lib/deep.rs\n.hidden/h.rs\nsrc/main.rs\nignored.rs"
    );
    let r = e
        .call("glob", json!({"pattern": "*.rs", "path": "src"}))
        .await;
    assert_eq!(r.text(), "src/lib/deep.rs\nsrc/main.rs");
    let r = e.call("glob", json!({"pattern": "*.none"})).await;
    assert_eq!(r.text(), "No files found");
    assert!(!r.is_error);
}

#[tokio::test]
async fn paths_outside_the_cwd_are_absolute() {
    let e = env().await;
    let other = tempfile::tempdir().unwrap();
    let f = other.path().join("x y.txt");
    std::fs::write(&f, "").unwrap();
    let r = e
        .call("glob", json!({"pattern": "*.txt", "path": other.path()}))
        .await;
    assert_eq!(r.text(), f.display().to_string());
}

#[tokio::test]
async fn more_than_100_paths_are_capped_and_saved() {
    let e = env().await;
    for i in 0..130 {
        touch(&e.file(&format!("many/f{i:03}.txt"), ""), i);
    }
    let r = e.call("glob", json!({"pattern": "*.txt"})).await;
    let text = r.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 102);
    assert_eq!(lines[0], "many/f000.txt");
    assert_eq!(lines[99], "many/f099.txt");
    assert_eq!(lines[100], "");
    let saved = stored_path(lines[101]);
    assert_eq!(
        lines[101],
        format!(
            "(Showing 100 of 130 paths. Full sorted result stored at: {}. Use read with offset/limit, or grep this path to search within it.)",
            saved.display()
        )
    );
    assert!(saved.starts_with(e.scratch.path()));
    let full = std::fs::read_to_string(&saved).unwrap();
    assert_eq!(full.lines().count(), 130);
    assert_eq!(full.lines().last(), Some("many/f129.txt"));
}

#[tokio::test]
async fn symlink_loops_terminate() {
    let e = env().await;
    e.file("loop/a.txt", "");
    std::os::unix::fs::symlink(e.path("loop"), e.path("loop/again")).unwrap();
    std::os::unix::fs::symlink(e.path("loop/self"), e.path("loop/self")).unwrap();
    let r = e.call("glob", json!({"pattern": "*.txt"})).await;
    assert_eq!(r.text(), "loop/a.txt");
}

#[tokio::test]
async fn invalid_arguments_and_patterns() {
    let e = env().await;
    for (args, msg, code) in [
        (
            json!({}),
            "invalid arguments: missing required property \"pattern\"",
            codes::INVALID_ARGS,
        ),
        (
            json!({"pattern": ""}),
            "pattern must be a non-empty string",
            codes::INVALID_ARGS,
        ),
        (
            json!({"pattern": "*", "path": ""}),
            "path must be a non-empty string when given",
            codes::INVALID_ARGS,
        ),
        (
            json!({"pattern": "*", "path": 1}),
            "invalid arguments: \"path\" must be a string",
            codes::INVALID_ARGS,
        ),
        (
            json!({"pattern": "a[b"}),
            "glob pattern rejected: error parsing glob 'a[b': unclosed character class; missing ']'",
            dsh_tool_fs::codes::SEARCH_INVALID_PATTERN,
        ),
    ] {
        let r = e.call("glob", args.clone()).await;
        assert_eq!(r.text(), format!("Error: {msg}"), "{args}");
        assert_eq!(r.code(), Some(&code));
    }
    let r = e
        .call("glob", json!({"pattern": "*", "path": "nowhere"}))
        .await;
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot glob \"{}\": not found",
            e.path("nowhere").display()
        )
    );
}
