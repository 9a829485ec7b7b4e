//! Faults under several worker processes (issue 39's tests): a worker killed mid-turn, a worker
//! paused past its lease, the database restarted mid-run, a task row another claim holds locked. The test cluster, the testkit mock
//! and real `dsh worker` processes; every wait is on state the database or `/proc` shows, with
//! a bound.

use dsh_test_harness::postgres::{PrivateCluster, TestCluster};
use dsh_testkit::{Completion, Gate, Reply};
use nix::sys::signal::Signal;

use crate::pg::*;
use crate::support::*;

const WORDS: [&str; 4] = ["zebra", "quokka", "narwhal", "okapi"];

/// What a takeover's first prompt says (`dsh worker`'s resume prompt).
const RESUMED: &str = "stopped before the task was finished";

/// The model: for a prompt `make WORD`, a bash call that writes `WORD.txt`, then a final text
/// once the tool's result is in the request. The final answer of task `held` comes from `hold`
/// (a stall, a gate), except in a takeover's request, which is answered at once.
fn model(env: &Env, held: &'static str, hold: impl Fn() -> Reply + Send + Sync + 'static) {
    env.server().set_responder(move |req| {
        let body = req.body_json().unwrap();
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let text = req.body_text();
        let Some(word) = WORDS.iter().find(|w| text.contains(&format!("make {w}"))) else {
            return Completion::new().text("ok").reply();
        };
        if text.contains(RESUMED) {
            Completion::new().text(&format!("resumed {word}")).reply()
        } else if messages.iter().any(|m| m["role"] == "tool") {
            if *word == held {
                hold()
            } else {
                Completion::new().text(&format!("made {word}")).reply()
            }
        } else {
            let args = serde_json::json!({
                "command": format!("echo {word} > {word}.txt"),
                "description": "Write",
            });
            Completion::new()
                .tool_call("bash", &args.to_string())
                .reply()
        }
    });
}

/// How many requests the model got for `make WORD`.
fn asked(env: &Env, word: &str) -> usize {
    env.server()
        .requests()
        .iter()
        .filter(|r| r.body_text().contains(&format!("make {word}")))
        .count()
}

fn count(c: &TestCluster, url: &str, sql: &str) -> usize {
    c.psql(url, sql).parse().unwrap()
}

/// Time passes past the claim of task `id` and its session's lease (set by SQL rather than
/// waited for: the database is what checks both).
fn expire_claim_and_lease(c: &TestCluster, url: &str, id: i64, sid: &str) {
    c.psql(
        url,
        &format!(
            "UPDATE dsh_tasks SET visible_until = now() - interval '1 second' WHERE id = {id}"
        ),
    );
    c.psql(
        url,
        &format!(
            "UPDATE dsh_sessions SET expires_at = now() - interval '1 second' WHERE id = '{sid}'"
        ),
    );
}

/// The prompt `text` stored as a user message of the session, how many times.
fn prompts(log: &[(i64, String)], text: &str) -> usize {
    log.iter()
        .filter(|(_, l)| l.starts_with("{\"type\":\"user/message\"") && l.contains(text))
        .count()
}

/// The reasons of the session's turn ends, in order.
fn turn_ends(log: &[(i64, String)]) -> Vec<String> {
    log.iter()
        .filter_map(|(_, l)| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["type"] == "turn/end")
                .then(|| v["data"]["reason"]["kind"].as_str().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn four_workers_one_killed_mid_turn_another_takes_over_and_the_log_has_every_event_once() {
    let Some((c, url)) = database(
        "four_workers_one_killed_mid_turn_another_takes_over_and_the_log_has_every_event_once",
    ) else {
        return;
    };
    let env = Env::new();
    // zebra's worker runs its tool, then waits for an answer that never comes.
    model(&env, "zebra", || {
        Completion::new()
            .text("never delivered")
            .reply()
            .stall_head()
    });
    let repo = repo();
    submit(&env, &url, &WORDS, repo.path());
    let mut workers: Vec<_> = (0..4)
        .map(|_| spawn_worker(&env, &url, &["--visibility-seconds", "600"]))
        .collect();
    wait_for("zebra's second request (its tool ran)", || {
        asked(&env, "zebra") >= 2
    });

    // Kill -9 the worker that holds zebra (task 1), mid-turn.
    let s = status(&env, &url);
    let t = &s["tasks"][0];
    assert_eq!(t["state"], "running", "{s}");
    let sid = t["sessionId"].as_str().unwrap().to_owned();
    let holder: i32 = t["claimedBy"]
        .as_str()
        .and_then(|w| w.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("no worker pid in {t}"));
    let i = workers
        .iter()
        .position(|w| pid(w) == holder)
        .unwrap_or_else(|| panic!("task 1 is held by {holder}, none of the four workers"));
    let mut killed = workers.remove(i);
    killed.kill().unwrap();
    killed.wait().unwrap();
    wait_for("the killed worker's dsh exec to die with it", || {
        running_with_arg(&sid) == 0
    });
    // What the dead writer committed: the prompt, its tool call and the tool's result.
    let committed = session_log(&c, &url, &sid);
    assert_eq!(prompts(&committed, "make zebra"), 1);
    assert!(
        committed
            .iter()
            .any(|(_, l)| l.starts_with("{\"type\":\"tool/result\"")),
        "{committed:?}"
    );

    // Past its claim and lease, one of the three others takes the task over and finishes it.
    expire_claim_and_lease(&c, &url, 1, &sid);
    wait_for("every task done", || {
        count(
            &c,
            &url,
            "SELECT count(*) FROM dsh_tasks WHERE state = 'done'",
        ) == WORDS.len()
    });
    for w in &workers {
        signal(pid(w), Signal::SIGTERM);
    }
    for w in workers {
        ok(&w.wait_with_output().unwrap());
    }

    let results = results(&env, &url);
    assert_eq!(results.len(), WORDS.len());
    for r in &results {
        assert_eq!(r["state"], "done", "{r}");
        assert_eq!(r["outcome"]["turnEnd"], "completed", "{r}");
        let attempts = if r["sessionId"] == sid.as_str() { 2 } else { 1 };
        assert_eq!(r["attempts"], attempts, "{r}");
        assert_every_event_once(&session_log(&c, &url, r["sessionId"].as_str().unwrap()));
    }
    // The taken-over session: what the dead writer committed, byte for byte, then the
    // takeover's turn; the first prompt once; the dead turn closed by crash repair.
    let log = session_log(&c, &url, &sid);
    assert_eq!(&log[..committed.len()], &committed[..]);
    assert_every_event_once(&log);
    assert_eq!(prompts(&log, "make zebra"), 1);
    assert_eq!(prompts(&log, RESUMED), 1);
    assert_eq!(turn_ends(&log), ["interrupted", "completed"]);
    // The export of the taken-over session is a valid JSONL log of the same events.
    let out = env
        .dsh()
        .args(["sessions", "export", &sid, "--store", &url])
        .output()
        .unwrap();
    ok(&out);
    assert_eq!(stdout(&out).lines().count(), log.len() + 1);
}

#[test]
fn a_worker_paused_past_its_lease_is_refused_at_its_next_append_and_stops_saying_why() {
    let Some((c, url)) = database(
        "a_worker_paused_past_its_lease_is_refused_at_its_next_append_and_stops_saying_why",
    ) else {
        return;
    };
    let env = Env::new();
    // The first attempt's final answer is held until the test opens the gate.
    let gate = Gate::new();
    let held = gate.clone();
    model(&env, "zebra", move || {
        Completion::new()
            .text("late zebra")
            .reply()
            .gate_head(&held)
    });
    let repo = repo();
    submit(&env, &url, &["zebra"], repo.path());
    let a = spawn_worker(&env, &url, &["--drain", "--visibility-seconds", "600"]);
    wait_for("zebra's second request (its tool ran)", || {
        asked(&env, "zebra") >= 2
    });
    let s = status(&env, &url);
    let sid = s["tasks"][0]["sessionId"].as_str().unwrap().to_owned();
    let [exec] = pids_with_arg(&sid).try_into().unwrap();

    // Pause the worker and its dsh exec; past their claim and lease another worker takes the
    // task over and finishes it.
    signal(pid(&a), Signal::SIGSTOP);
    signal(exec, Signal::SIGSTOP);
    wait_for("both paused", || {
        proc_state(pid(&a)) == Some('T') && proc_state(exec) == Some('T')
    });
    let before = session_log(&c, &url, &sid);
    expire_claim_and_lease(&c, &url, 1, &sid);
    let b = spawn_worker(&env, &url, &["--drain"]);
    ok(&b.wait_with_output().unwrap());
    let taken_over = session_log(&c, &url, &sid);
    assert_eq!(&taken_over[..before.len()], &before[..]);
    assert_eq!(turn_ends(&taken_over), ["interrupted", "completed"]);

    // The paused writer continues: the model's answer arrives, its append is refused (the
    // lease is the takeover's), it ends; then its worker continues and stops, saying why.
    gate.open();
    signal(exec, Signal::SIGCONT);
    wait_for("the paused dsh exec to end", || {
        matches!(proc_state(exec), Some('Z') | None)
    });
    signal(pid(&a), Signal::SIGCONT);
    let out = a.wait_with_output().unwrap();
    ok(&out);
    let err = stderr(&out);
    assert!(err.contains("not recorded"), "{err}");
    assert!(err.contains("SESSION_LEASE_LOST"), "{err}");
    // The takeover has finished and released the session: that is the cause named.
    assert!(err.contains("the session was released"), "{err}");
    assert!(err.contains("nothing of this batch was written"), "{err}");
    // Nothing of the old writer after the takeover; the result is the takeover's.
    assert_eq!(session_log(&c, &url, &sid), taken_over);
    assert!(!taken_over.iter().any(|(_, l)| l.contains("late zebra")));
    let [r] = results(&env, &url).try_into().unwrap();
    assert_eq!(r["state"], "done", "{r}");
    assert_eq!(r["attempts"], 2, "{r}");
    assert_eq!(r["outcome"]["turnEnd"], "completed", "{r}");
    assert!(r["outcome"].get("error").is_none(), "{r}");
}

#[test]
fn workers_reconnect_and_go_on_when_the_database_restarts_mid_run() {
    let Some(private) =
        PrivateCluster::start("workers_reconnect_and_go_on_when_the_database_restarts_mid_run")
    else {
        return;
    };
    let c = &private.cluster;
    let url = c.fresh_database();
    let env = Env::new();
    // Every answer waits for the gate: three tasks are mid-turn when the server restarts.
    let gate = Gate::new();
    let held = gate.clone();
    env.server().set_responder(move |req| {
        let text = req.body_text();
        let word = WORDS
            .iter()
            .find(|w| text.contains(&format!("make {w}")))
            .unwrap_or(&"?");
        Completion::new()
            .text(&format!("made {word}"))
            .reply()
            .gate_head(&held)
    });
    let repo = repo();
    submit(&env, &url, &WORDS, repo.path());
    let workers: Vec<_> = (0..3)
        .map(|_| spawn_worker(&env, &url, &["--drain"]))
        .collect();
    env.server()
        .wait_for_requests_blocking(3, WAIT)
        .expect("three tasks' requests arrived");
    // Every connection (the workers' queue connections and their dsh execs' stores) is cut.
    c.restart();
    gate.open();
    for w in workers {
        ok(&w.wait_with_output().unwrap());
    }
    let results = results(&env, &url);
    assert_eq!(results.len(), WORDS.len());
    for r in &results {
        assert_eq!(r["state"], "done", "{r}");
        assert_eq!(r["attempts"], 1, "{r}");
        assert_every_event_once(&session_log(c, &url, r["sessionId"].as_str().unwrap()));
    }
    assert_eq!(env.server().request_count(), WORDS.len());
}

/// A task whose row another transaction holds locked (another worker in the middle of its
/// claim) is skipped, not waited for (`FOR UPDATE SKIP LOCKED`): the worker claims and finishes
/// the task after it, and with `--drain` stops when nothing else is claimable; the locked task
/// is claimed once the lock goes. (The lock is taken while the worker runs its first task: a
/// worker starting under it would wait in its schema statement, whose `ALTER TABLE` takes the
/// table's exclusive lock.)
#[test]
fn a_task_locked_by_another_claim_is_skipped_not_waited_for() {
    use std::io::Write;
    let Some((c, url)) = database("a_task_locked_by_another_claim_is_skipped_not_waited_for")
    else {
        return;
    };
    let env = Env::new();
    let gate = Gate::new();
    let held = gate.clone();
    model(&env, "zebra", move || {
        Completion::new()
            .text("made zebra")
            .reply()
            .gate_head(&held)
    });
    let repo = repo();
    submit(&env, &url, &["zebra", "quokka", "narwhal"], repo.path());
    let mut w = spawn_worker(&env, &url, &["--drain"]);
    wait_for("zebra's second request (its tool ran)", || {
        asked(&env, "zebra") >= 2
    });
    // Task 2's row locked by a transaction left open (another worker's claim in progress).
    let psql = c.bin.as_ref().map_or("psql".into(), |b| b.join("psql"));
    /// Ends the psql holding the lock when the test fails.
    struct Holder(std::process::Child);
    impl Drop for Holder {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut holder = std::process::Command::new(psql)
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &url])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = holder.stdin.take().unwrap();
    let mut holder = Holder(holder);
    writeln!(
        stdin,
        "BEGIN; SELECT id FROM dsh_tasks WHERE id = 2 FOR UPDATE;"
    )
    .unwrap();
    stdin.flush().unwrap();
    wait_for("the lock on task 2", || {
        count(
            &c,
            &url,
            "SELECT count(*) FROM pg_stat_activity \
              WHERE datname = current_database() AND state = 'idle in transaction'",
        ) == 1
    });
    gate.open();
    wait_for(
        "the worker to finish tasks 1 and 3 and stop while task 2 is locked",
        || w.try_wait().unwrap().is_some(),
    );
    ok(&w.wait_with_output().unwrap());
    // (Read with a plain SELECT: `dsh tasks status` would wait for the lock in its schema step.)
    assert_eq!(
        c.psql(&url, "SELECT string_agg(id || ':' || state || ':' || attempts, ' ' ORDER BY id) FROM dsh_tasks"),
        "1:done:1 2:queued:0 3:done:1"
    );
    assert_eq!(asked(&env, "quokka"), 0);
    // The lock goes: the task is claimed.
    writeln!(stdin, "COMMIT;").unwrap();
    drop(stdin);
    assert!(holder.0.wait().unwrap().success());
    ok(&spawn_worker(&env, &url, &["--drain"])
        .wait_with_output()
        .unwrap());
    let s = status(&env, &url);
    assert_eq!(s["tasks"][1]["state"], "done", "{s}");
    assert_eq!(s["tasks"][1]["attempts"], 1, "{s}");
}
