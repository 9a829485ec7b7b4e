//! `read`: envelope, numbering, windows, caps, errors, argument checks.

use dsh_tools::Concurrency;
use dsh_tools::ToolErrorCode;
use serde_json::json;

use crate::common::{env, envelope, permissions_enforced};

#[tokio::test]
async fn reads_numbered_lines_in_the_envelope() {
    let e = env().await;
    let p = e.file("a.txt", "alpha\nbeta\r\ngamma\n");
    let r = e.call("read", json!({"file_path": "a.txt"})).await;
    assert!(!r.is_error, "{}", r.text());
    assert_eq!(
        r.text(),
        envelope(
            &p,
            "1: alpha\n2: beta\n3: gamma\n\n(End of file - total 3 lines)"
        )
    );
    let meta = r.meta.unwrap();
    assert_eq!(meta["path"], json!(p.to_string_lossy()));
    assert_eq!(meta["offset"], json!(1));
    assert_eq!(meta["totalLines"], json!(3));
    assert_eq!(meta["lines"][1], json!({"number": 2, "text": "beta"}));
    assert!(meta["version"].is_string());
}

#[tokio::test]
async fn line_counting_is_exact() {
    let e = env().await;
    let p = e.file("no-final-newline.txt", "one\ntwo");
    let r = e.call("read", json!({"file_path": p})).await;
    assert_eq!(
        r.text(),
        envelope(&p, "1: one\n2: two\n\n(End of file - total 2 lines)")
    );
    let p = e.file("blank-lines.txt", "\n\nx\n");
    let r = e.call("read", json!({"file_path": p})).await;
    assert_eq!(
        r.text(),
        envelope(&p, "1: \n2: \n3: x\n\n(End of file - total 3 lines)")
    );
}

#[tokio::test]
async fn windows_and_pagination_footer() {
    let e = env().await;
    let content: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    let p = e.file("ten.txt", content);
    let r = e
        .call(
            "read",
            json!({"file_path": "ten.txt", "offset": 3, "limit": 2}),
        )
        .await;
    assert_eq!(
        r.text(),
        envelope(
            &p,
            "3: line 3\n4: line 4\n\n(Showing lines 3-4 of 10. Use offset=5 to continue.)"
        )
    );
    let r = e
        .call("read", json!({"file_path": "ten.txt", "offset": 9}))
        .await;
    assert_eq!(
        r.text(),
        envelope(
            &p,
            "9: line 9\n10: line 10\n\n(End of file - total 10 lines)"
        )
    );
    let r = e
        .call("read", json!({"file_path": "ten.txt", "offset": 11}))
        .await;
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::FS_NOT_FOUND));
    assert_eq!(
        r.text(),
        format!(
            "Error: offset 11 is out of range for \"{}\" (10 lines)",
            p.display()
        )
    );
}

#[tokio::test]
async fn empty_file() {
    let e = env().await;
    let p = e.file("empty.txt", "");
    let r = e.call("read", json!({"file_path": "empty.txt"})).await;
    assert_eq!(r.text(), envelope(&p, "(End of file - total 0 lines)"));
    let r = e
        .call("read", json!({"file_path": "empty.txt", "offset": 2}))
        .await;
    assert_eq!(
        r.text(),
        format!(
            "Error: offset 2 is out of range for \"{}\" (0 lines)",
            p.display()
        )
    );
}

#[tokio::test]
async fn long_lines_and_the_byte_cap() {
    let e = env().await;
    let long = "é".repeat(2500);
    let p = e.file("long.txt", format!("{long}\nshort\n"));
    let r = e.call("read", json!({"file_path": "long.txt"})).await;
    let expected_line = format!("1: {}... (line truncated to 2000 chars)", "é".repeat(2000));
    assert_eq!(
        r.text(),
        envelope(
            &p,
            &format!("{expected_line}\n2: short\n\n(End of file - total 2 lines)")
        )
    );

    // 100 lines of 1000 bytes: 51 fit in 51200 bytes (51*1000 + 50 separators).
    let content: String = (0..100)
        .map(|_| format!("{}\n", "x".repeat(1000)))
        .collect();
    e.file("wide.txt", content);
    let r = e.call("read", json!({"file_path": "wide.txt"})).await;
    let text = r.text();
    assert!(
        text.ends_with(
            "\n\n(Output capped. Showing lines 1-51. Use offset=52 to continue.)\n</content>"
        ),
        "{}",
        &text[text.len() - 200..]
    );
    assert!(text.contains("\n51: x") && !text.contains("\n52: "));
}

#[tokio::test]
async fn errors_name_the_problem() {
    let e = env().await;
    let missing = e.path("missing.txt");
    let r = e.call("read", json!({"file_path": "missing.txt"})).await;
    assert_eq!(
        r.text(),
        format!("Error: cannot read \"{}\": not found", missing.display())
    );
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::FS_NOT_FOUND));

    std::fs::create_dir(e.path("sub")).unwrap();
    let r = e.call("read", json!({"file_path": "sub"})).await;
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot read \"{}\": not a regular file",
            e.path("sub").display()
        )
    );

    let bin = e.file("blob.bin", b"abc\0def");
    let r = e.call("read", json!({"file_path": "blob.bin"})).await;
    assert_eq!(
        r.text(),
        format!("Error: cannot read \"{}\": binary file", bin.display())
    );
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::FS_NOT_TEXT));

    let latin1 = e.file("latin1.txt", b"caf\xe9\n");
    let r = e.call("read", json!({"file_path": "latin1.txt"})).await;
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot read \"{}\": invalid UTF-8 text",
            latin1.display()
        )
    );

    // A path through a regular file (ENOTDIR) — a permission-style failure that also applies
    // to root.
    e.file("plain.txt", "x");
    let r = e
        .call("read", json!({"file_path": "plain.txt/inner"}))
        .await;
    assert!(r.is_error);
    assert!(r.text().starts_with(&format!(
        "Error: cannot read \"{}\"",
        e.path("plain.txt/inner").display()
    )));
}

#[tokio::test]
async fn permission_denied_when_enforced() {
    use std::os::unix::fs::PermissionsExt;
    let e = env().await;
    if !permissions_enforced(e.cwd()) {
        // Running as root (CAP_DAC_OVERRIDE): mode bits do not stop reads, so there is no
        // EACCES to observe. The ENOTDIR case in `errors_name_the_problem` covers the error
        // path that root can hit.
        return;
    }
    let p = e.file("secret.txt", "x");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
    let r = e.call("read", json!({"file_path": "secret.txt"})).await;
    assert_eq!(
        r.text(),
        format!("Error: cannot read \"{}\": permission denied", p.display())
    );
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::FS_PERMISSION_DENIED));
}

#[tokio::test]
async fn invalid_arguments() {
    let e = env().await;
    e.file("a.txt", "a\n");
    let cases = [
        (
            json!({}),
            "invalid arguments: missing required property \"file_path\"",
        ),
        (
            json!({"file_path": 3}),
            "invalid arguments: \"file_path\" must be a string",
        ),
        (
            json!({"file_path": ""}),
            "file_path must be a non-empty string",
        ),
        (
            json!({"file_path": "a.txt", "offset": 0}),
            "offset must be a positive integer",
        ),
        (
            json!({"file_path": "a.txt", "offset": 1.5}),
            "offset must be a positive integer",
        ),
        (
            json!({"file_path": "a.txt", "offset": "2"}),
            "invalid arguments: \"offset\" must be a number",
        ),
        (
            json!({"file_path": "a.txt", "limit": -1}),
            "limit must be a positive integer",
        ),
        (
            json!({"file_path": "a.txt", "limit": 2001}),
            "limit must be less than or equal to 2000",
        ),
    ];
    for (args, msg) in cases {
        let r = e.call("read", args.clone()).await;
        assert_eq!(r.text(), format!("Error: {msg}"), "{args}");
        assert_eq!(r.code(), Some(&ToolErrorCode::InvalidArgs));
    }
    let r = e.call_raw("read", "{not json").await;
    assert_eq!(
        r.text(),
        "Error: invalid arguments: \"arguments\" must be an object"
    );
}

#[tokio::test]
async fn unicode_and_spaces_in_paths_and_parallel_safety() {
    let e = env().await;
    let p = e.file("dir with space/ünï cødé 文件.txt", "héllo wörld 🌍\n");
    let r = e
        .call(
            "read",
            json!({"file_path": "dir with space/ünï cødé 文件.txt"}),
        )
        .await;
    assert_eq!(
        r.text(),
        envelope(&p, "1: héllo wörld 🌍\n\n(End of file - total 1 lines)")
    );
    assert_eq!(
        e.tools.concurrency(None, "read", r#"{"file_path":"x"}"#),
        Concurrency::ParallelSafe
    );
    for other in ["write", "edit", "glob", "grep"] {
        assert_eq!(
            e.tools.concurrency(None, other, "{}"),
            Concurrency::Exclusive
        );
    }
}
