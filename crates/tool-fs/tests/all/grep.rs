//! `grep`: output format, ignore rules, include globs, caps, errors.

use dsh_tools::ToolErrorCode;
use serde_json::json;

use crate::common::{env, stored_path};

#[tokio::test]
async fn groups_matches_by_file_sorted_by_path() {
    let e = env().await;
    e.file("b/c.txt", "nothing\nneedle here\n");
    e.file("a.txt", "needle one\nhay\nneedle two\r\n");
    e.file("z.md", "no match\n");
    let r = e.call("grep", json!({"pattern": "needle"})).await;
    assert_eq!(
        r.text(),
        "Found 3 matches\n\na.txt\nLine 1: needle one\nLine 3: needle two\n\nb/c.txt\nLine 2: needle here"
    );
    let r = e.call("grep", json!({"pattern": "needle one"})).await;
    assert_eq!(r.text(), "Found 1 match\n\na.txt\nLine 1: needle one");
    let r = e.call("grep", json!({"pattern": "absent"})).await;
    assert_eq!((r.text().as_str(), r.is_error), ("No matches found", false));
    // A single file as path, and a regex.
    let r = e
        .call("grep", json!({"pattern": "^ne+dle \\w+", "path": "a.txt"}))
        .await;
    assert_eq!(
        r.text(),
        "Found 2 matches\n\na.txt\nLine 1: needle one\nLine 3: needle two"
    );
    // Whitespace-only patterns are allowed.
    let r = e.call("grep", json!({"pattern": " "})).await;
    assert!(r.text().starts_with("Found 4 matches"), "{}", r.text());
}

#[tokio::test]
async fn respects_ignore_files_and_skips_hidden_and_binary() {
    let e = env().await;
    std::fs::create_dir(e.path(".git")).unwrap();
    e.file(".gitignore", "build/\n*.log\n");
    e.file("build/out.txt", "token\n");
    e.file("debug.log", "token\n");
    e.file(".hidden.txt", "token\n");
    e.file("data.bin", b"token\n\0\x01binary");
    e.file("src/ok.txt", "token\n");
    let r = e.call("grep", json!({"pattern": "token"})).await;
    assert_eq!(r.text(), "Found 1 match\n\nsrc/ok.txt\nLine 1: token");
}

#[tokio::test]
async fn include_restricts_files() {
    let e = env().await;
    e.file("src/a.ts", "hit\n");
    e.file("src/b.tsx", "hit\n");
    e.file("src/c.rs", "hit\n");
    let r = e
        .call("grep", json!({"pattern": "hit", "include": "*.rs"}))
        .await;
    assert_eq!(r.text(), "Found 1 match\n\nsrc/c.rs\nLine 1: hit");
    let r = e
        .call("grep", json!({"pattern": "hit", "include": "*.{ts,tsx}"}))
        .await;
    assert_eq!(
        r.text(),
        "Found 2 matches\n\nsrc/a.ts\nLine 1: hit\n\nsrc/b.tsx\nLine 1: hit"
    );
}

#[tokio::test]
async fn caps_at_250_matches_and_saves_the_rest() {
    let e = env().await;
    let content: String = (1..=300).map(|i| format!("match {i}\n")).collect();
    e.file("big.txt", content);
    let r = e.call("grep", json!({"pattern": "match"})).await;
    let text = r.text();
    assert!(text.starts_with("Found 250 of 300 matches\n\nbig.txt\nLine 1: match 1\n"));
    assert!(text.contains("\nLine 250: match 250\n\n(Full grep result stored at: "));
    assert!(!text.contains("Line 251:"));
    let saved = stored_path(&text);
    assert!(text.ends_with(&format!("(Full grep result stored at: {}. Use read with offset/limit, or grep this path to search within it.)", saved.display())));
    let full = std::fs::read_to_string(saved).unwrap();
    assert!(full.starts_with("Found 300 matches\n\nbig.txt\n"));
    assert!(full.contains("Line 300: match 300"));
}

#[tokio::test]
async fn long_and_non_utf8_lines() {
    let e = env().await;
    let long = format!("needle {}", "ü".repeat(3000));
    e.file("long.txt", format!("{long}\n"));
    e.file("latin1.txt", b"needle caf\xe9\n");
    let r = e.call("grep", json!({"pattern": "needle"})).await;
    let text = r.text();
    let expected_cut = {
        let mut cut = 2000;
        while !long.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("Line 1: {} (line truncated)", &long[..cut])
    };
    assert_eq!(
        text,
        format!(
            "Found 2 matches\n\nlatin1.txt\nLine 1: (line is not valid UTF-8)\n\nlong.txt\n{expected_cut}"
        )
    );
}

#[tokio::test]
async fn symlink_loops_unicode_paths() {
    let e = env().await;
    e.file("dir ü/ファイル.txt", "needle\n");
    std::os::unix::fs::symlink(e.path("dir ü"), e.path("dir ü/loop")).unwrap();
    let r = e.call("grep", json!({"pattern": "needle"})).await;
    assert_eq!(
        r.text(),
        "Found 1 match\n\ndir ü/ファイル.txt\nLine 1: needle"
    );
}

#[tokio::test]
async fn invalid_arguments_and_patterns() {
    let e = env().await;
    e.file("a.txt", "x\n");
    for (args, msg) in [
        (
            json!({}),
            "invalid arguments: missing required property \"pattern\"",
        ),
        (json!({"pattern": ""}), "pattern must be a non-empty string"),
        (
            json!({"pattern": "x", "include": "  "}),
            "include must be a non-empty glob when given",
        ),
        (
            json!({"pattern": "x", "include": "!*.rs"}),
            "include must not start with \"!\": negated globs are not supported",
        ),
        (
            json!({"pattern": "x", "include": "*.rs,*.ts"}),
            "include must be a single glob; use braces for alternatives, e.g. \"*.{ts,tsx}\"",
        ),
        (
            json!({"pattern": "x", "path": ""}),
            "path must be a non-empty string when given",
        ),
    ] {
        let r = e.call("grep", args.clone()).await;
        assert_eq!(r.text(), format!("Error: {msg}"), "{args}");
        assert_eq!(r.code(), Some(&ToolErrorCode::InvalidArgs));
    }
    let r = e.call("grep", json!({"pattern": "(unclosed"})).await;
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::SEARCH_INVALID_PATTERN));
    assert!(
        r.text()
            .starts_with("Error: grep pattern rejected by ripgrep: "),
        "{}",
        r.text()
    );
    let r = e
        .call("grep", json!({"pattern": "x", "include": "a[b"}))
        .await;
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::SEARCH_INVALID_PATTERN));
    let r = e
        .call("grep", json!({"pattern": "x", "path": "missing"}))
        .await;
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot grep \"{}\": not found",
            e.path("missing").display()
        )
    );
}
