//! `GET /v1/sessions/{id}/files`: the session's directory for `@` mentions, confined to it.

use dsh_approval::ApprovalPolicy;
use serde_json::{Value, json};

use crate::common::*;

async fn get(s: &Server, id: &str, query: &str) -> (u16, Value) {
    let r = s
        .http
        .get(s.url(&format!("/v1/sessions/{id}/files?{query}")))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn paths(v: &Value) -> Vec<String> {
    v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_lists_the_working_directory_without_ignored_files_and_refuses_ways_out() {
    let s = Server::start(vec![], ApprovalPolicy::Never).await;
    let dir = s.h.dir().to_path_buf();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "no").unwrap();
    std::fs::create_dir_all(dir.join("src/deep")).unwrap();
    std::fs::create_dir_all(dir.join("target/debug")).unwrap();
    std::fs::write(dir.join("src/main.rs"), "fn main() {}").unwrap();
    std::fs::write(dir.join("src/deep/Lib.rs"), "").unwrap();
    std::fs::write(dir.join("notes.md"), "").unwrap();
    std::fs::write(dir.join(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::write(dir.join("target/debug/out"), "").unwrap();
    std::fs::write(dir.join("build.log"), "").unwrap();
    std::fs::write(dir.join(".env"), "TOKEN=x").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.join("out-dir")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.join("out-file")).unwrap();
    std::os::unix::fs::symlink(dir.join("notes.md"), dir.join("in-file")).unwrap();
    let id = s.create(json!({})).await;

    let (status, all) = get(&s, &id, "").await;
    assert_eq!(status, 200, "{all}");
    let listed = paths(&all);
    for want in ["src/main.rs", "src/deep/Lib.rs", "notes.md", "in-file"] {
        assert!(
            listed.contains(&want.to_owned()),
            "{want} missing: {listed:?}"
        );
    }
    for gone in [
        "target/debug/out",
        "build.log",
        ".env",
        "out-file",
        "out-dir/secret.txt",
    ] {
        assert!(
            !listed.contains(&gone.to_owned()),
            "{gone} listed: {listed:?}"
        );
    }
    assert!(!listed.iter().any(|p| p.contains("secret")), "{listed:?}");
    assert_eq!(all["truncated"], false);
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "in order");

    // What follows an `@`: case-insensitive text of the path; a sub-directory; a bound.
    let (_, lib) = get(&s, &id, "q=deep%2Flib").await;
    assert_eq!(paths(&lib), vec!["src/deep/Lib.rs"]);
    let (_, src) = get(&s, &id, "dir=src").await;
    assert_eq!(paths(&src), vec!["src/deep/Lib.rs", "src/main.rs"]);
    let (_, one) = get(&s, &id, "limit=1").await;
    assert_eq!(paths(&one).len(), 1);
    assert_eq!(one["truncated"], true);

    // Ways out, and bad bounds, refused naming the problem.
    for (query, says) in [
        ("dir=..", "`..`"),
        ("dir=src%2F..%2F..", "`..`"),
        ("dir=%2Fetc", "absolute"),
        ("dir=out-dir", "outside"),
        ("dir=notes.md", "not a directory"),
        ("dir=missing", "not a directory"),
        ("limit=0", "limit"),
        ("limit=5000", "limit"),
        ("other=1", "other"),
    ] {
        let (status, body) = get(&s, &id, query).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["code"], "INVALID_REQUEST", "{query}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(says), "{query}: {message}");
    }
    let (status, body) = get(&s, "no-such-session", "").await;
    assert_eq!(status, 404, "{body}");
    s.stop().await;
}
