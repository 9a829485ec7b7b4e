//! `write` and `edit`: formats, line endings, matching rules, errors, argument checks.

use dsh_tools::ToolErrorCode;
use serde_json::json;

use crate::common::{env, env_opts};

fn created(p: &std::path::Path, verb: &str) -> String {
    format!(
        "<path>{}</path>\n<type>file</type>\n<content>\n{verb}\n</content>",
        p.display()
    )
}

#[tokio::test]
async fn write_creates_parents_then_updates() {
    let e = env().await;
    let p = e.path("new dir/sub/ファイル.txt");
    let r = e
        .call(
            "write",
            json!({"file_path": "new dir/sub/ファイル.txt", "content": "one\n"}),
        )
        .await;
    assert_eq!(r.text(), created(&p, "Created file"));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "one\n");
    // The write itself is an observation: a second write needs no read.
    let r = e
        .call("write", json!({"file_path": p, "content": ""}))
        .await;
    assert_eq!(r.text(), created(&p, "Updated file"));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "");
    // No stray temp files.
    let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
        .unwrap()
        .map(|d| d.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1);
}

#[tokio::test]
async fn write_keeps_mode_and_follows_symlinks() {
    use std::os::unix::fs::PermissionsExt;
    let e = env().await;
    let target = e.file("script.sh", "#!/bin/sh\n");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&target, e.path("link.sh")).unwrap();
    e.call("read", json!({"file_path": "link.sh"})).await;
    let r = e
        .call(
            "write",
            json!({"file_path": "link.sh", "content": "echo hi\n"}),
        )
        .await;
    assert!(!r.is_error, "{}", r.text());
    assert!(
        std::fs::symlink_metadata(e.path("link.sh"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "echo hi\n");
    assert_eq!(
        std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
        0o755
    );
}

#[tokio::test]
async fn write_errors() {
    let e = env().await;
    std::fs::create_dir(e.path("adir")).unwrap();
    let r = e
        .call("write", json!({"file_path": "adir", "content": "x"}))
        .await;
    assert_eq!(
        r.text(),
        format!(
            "Error: cannot write \"{}\": not a regular file",
            e.path("adir").display()
        )
    );
    e.file("plain", "x");
    let r = e
        .call(
            "write",
            json!({"file_path": "plain/child.txt", "content": "x"}),
        )
        .await;
    assert!(r.is_error);
    assert!(
        r.text().starts_with(&format!(
            "Error: cannot write \"{}\"",
            e.path("plain/child.txt").display()
        )),
        "{}",
        r.text()
    );
    for (args, msg) in [
        (
            json!({"content": "x"}),
            "invalid arguments: missing required property \"file_path\"",
        ),
        (
            json!({"file_path": "a"}),
            "invalid arguments: missing required property \"content\"",
        ),
        (
            json!({"file_path": "  ", "content": "x"}),
            "file_path must be a non-empty string",
        ),
        (
            json!({"file_path": "a", "content": null}),
            "invalid arguments: \"content\" must be a string",
        ),
    ] {
        let r = e.call("write", args.clone()).await;
        assert_eq!(r.text(), format!("Error: {msg}"), "{args}");
        assert_eq!(r.code(), Some(&ToolErrorCode::InvalidArgs));
    }
}

#[tokio::test]
async fn edit_replaces_uniquely_or_all() {
    let e = env().await;
    let p = e.file("code.rs", "let a = 1;\nlet b = 1;\nlet c = 2;\n");
    e.call("read", json!({"file_path": "code.rs"})).await;
    let r = e
        .call(
            "edit",
            json!({"file_path": "code.rs", "old_string": "c = 2", "new_string": "c = 3"}),
        )
        .await;
    assert_eq!(
        r.text(),
        format!("The file {} has been updated successfully.", p.display())
    );
    // Consecutive edits need no re-read.
    let r = e
        .call(
            "edit",
            json!({"file_path": "code.rs", "old_string": "= 1", "new_string": "= 9"}),
        )
        .await;
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::FS_AMBIGUOUS_EDIT));
    assert_eq!(
        r.text(),
        format!(
            "Error: old_string matched 2 times in \"{}\"; provide a more specific old_string or set replace_all to true",
            p.display()
        )
    );
    let r = e
        .call("edit", json!({"file_path": "code.rs", "old_string": "= 1", "new_string": "= 9", "replace_all": true}))
        .await;
    assert_eq!(
        r.text(),
        format!(
            "The file {} has been updated. All occurrences were successfully replaced.",
            p.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        "let a = 9;\nlet b = 9;\nlet c = 3;\n"
    );
    let r = e
        .call(
            "edit",
            json!({"file_path": "code.rs", "old_string": "nowhere", "new_string": "x"}),
        )
        .await;
    assert_eq!(r.code(), Some(&dsh_tool_fs::codes::FS_EDIT_NOT_FOUND));
    assert_eq!(
        r.text(),
        format!("Error: old_string was not found in \"{}\"", p.display())
    );
    // Empty new_string deletes.
    let r = e
        .call(
            "edit",
            json!({"file_path": "code.rs", "old_string": "let c = 3;\n", "new_string": ""}),
        )
        .await;
    assert!(!r.is_error);
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        "let a = 9;\nlet b = 9;\n"
    );
}

#[tokio::test]
async fn edit_keeps_crlf_style() {
    let e = env().await;
    let p = e.file("win.txt", "one\r\ntwo\r\nthree\r\n");
    e.call("read", json!({"file_path": "win.txt"})).await;
    let r = e.call("edit", json!({"file_path": "win.txt", "old_string": "one\ntwo", "new_string": "uno\r\ndos\nmas"})).await;
    assert!(!r.is_error, "{}", r.text());
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        "uno\r\ndos\r\nmas\r\nthree\r\n"
    );
    let q = e.file("unix.txt", "a\nb\n");
    e.call("read", json!({"file_path": "unix.txt"})).await;
    e.call(
        "edit",
        json!({"file_path": "unix.txt", "old_string": "a\r\nb", "new_string": "x\r\ny"}),
    )
    .await;
    assert_eq!(std::fs::read_to_string(&q).unwrap(), "x\ny\n");
}

#[tokio::test]
async fn edit_errors_and_arguments() {
    let e = env_opts(false).await;
    let missing = e.path("gone.txt");
    let r = e
        .call(
            "edit",
            json!({"file_path": "gone.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert_eq!(
        r.text(),
        format!("Error: cannot edit \"{}\": not found", missing.display())
    );
    let bin = e.file("bin.dat", b"a\0b");
    let r = e
        .call(
            "edit",
            json!({"file_path": "bin.dat", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert_eq!(
        r.text(),
        format!("Error: cannot edit \"{}\": binary file", bin.display())
    );
    e.file("t.txt", "abc");
    for (args, msg) in [
        (
            json!({"file_path": "t.txt", "old_string": "", "new_string": "x"}),
            "old_string must be a non-empty string",
        ),
        (
            json!({"file_path": "t.txt", "old_string": "a", "new_string": "a"}),
            "old_string and new_string must differ",
        ),
        (
            json!({"file_path": "t.txt", "old_string": "a"}),
            "invalid arguments: missing required property \"new_string\"",
        ),
        (
            json!({"file_path": "t.txt", "old_string": "a", "new_string": "b", "replace_all": "yes"}),
            "invalid arguments: \"replace_all\" must be a boolean",
        ),
        (
            json!({"file_path": "", "old_string": "a", "new_string": "b"}),
            "file_path must be a non-empty string",
        ),
    ] {
        let r = e.call("edit", args.clone()).await;
        assert_eq!(r.text(), format!("Error: {msg}"), "{args}");
        assert_eq!(r.code(), Some(&ToolErrorCode::InvalidArgs));
    }
    assert_eq!(std::fs::read_to_string(e.path("t.txt")).unwrap(), "abc");
}
