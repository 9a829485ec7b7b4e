//! The session catalog from the command line (issue 35): `dsh sessions search`, `dsh sessions
//! list` and `dsh stats` over `$DSH_HOME/catalog.sqlite`, brought up to date from the logs by
//! its readers (rebuilt when missing, corrupt or not writable); running sessions report to its
//! live table, which `dsh ps` reads.

use std::path::Path;

use dsh_testkit::Completion;
use serde_json::Value;

use crate::support::*;

fn run(env: &Env, args: &[&str]) -> std::process::Output {
    let out = env.dsh().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    out
}

fn session(env: &Env, id: &str, prompt: &str, reply: &str) {
    env.server().push(Completion::new().text(reply).reply());
    let out = env.exec(&["--session", id, prompt]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

fn search_json(env: &Env, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["sessions", "search"];
    all.extend_from_slice(args);
    all.push("--json");
    serde_json::from_str(&stdout(&run(env, &all))).unwrap()
}

fn catalog_file(env: &Env) -> std::path::PathBuf {
    env.home.path().join("catalog.sqlite")
}

#[test]
fn running_sessions_report_live_state_and_search_list_and_stats_read_the_catalog() {
    let env = Env::new();
    // A process that only writes sessions does not create the catalog: its first reader does
    // (from the logs). Once it exists, running sessions keep it up to date.
    session(&env, "first", "an opening session", "Opened.");
    assert!(!catalog_file(&env).exists());
    assert!(stdout(&run(&env, &["sessions", "list"])).starts_with("first  "));
    assert!(catalog_file(&env).exists());
    session(
        &env,
        "alpha",
        "please refactor the frobnicator module",
        "Refactored it.",
    );
    session(
        &env,
        "beta",
        "write a haiku about otters",
        "Otters glide and play.",
    );
    // The writing processes reported their sessions to the live table (ended: they exited);
    // the texts are indexed by the next reader, from the logs.
    let cat = dsh_catalog::SqliteCatalog::open(catalog_file(&env)).unwrap();
    let live = cat.live().unwrap();
    let alpha = live.iter().find(|l| l.id == "alpha").expect("reported");
    assert_eq!(alpha.state, dsh_catalog_api::LiveState::Ended, "{live:?}");
    assert_eq!(alpha.turn, 1);
    assert!(alpha.pid > 0 && !alpha.cwd.is_empty(), "{live:?}");
    assert!(
        cat.get("alpha").unwrap().is_none(),
        "indexed by readers only"
    );
    drop(cat);

    let hits = search_json(&env, &["frobnicator"]);
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0]["sessionId"], "alpha");
    assert_eq!(hits[0]["turn"], 1);
    assert_eq!(hits[0]["kind"], "prompt");
    let snippet = hits[0]["snippet"].as_str().unwrap();
    let (a, b) = (
        hits[0]["highlights"][0][0].as_u64().unwrap() as usize,
        hits[0]["highlights"][0][1].as_u64().unwrap() as usize,
    );
    assert_eq!(&snippet[a..b], "frobnicator");
    // Text output: session, turn, age, kind, snippet.
    let text = stdout(&run(&env, &["sessions", "search", "otter*"]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines.iter().all(|l| l.starts_with("beta  turn 1  ")),
        "{text}"
    );
    assert!(
        text.contains("haiku about otters") && text.contains("Otters glide"),
        "{text}"
    );
    // Phrases.
    assert_eq!(search_json(&env, &["\"about otters\""]).len(), 1);
    assert!(search_json(&env, &["\"otters about\""]).is_empty());

    let list = stdout(&run(&env, &["sessions", "list", "--header"]));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines[0], "ID  CREATED  CWD  TURNS  STATUS  TITLE", "{list}");
    assert!(
        lines[1].starts_with("beta  ") && lines[2].starts_with("alpha  "),
        "{list}"
    );
    assert!(
        lines[2].contains("turns=1") && lines[2].contains("completed"),
        "{list}"
    );
    let limited = stdout(&run(&env, &["sessions", "list", "--limit", "1"]));
    assert_eq!(limited.lines().count(), 1, "{limited}");
    let rows: Vec<Value> =
        serde_json::from_str(&stdout(&run(&env, &["sessions", "list", "--json"]))).unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[1]["id"], "alpha");
    assert!(rows[1]["model"].as_str().is_some(), "{rows:?}");

    let stats: Value = serde_json::from_str(&stdout(&run(&env, &["stats", "--json"]))).unwrap();
    assert_eq!(stats["total"]["sessions"], 3, "{stats}");
    assert_eq!(stats["total"]["turns"], 3, "{stats}");
    assert_eq!(stats["total"]["requests"], 3, "{stats}");
    assert!(stats["total"]["tokensIn"].as_u64().unwrap() > 0, "{stats}");
    assert_eq!(
        stats["groups"].as_array().unwrap().len(),
        1,
        "one day: {stats}"
    );
    let by_model = stdout(&run(&env, &["stats", "--by", "model"]));
    let lines: Vec<&str> = by_model.lines().collect();
    assert!(
        lines[0].starts_with("MODEL") && lines[0].contains("CACHE-HIT"),
        "{by_model}"
    );
    assert!(lines[1].starts_with("deepseek-official/"), "{by_model}");
    assert!(lines[2].starts_with("total"), "{by_model}");
}

#[test]
fn search_defaults_to_the_current_project_and_all_widens_it() {
    let env = Env::new();
    session(&env, "here", "the quokka question", "Answered.");
    let elsewhere = tempfile::tempdir().unwrap();
    let out = env
        .dsh()
        .args(["sessions", "search", "quokka"])
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert!(stderr(&out).contains("--all"), "{}", stderr(&out));
    let out = env
        .dsh()
        .args(["sessions", "search", "quokka", "--all"])
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert!(stdout(&out).starts_with("here  turn 1"), "{}", stdout(&out));
    let cwd = env.cwd();
    let hits = search_json(&env, &["quokka", "--cwd", cwd.to_str().unwrap()]);
    assert_eq!(hits.len(), 1);
    assert!(search_json(&env, &["quokka", "--since", "1d"]).len() == 1);
    assert!(search_json(&env, &["quokka", "--model", "no-such-model"]).is_empty());
}

#[test]
fn a_deleted_or_corrupt_catalog_is_rebuilt_from_the_logs() {
    let env = Env::new();
    session(&env, "s1", "remember the wombat", "Noted.");
    assert_eq!(search_json(&env, &["wombat"]).len(), 1);
    std::fs::remove_file(catalog_file(&env)).unwrap();
    let _ = std::fs::remove_file(env.home.path().join("catalog.sqlite-wal"));
    let _ = std::fs::remove_file(env.home.path().join("catalog.sqlite-shm"));
    assert_eq!(search_json(&env, &["wombat"]).len(), 1);
    assert!(catalog_file(&env).exists());
    for garbage in [vec![0u8; 0], b"not a database at all".repeat(500)] {
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", catalog_file(&env).display()));
        }
        std::fs::write(catalog_file(&env), &garbage).unwrap();
        let list = stdout(&run(&env, &["sessions", "list"]));
        assert!(list.starts_with("s1  "), "{list}");
        assert_eq!(search_json(&env, &["wombat"]).len(), 1);
    }
}

#[test]
fn hostile_queries_are_searched_as_text() {
    let env = Env::new();
    session(&env, "s1", "grep for \"quoted\" NEAR(x) * stars", "Done.");
    let long = "z".repeat(10 * 1024);
    for q in ["\"", "*", "NEAR(", "a OR", "col:x", "((", long.as_str()] {
        let out = env.dsh().args(["sessions", "search", q]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{q:?}: {}", stderr(&out));
    }
    assert_eq!(search_json(&env, &["NEAR(x"]).len(), 1);
    assert_eq!(search_json(&env, &["\"quoted\""]).len(), 1);
}

#[test]
fn cjk_and_emoji_are_found() {
    let env = Env::new();
    session(&env, "zh", "请帮我修复终端窗口的测试", "好的 🦀 已修复");
    let hits = search_json(&env, &["终端"]);
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0]["kind"], "prompt");
    let hits = search_json(&env, &["🦀"]);
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0]["kind"], "assistant");
}

fn copy_original(env: &Env, id: &str) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/upstream-sessions/v4/bash-tool/session.v4.jsonl");
    let cwd = env.cwd();
    let cwd = cwd.to_str().unwrap();
    let text = std::fs::read_to_string(fixture)
        .unwrap()
        .replace(
            "\"{{tools}}\"",
            r#"[{"name":"bash","description":"d","parameters":{"type":"object"}}]"#,
        )
        .replace("{{cwd}}", cwd)
        .replace("{{session:1}}", id);
    let mut out = String::new();
    let mut created = 0;
    for (i, line) in text.lines().enumerate() {
        let mut line = line.to_owned();
        while let Some(a) = line.find("{{") {
            let b = a + line[a..].find("}}").unwrap();
            let name = line[a + 2..b].replace([':', '-'], "_");
            line.replace_range(a..b + 2, &name);
        }
        let mut v: Value = serde_json::from_str(&line).unwrap();
        if i == 0 {
            created = v["createdAt"].as_i64().unwrap();
        } else {
            v["seq"] = serde_json::json!(i - 1);
            v["time"] = serde_json::json!(created + i as i64);
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    let dir = env
        .home
        .path()
        .join("sessions")
        .join(dsh_session_jsonl::naming::project_dir(Some(cwd)))
        .join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("session.v4.jsonl"), out).unwrap();
}

#[test]
fn a_session_of_the_original_harness_is_found_and_listed() {
    let env = Env::new();
    session(&env, "ours", "our own words", "Fine.");
    copy_original(&env, "theirs");
    let hits = search_json(&env, &["TERMINAL_OK"]);
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| h["sessionId"] == "theirs"), "{hits:?}");
    assert!(hits.iter().any(|h| h["kind"] == "tool-call"), "{hits:?}");
    let list = stdout(&run(&env, &["sessions", "list"]));
    assert!(
        list.contains("theirs  ") && list.contains("ours  "),
        "{list}"
    );
}

#[cfg(unix)]
#[test]
#[allow(clippy::print_stderr)]
fn a_read_only_home_still_lists_and_searches() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    session(&env, "s1", "the narwhal note", "Kept.");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", catalog_file(&env).display()));
    }
    let mode =
        |m| std::fs::set_permissions(env.home.path(), std::fs::Permissions::from_mode(m)).unwrap();
    mode(0o555);
    if std::fs::write(env.home.path().join("probe"), b"x").is_ok() {
        mode(0o755);
        eprintln!("skipped: running as root, directories are never read-only");
        return;
    }
    let list = env.dsh().args(["sessions", "list"]).output().unwrap();
    let search = env
        .dsh()
        .args(["sessions", "search", "narwhal", "--json"])
        .output()
        .unwrap();
    mode(0o755);
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    assert!(stdout(&list).starts_with("s1  "), "{}", stdout(&list));
    assert_eq!(search.status.code(), Some(0), "{}", stderr(&search));
    let hits: Vec<Value> = serde_json::from_str(&stdout(&search)).unwrap();
    assert_eq!(hits.len(), 1);
    assert!(!catalog_file(&env).exists());
}

#[test]
fn a_catalog_that_cannot_be_opened_is_kept_in_memory() {
    // What a read-only home looks like even to root: the catalog path cannot be a database.
    let env = Env::new();
    session(&env, "s1", "the pangolin plan", "Kept.");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", catalog_file(&env).display()));
    }
    std::fs::create_dir(catalog_file(&env)).unwrap();
    let list = stdout(&run(&env, &["sessions", "list"]));
    assert!(list.starts_with("s1  "), "{list}");
    assert_eq!(search_json(&env, &["pangolin"]).len(), 1);
    let stats: Value = serde_json::from_str(&stdout(&run(&env, &["stats", "--json"]))).unwrap();
    assert_eq!(stats["total"]["sessions"], 1, "{stats}");
}

#[test]
fn a_session_whose_log_is_deleted_leaves_the_catalog() {
    let env = Env::new();
    session(&env, "doomed", "the axolotl affair", "Noted.");
    session(&env, "kept", "other words", "Noted.");
    assert_eq!(search_json(&env, &["axolotl"]).len(), 1);
    let files = session_files(&env.home.path().join("sessions"));
    let doomed = files
        .iter()
        .find(|f| f.parent().unwrap().ends_with("doomed"))
        .unwrap();
    std::fs::remove_dir_all(doomed.parent().unwrap()).unwrap();
    assert!(search_json(&env, &["axolotl"]).is_empty());
    let list = stdout(&run(&env, &["sessions", "list"]));
    assert!(!list.contains("doomed") && list.contains("kept"), "{list}");
}

/// `dsh sessions delete`: asks first (refused without a terminal unless `--yes`), removes the
/// log and the catalog row, refuses a live session (its lock held) and unknown ids.
#[test]
fn sessions_delete_removes_logs_and_rows_and_refuses_live_sessions() {
    let env = Env::new();
    session(&env, "gone", "the axolotl affair", "Noted.");
    session(&env, "live", "the axolotl sequel", "Noted.");
    session(&env, "kept", "other words", "Noted.");
    assert_eq!(search_json(&env, &["axolotl"]).len(), 2);
    let dir_of = |id: &str| {
        session_files(&env.home.path().join("sessions"))
            .into_iter()
            .find(|f| f.parent().unwrap().ends_with(id))
            .map(|f| f.parent().unwrap().to_path_buf())
    };
    let gone_dir = dir_of("gone").unwrap();

    // No terminal and no --yes: nothing is deleted.
    let out = env
        .dsh()
        .args(["sessions", "delete", "gone"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("pass --yes"), "{}", stderr(&out));
    assert!(gone_dir.is_dir());

    // An unknown id: nothing is deleted, the id is named.
    let out = env
        .dsh()
        .args(["sessions", "delete", "gone", "nosuch", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("`nosuch`"), "{}", stderr(&out));
    assert!(gone_dir.is_dir());

    // A live session: another process holds its write lock.
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir_of("live").unwrap().join("session.lock"))
        .unwrap();
    lock.try_lock().unwrap();
    let out = env
        .dsh()
        .args(["sessions", "delete", "gone", "live", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("session `live` is live"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "deleted gone\n");
    assert!(!gone_dir.exists());
    assert!(dir_of("live").is_some(), "the live session's log stays");
    drop(lock);

    // The catalog forgot the deleted one at once; the others are still found.
    let hits = search_json(&env, &["axolotl"]);
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0]["sessionId"], "live");
    let list = stdout(&run(&env, &["sessions", "list"]));
    assert!(!list.contains("gone") && list.contains("kept"), "{list}");
}

fn ps_rows(env: &Env, all: bool) -> Vec<Value> {
    let mut args = vec!["ps", "--json"];
    if all {
        args.push("--all");
    }
    let out: Value = serde_json::from_str(&stdout(&run(env, &args))).unwrap();
    out["sessions"].as_array().unwrap().clone()
}

#[test]
fn dsh_ps_lists_sessions_of_other_processes_from_the_live_table() {
    let env = Env::new();
    let gate = dsh_testkit::Gate::new();
    env.server()
        .push(Completion::new().text("Held.").reply().gate_head(&gate));
    // A `dsh exec` (no background server) whose model request is held: its turn runs.
    let child = env.spawn(&["--session", "held", "hold this turn"]);
    env.server()
        .wait_for_requests_blocking(1, std::time::Duration::from_secs(60))
        .expect("the request arrived");
    // The report is written by the plugin's thread after the turn started: poll for it.
    let start = std::time::Instant::now();
    let row = loop {
        let rows = ps_rows(&env, false);
        if let Some(r) = rows.iter().find(|r| r["id"] == "held") {
            break r.clone();
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "never listed: {rows:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(row["state"], "working", "{row}");
    assert_eq!(row["pid"], child.id(), "{row}");
    assert_eq!(row["doing"]["kind"], "turn", "{row}");
    assert_eq!(row["doing"]["turn"], 1, "{row}");
    assert_eq!(row["cwd"], env.cwd().display().to_string(), "{row}");
    let text = stdout(&run(&env, &["ps"]));
    assert!(text.starts_with("ID    STATE    PID"), "{text}");
    assert!(
        text.contains("held  working  ") && text.contains("turn 1"),
        "{text}"
    );

    gate.open();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Its process closed it: not working any more; `--all` shows it ended.
    assert!(ps_rows(&env, false).iter().all(|r| r["id"] != "held"));
    let all = ps_rows(&env, true);
    let row = all.iter().find(|r| r["id"] == "held").expect("listed");
    assert_eq!(row["state"], "ended", "{row}");
    assert_eq!(row["doing"]["kind"], "ended", "{row}");

    // A process killed mid-turn never closes its session: its row reads gone.
    let held = dsh_testkit::Gate::new();
    env.server()
        .push(Completion::new().text("Never.").reply().gate_head(&held));
    let mut killed = env.spawn(&["--session", "killed", "hold again"]);
    env.server()
        .wait_for_requests_blocking(2, std::time::Duration::from_secs(60))
        .expect("the request arrived");
    let start = std::time::Instant::now();
    while !ps_rows(&env, false).iter().any(|r| r["id"] == "killed") {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "never listed"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(ps_rows(&env, false).iter().all(|r| r["id"] != "killed"));
    let all = ps_rows(&env, true);
    let row = all.iter().find(|r| r["id"] == "killed").expect("listed");
    assert_eq!(row["doing"]["kind"], "gone", "{row}");
    held.open();
}
