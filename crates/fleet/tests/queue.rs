//! The queue against the test cluster (`scripts/postgres-setup`; skipped with the reason
//! without it, failing under `CI=true`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dsh_fleet::{Fleet, Outcome, TaskResult, TaskSpec, TaskState, Usage};
use dsh_test_harness::postgres::{TestCluster, cluster};

const VIS: Duration = Duration::from_secs(600);

fn spec(n: usize) -> TaskSpec {
    TaskSpec {
        prompt: format!("task {n}"),
        repo: "/repo".into(),
        git_ref: None,
        model: None,
        effort: None,
        limits: Default::default(),
    }
}

fn done() -> TaskResult {
    TaskResult {
        state: TaskState::Done,
        outcome: Outcome {
            exit_code: Some(0),
            turn_end: Some("completed".into()),
            error: None,
        },
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
            requests: 1,
        },
        diff: Some(String::new()),
    }
}

fn db(test: &str) -> Option<(TestCluster, String)> {
    let c = cluster(test)?;
    let url = c.fresh_database();
    Some((c, url))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claimers_get_every_task_exactly_once() {
    let Some((_c, url)) = db("concurrent_claimers_get_every_task_exactly_once") else {
        return;
    };
    let fleet = Fleet::connect(&url).await.unwrap();
    let specs: Vec<_> = (0..40).map(spec).collect();
    let ids = fleet.submit(&specs).await.unwrap();
    assert_eq!(ids, (1..=40).collect::<Vec<i64>>());
    // Four connections (four workers) claim at once until the queue is empty.
    let mut claimers = Vec::new();
    for w in 0..4 {
        let url = url.clone();
        claimers.push(tokio::spawn(async move {
            let fleet = Fleet::connect(&url).await.unwrap();
            let mut got = Vec::new();
            while let Some(c) = fleet.claim(&format!("w{w}"), VIS).await.unwrap() {
                assert_eq!(c.attempt, 1);
                got.push(c.id);
            }
            got
        }));
    }
    let mut all = Vec::new();
    for c in claimers {
        all.extend(c.await.unwrap());
    }
    all.sort_unstable();
    assert_eq!(all, (1..=40).collect::<Vec<i64>>());
    let rows = fleet.tasks().await.unwrap();
    assert!(
        rows.iter()
            .all(|t| t.state == TaskState::Running && t.attempts == 1)
    );
}

#[tokio::test]
async fn an_expired_claim_is_taken_over_and_the_old_holder_writes_nothing() {
    let Some((c, url)) = db("an_expired_claim_is_taken_over_and_the_old_holder_writes_nothing")
    else {
        return;
    };
    let fleet = Fleet::connect(&url).await.unwrap();
    fleet.submit(&[spec(1)]).await.unwrap();
    let first = fleet.claim("a", VIS).await.unwrap().unwrap();
    // Not claimable while the claim holds.
    assert!(fleet.claim("b", VIS).await.unwrap().is_none());
    assert!(fleet.renew(&first, VIS).await.unwrap());
    // The claim expires (its worker died or was paused past it).
    c.psql(
        &url,
        "UPDATE dsh_tasks SET visible_until = now() - interval '1 second'",
    );
    let second = fleet.claim("b", VIS).await.unwrap().unwrap();
    assert_eq!((second.id, second.attempt), (first.id, 2));
    // The same session: the new attempt takes it over.
    assert_eq!(second.session_id, first.session_id);
    // The first holder is fenced: no renewal, no result, no release.
    assert!(!fleet.renew(&first, VIS).await.unwrap());
    let mut failed = done();
    failed.state = TaskState::Failed;
    assert!(!fleet.finish(&first, &failed).await.unwrap());
    assert!(!fleet.release(&first).await.unwrap());
    assert!(fleet.finish(&second, &done()).await.unwrap());
    let rows = fleet.tasks().await.unwrap();
    let t = &rows[0];
    assert_eq!(t.state, TaskState::Done);
    assert_eq!(t.attempts, 2);
    assert_eq!(t.claimed_by, None);
    assert_eq!(t.session_id.as_deref(), Some(second.session_id.as_str()));
    assert_eq!(t.outcome.as_ref().unwrap().exit_code, Some(0));
    assert_eq!(t.usage.unwrap().input_tokens, 10);
    // A finished task is never claimed again.
    c.psql(
        &url,
        "UPDATE dsh_tasks SET visible_until = now() - interval '1 hour'",
    );
    assert!(fleet.claim("c", VIS).await.unwrap().is_none());
}

#[tokio::test]
async fn a_released_task_goes_back_to_the_queue() {
    let Some((_c, url)) = db("a_released_task_goes_back_to_the_queue") else {
        return;
    };
    let fleet = Fleet::connect(&url).await.unwrap();
    fleet.submit(&[spec(1), spec(2)]).await.unwrap();
    let one = fleet.claim("a", VIS).await.unwrap().unwrap();
    assert_eq!(one.id, 1);
    assert!(fleet.release(&one).await.unwrap());
    let rows = fleet.tasks().await.unwrap();
    assert_eq!(rows[0].state, TaskState::Queued);
    // The oldest claimable first: the released one again, as a new attempt.
    let again = fleet.claim("b", VIS).await.unwrap().unwrap();
    assert_eq!((again.id, again.attempt), (1, 2));
    // Connecting again (another worker starting) leaves the table as it is.
    let other = Fleet::connect(&url).await.unwrap();
    assert_eq!(other.tasks().await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_deferred_task_is_invisible_until_its_delay_passes() {
    let Some((c, url)) = db("a_deferred_task_is_invisible_until_its_delay_passes") else {
        return;
    };
    let fleet = Fleet::connect(&url).await.unwrap();
    fleet.submit(&[spec(1)]).await.unwrap();
    let first = fleet.claim("a", VIS).await.unwrap().unwrap();
    assert!(fleet.defer(&first, VIS).await.unwrap());
    let rows = fleet.tasks().await.unwrap();
    assert_eq!(rows[0].state, TaskState::Running);
    assert_eq!(rows[0].claimed_by, None);
    assert!(fleet.claim("b", VIS).await.unwrap().is_none());
    c.psql(
        &url,
        "UPDATE dsh_tasks SET visible_until = now() - interval '1 second'",
    );
    let again = fleet.claim("b", VIS).await.unwrap().unwrap();
    assert_eq!((again.id, again.attempt), (1, 2));
    assert!(!fleet.finish(&first, &done()).await.unwrap());
}

/// Connecting to a queue that exists takes no table lock: a connect (a new worker, `dsh tasks
/// status`) while another transaction holds a task's row goes through. It used to wait for that
/// transaction (`ALTER TABLE … ADD COLUMN IF NOT EXISTS` locks the table exclusively first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_waits_for_no_transaction_holding_a_task() {
    let Some((_c, url)) = db("connecting_waits_for_no_transaction_holding_a_task") else {
        return;
    };
    let fleet = Fleet::connect(&url).await.unwrap();
    fleet.submit(&[spec(0)]).await.unwrap();
    let (holder, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    holder
        .batch_execute("BEGIN; SELECT id FROM dsh_tasks WHERE id = 1 FOR UPDATE")
        .await
        .unwrap();
    // A bound on a wait that used to be endless, not a timing figure.
    let second = tokio::time::timeout(Duration::from_secs(60), Fleet::connect(&url)).await;
    assert!(
        second.is_ok(),
        "connect waited for the transaction holding task 1"
    );
    second.unwrap().unwrap();
    holder.batch_execute("COMMIT").await.unwrap();
}
