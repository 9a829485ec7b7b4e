//! `dsh exec --store postgres://…` and `dsh sessions export | import` against the test cluster
//! (`scripts/postgres-setup`; skipped with the reason without it, failing under `CI=true`).

use dsh_test_harness::postgres::TestCluster;
use dsh_testkit::{Completion, Gate};

use crate::pg::*;
use crate::support::*;

#[test]
fn exec_with_a_postgres_store_keeps_the_session_there_and_export_moves_it() {
    let Some((c, url)) =
        database("exec_with_a_postgres_store_keeps_the_session_there_and_export_moves_it")
    else {
        return;
    };
    let env = Env::new();
    env.server().push(
        Completion::new()
            .tool_call("bash", r#"{"command":"echo one","description":"Print"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("done").reply());
    let out = env.exec(&["--store", &url, "--session", "pg-1", "go"]);
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("done"));
    // Nothing in the JSONL store; the rows and the released lease in PostgreSQL.
    assert!(session_files(&env.home.path().join("sessions")).is_empty());
    assert_eq!(
        c.psql(
            &url,
            "SELECT owner IS NULL, next_seq > 10 FROM dsh_sessions WHERE id = 'pg-1'"
        ),
        "t|t"
    );

    // Resumed from the store by a second process (DSH_STORE this time).
    env.server().push(Completion::new().text("again").reply());
    let out = env
        .dsh()
        .env("DSH_STORE", &url)
        .args(["exec", "--resume", "pg-1", "more"])
        .output()
        .unwrap();
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("again"));

    // Export from PostgreSQL; copy into the JSONL store; the JSONL store's export is the same
    // bytes.
    let out = env
        .dsh()
        .args(["sessions", "export", "pg-1", "--store", &url])
        .output()
        .unwrap();
    ok(&out);
    let from_pg = out.stdout;
    assert!(from_pg.starts_with(b"{\"type\":\"session\",\"version\":4,\"id\":\"pg-1\""));
    let out = env
        .dsh()
        .args([
            "sessions", "export", "pg-1", "--store", &url, "--to", "jsonl",
        ])
        .output()
        .unwrap();
    ok(&out);
    let out = env
        .dsh()
        .args(["sessions", "export", "pg-1"])
        .output()
        .unwrap();
    ok(&out);
    assert!(
        out.stdout == from_pg,
        "the JSONL copy differs from the PostgreSQL export"
    );

    // To a directory, then imported into another database: the same bytes again.
    let dir = tempfile::tempdir().unwrap();
    let out = env
        .dsh()
        .args(["sessions", "export", "pg-1", "--to"])
        .arg(dir.path())
        .output()
        .unwrap();
    ok(&out);
    let file = dir.path().join("pg-1.jsonl");
    assert!(std::fs::read(&file).unwrap() == from_pg);
    let url2 = c.fresh_database();
    let out = env
        .dsh()
        .args(["sessions", "import", "--store", &url2])
        .arg(&file)
        .output()
        .unwrap();
    ok(&out);
    let out = env
        .dsh()
        .args(["sessions", "export", "pg-1", "--store", &url2])
        .output()
        .unwrap();
    ok(&out);
    assert!(out.stdout == from_pg);
    // A second import of the same id is refused, naming it.
    let out = env
        .dsh()
        .args(["sessions", "import", "--store", &url2])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("SESSION_EXISTS"), "{}", stderr(&out));
}

/// Runs `dsh exec --store` whose first model answer is held until another host has taken the
/// session over (its lease row changed behind its back); returns the finished process's output.
fn taken_over_while_the_model_answers(
    c: &TestCluster,
    url: &str,
    env: &Env,
    answer: Completion,
) -> std::process::Output {
    let gate = Gate::new();
    env.server().push(answer.reply().gate_head(&gate));
    env.server()
        .push(Completion::new().text("never asked").reply());
    let child = env
        .dsh()
        .args(["exec", "--store", url, "--session", "pg-2", "go"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    env.server()
        .wait_for_requests_blocking(1, WAIT)
        .expect("the request arrived");
    c.psql(
        url,
        "UPDATE dsh_sessions SET owner = 'host-b', epoch = epoch + 1, \
         expires_at = now() + interval '1 hour' WHERE id = 'pg-2'",
    );
    gate.open();
    child.wait_with_output().unwrap()
}

fn says_the_lease_was_lost(out: &std::process::Output) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("SESSION_LEASE_LOST"), "{err}");
    assert!(err.contains("taken over by host-b with epoch 2"), "{err}");
}

fn assistant_rows(c: &TestCluster, url: &str) -> String {
    c.psql(
        url,
        "SELECT count(*) FROM dsh_events WHERE session_id = 'pg-2' AND kind = 'assistant/message'",
    )
}

#[test]
fn a_writer_whose_session_is_taken_over_is_refused_before_its_tool_runs() {
    let Some((c, url)) =
        database("a_writer_whose_session_is_taken_over_is_refused_before_its_tool_runs")
    else {
        return;
    };
    let env = Env::new();
    let answer = Completion::new().tool_call(
        "bash",
        r#"{"command":"touch side-effect","description":"Touch"}"#,
    );
    let out = taken_over_while_the_model_answers(&c, &url, &env, answer);
    says_the_lease_was_lost(&out);
    // The write-through before the tool was refused: the tool did not run, the turn ended.
    assert!(!env.work.path().join("side-effect").exists());
    assert_eq!(env.server().request_count(), 1);
    // Nothing after the takeover was written by the old writer.
    assert_eq!(assistant_rows(&c, &url), "0");
}

#[test]
fn a_writer_whose_session_is_taken_over_fails_at_the_turn_end() {
    let Some((c, url)) = database("a_writer_whose_session_is_taken_over_fails_at_the_turn_end")
    else {
        return;
    };
    let env = Env::new();
    let out = taken_over_while_the_model_answers(&c, &url, &env, Completion::new().text("late"));
    says_the_lease_was_lost(&out);
    assert_eq!(assistant_rows(&c, &url), "0");
}

#[test]
fn a_bad_store_url_is_a_usage_error() {
    let env = Env::new();
    let out = env.exec(&["--store", "mysql://x/y", "hi"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unsupported session store `mysql://x/y`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.server().request_count(), 0);
}

#[test]
fn two_servers_on_one_store_list_and_search_each_others_sessions() {
    let Some((_c, url)) = database("two_servers_on_one_store_list_and_search_each_others_sessions")
    else {
        return;
    };
    let env = Env::new();
    env.server()
        .push(Completion::new().text("the quetzal answer").reply());
    let a = crate::serve::serve(&env, &["--store", &url]);
    let b = crate::serve::serve(&env, &["--store", &url]);
    let out = env
        .dsh()
        .args(["exec", "--server", &a.url, "ask about the quetzal"])
        .output()
        .unwrap();
    ok(&out);
    // Nothing under $DSH_HOME/sessions: the session is in the store.
    assert!(session_files(&env.home.path().join("sessions")).is_empty());
    // The other server lists it, with the facts of the store's catalog, and finds it by a word
    // of the model's reply.
    let (status, list) = crate::serve::raw(&b.addr, "GET", "/v1/sessions", None, None);
    assert_eq!(status, 200, "{list}");
    assert!(list.contains("\"turns\":1"), "{list}");
    let (status, found) = crate::serve::raw(&b.addr, "GET", "/v1/sessions?q=quetzal", None, None);
    assert_eq!(status, 200, "{found}");
    assert!(found.contains("\"turns\":1"), "{found}");
    let (_, none) = crate::serve::raw(&b.addr, "GET", "/v1/sessions?q=axolotl", None, None);
    assert!(!none.contains("\"turns\":1"), "{none}");
}
