//! Hostile inputs: huge lines, binary data, output floods — bounded output, no panics.

use serde_json::json;

use crate::common::{env, envelope};

#[tokio::test]
async fn a_10mb_single_line() {
    let e = env().await;
    let p = e.file("one-line.txt", "a".repeat(10 * 1024 * 1024));
    let r = e.call("read", json!({"file_path": "one-line.txt"})).await;
    let text = r.text();
    assert_eq!(
        text,
        envelope(
            &p,
            &format!(
                "1: {}... (line truncated to 2000 chars)\n\n(End of file - total 1 lines)",
                "a".repeat(2000)
            )
        )
    );
    let r = e.call("grep", json!({"pattern": "a+"})).await;
    assert!(r.text().len() < 2200, "{}", r.text().len());
    assert!(r.text().ends_with(" (line truncated)"));
}

#[tokio::test]
async fn binary_content_is_refused_or_skipped() {
    let e = env().await;
    let mut blob: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
    blob.extend_from_slice(b"\nneedle\n");
    e.file("blob.bin", &blob);
    let r = e.call("read", json!({"file_path": "blob.bin"})).await;
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::FS_NOT_TEXT));
    let r = e.call("grep", json!({"pattern": "needle"})).await;
    assert_eq!(r.text(), "No matches found");
    // A NUL after the 8192-byte sniff window is still valid UTF-8 text for read.
    let mut late = "x\n".repeat(5000).into_bytes();
    late.extend_from_slice(b"late\0nul\n");
    e.file("late.txt", &late);
    let r = e
        .call("read", json!({"file_path": "late.txt", "offset": 5001}))
        .await;
    assert!(!r.is_error, "{}", r.text());
}

#[tokio::test]
async fn raw_output_overflow_is_refused() {
    let e = env().await;
    // 21 MB of matching lines: more than the 20,000,000-byte raw budget.
    let line = format!("{}\n", "m".repeat(999));
    e.file("flood.txt", line.repeat(21_000));
    let r = e.call("grep", json!({"pattern": "m"})).await;
    assert_eq!(
        r.code(),
        Some(&dsh_tool_fs::codes::SEARCH_RAW_OUTPUT_OVERFLOW)
    );
    assert_eq!(
        r.text(),
        "Error: grep output exceeded 20000000 bytes; narrow pattern, path, or include and retry"
    );
}

#[tokio::test]
async fn many_lines_read_is_windowed() {
    let e = env().await;
    e.file("many.txt", "l\n".repeat(100_000));
    let r = e.call("read", json!({"file_path": "many.txt"})).await;
    let text = r.text();
    assert!(
        text.ends_with(
            "(Showing lines 1-2000 of 100000. Use offset=2001 to continue.)\n</content>"
        )
    );
    let r = e
        .call("read", json!({"file_path": "many.txt", "offset": 99_999}))
        .await;
    assert!(
        r.text()
            .ends_with("99999: l\n100000: l\n\n(End of file - total 100000 lines)\n</content>")
    );
}

#[tokio::test]
async fn edit_refuses_huge_files() {
    let e = crate::common::env_opts(false).await;
    let p = e.path("huge.txt");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(dsh_tool_fs::edit::MAX_EDIT_BYTES + 1).unwrap(); // sparse: no disk cost
    let r = e
        .call(
            "edit",
            json!({"file_path": "huge.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::FS_TOO_LARGE));
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot edit \"{}\": file too large (67108865 bytes; the limit is 67108864)",
            p.display()
        )
    );
}
