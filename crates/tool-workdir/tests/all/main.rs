//! `working_directory` through the real tools pipeline and agent loop, with a scripted model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_kernel::EmptyConfig;
use dsh_session::feature::WorkingDirectoryChange;
use dsh_test_harness::TestHarness;
use dsh_tool_fs::FsToolsPlugin;
use dsh_tool_workdir::{WorkingDirectoryToolPlugin, resolve};
use dsh_tools::ToolRequest;

async fn harness() -> TestHarness {
    let h = TestHarness::builder()
        .plugin::<FsToolsPlugin>(Default::default())
        .plugin::<WorkingDirectoryToolPlugin>(EmptyConfig {})
        .build()
        .await;
    std::fs::create_dir_all(h.dir().join("sub/deeper")).unwrap();
    std::fs::write(h.dir().join("sub/note.txt"), "in sub\n").unwrap();
    std::fs::write(h.dir().join("file.txt"), "top\n").unwrap();
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cd_moves_the_agent_and_the_calls_after_it() {
    let h = harness().await;
    let agent = h.agent().await;
    let root = h.dir().to_path_buf();
    let r = h
        .tool_turn(
            &agent,
            &[&[
                ("c1", "working_directory", "{}"),
                ("c2", "working_directory", r#"{"cd":"sub"}"#),
                ("c3", "read", r#"{"file_path":"note.txt"}"#),
            ]],
            "ok",
        )
        .await;
    assert!(
        r[0].contains(&format!("Working directory: {}", root.display())),
        "{}",
        r[0]
    );
    let sub = root.join("sub");
    assert!(
        r[1].contains(&format!("Working directory changed to {}", sub.display())),
        "{}",
        r[1]
    );
    assert!(r[2].contains("1: in sub"), "the read after cd: {}", r[2]);
    assert_eq!(agent.options().cwd, sub);
    let changes: Vec<WorkingDirectoryChange> = agent
        .session()
        .events()
        .iter()
        .filter_map(|e| e.plugin::<WorkingDirectoryChange>().and_then(Result::ok))
        .collect();
    assert_eq!(
        changes,
        vec![WorkingDirectoryChange {
            cwd: sub.display().to_string()
        }]
    );
    // Relative to the current one, `..` included.
    let r = h
        .tool_turn(
            &agent,
            &[&[("c4", "working_directory", r#"{"cd":"deeper/.."}"#)]],
            "ok",
        )
        .await;
    assert!(r[0].contains("changed to"), "{}", r[0]);
    assert_eq!(agent.options().cwd, sub);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_targets_are_refused_and_change_nothing() {
    let h = harness().await;
    let agent = h.agent().await;
    let root = h.dir().to_path_buf();
    let r = h
        .tool_turn(
            &agent,
            &[&[
                ("c1", "working_directory", r#"{"cd":"missing"}"#),
                ("c2", "working_directory", r#"{"cd":"file.txt"}"#),
                ("c3", "working_directory", r#"{"cd":"  "}"#),
                ("c4", "working_directory", r#"{"cd":7}"#),
            ]],
            "ok",
        )
        .await;
    assert!(
        r[0].contains("cannot change to") && r[0].contains("missing"),
        "{}",
        r[0]
    );
    assert!(r[1].contains("not a directory"), "{}", r[1]);
    assert!(r[2].contains("`cd` must be a non-empty path"), "{}", r[2]);
    assert!(r[3].contains("invalid arguments"), "{}", r[3]);
    for x in &r {
        assert!(x.contains("\"isError\":true"), "{x}");
    }
    assert_eq!(agent.options().cwd, root);
    assert!(
        !agent
            .session()
            .events()
            .iter()
            .any(|e| e.kind() == "working-directory/change")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_without_an_agent_works_and_cd_without_one_fails_clearly() {
    let h = harness().await;
    let tools = h.tools();
    let r = tools
        .execute(ToolRequest::new(
            "c",
            "working_directory",
            "",
            "nobody",
            h.dir(),
        ))
        .await;
    assert!(!r.is_error, "{}", r.text());
    let r = tools
        .execute(ToolRequest::new(
            "c",
            "working_directory",
            r#"{"cd":"sub"}"#,
            "nobody",
            h.dir(),
        ))
        .await;
    assert_eq!(
        r.text(),
        "Error: working_directory requires an owning agent session"
    );
}

#[test]
fn tilde_resolves_against_home() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("h")).unwrap();
    let home = d.path().join("h");
    assert_eq!(
        resolve(std::path::Path::new("/"), "~", Some(&home)).unwrap(),
        home.canonicalize().unwrap()
    );
    assert_eq!(
        resolve(std::path::Path::new("/"), "~/", Some(&home)).unwrap(),
        home.canonicalize().unwrap()
    );
}
