//! The queue's operations on one `tokio-postgres` connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_protocol::Effort;
use serde::Serialize;
use tokio_postgres::{Client, Config, NoTls, Row};

use crate::error::{FleetError, sql};
use crate::spec::{Limits, TaskSpec};
use crate::sql as q;

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    /// Waiting for a worker.
    Queued,
    /// Claimed by a worker (until `visible_until`, renewed while it runs).
    Running,
    /// Ran to the end of its turn (exit 0, turn completed).
    Done,
    /// Ran and failed (a non-zero exit, a turn that did not complete, a workspace that could
    /// not be made).
    Failed,
}

impl TaskState {
    /// The name stored in the `state` column.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Queued => "queued",
            TaskState::Running => "running",
            TaskState::Done => "done",
            TaskState::Failed => "failed",
        }
    }

    fn parse(id: i64, s: &str) -> Result<Self, FleetError> {
        match s {
            "queued" => Ok(TaskState::Queued),
            "running" => Ok(TaskState::Running),
            "done" => Ok(TaskState::Done),
            "failed" => Ok(TaskState::Failed),
            _ => Err(FleetError::BadRow {
                id,
                field: "state",
                value: s.to_owned(),
            }),
        }
    }
}

/// A claim a worker holds: the task, its attempt number (the fence of every later write) and
/// the task's session id (the same for every attempt: a later attempt resumes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The task.
    pub id: i64,
    /// The attempt (1 for the first claim).
    pub attempt: i32,
    /// The task's session (named at the first claim).
    pub session_id: String,
    /// What to run.
    pub spec: TaskSpec,
}

/// How an attempt ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// The exit status of `dsh exec` (`None`: killed by a signal, or never started).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The reason of the last `turn/end` in the session's log (`completed`, `error`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_end: Option<String>,
    /// Why it failed, when it did (the last line dsh wrote on stderr, or the worker's error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the task cost, from the usage the provider reported on each model reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Input tokens (uncached).
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Model replies.
    pub requests: i64,
}

/// The result a worker records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskResult {
    /// `Done` or `Failed`.
    pub state: TaskState,
    /// How it ended.
    pub outcome: Outcome,
    /// What it cost.
    pub usage: Usage,
    /// `git diff` of the workspace against the checked-out ref (new files included).
    pub diff: Option<String>,
}

/// A task as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRow {
    /// The id.
    pub id: i64,
    /// What was submitted.
    #[serde(flatten)]
    pub spec: TaskSpec,
    /// Where it is.
    pub state: TaskState,
    /// Claims so far.
    pub attempts: i32,
    /// The worker holding it (while running).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claimed_by: Option<String>,
    /// Until when the claim holds (ms since the epoch, the server's clock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visible_until_ms: Option<i64>,
    /// The task's session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// How the latest finished attempt ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// Its cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Its final diff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Submitted (ms since the epoch).
    pub created_at_ms: i64,
    /// First claimed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<i64>,
    /// Finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<i64>,
}

/// The queue: one connection to the database holding `dsh_tasks`, made again when it is lost.
#[derive(Debug)]
pub struct Fleet {
    config: Config,
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
    reconnect_window: Duration,
}

/// How long an operation keeps trying to reconnect before it fails.
const RECONNECT_WINDOW: Duration = Duration::from_secs(30);

/// Whether an error means the connection is gone (retry on a new one) rather than a refusal.
fn is_connection_loss(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        None => true,
        Some(code) => {
            let c = code.code();
            c.starts_with("57P") || c.starts_with("08")
        }
    }
}

async fn open(config: &Config) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!("task queue connection ended: {e}");
        }
    });
    client.batch_execute(q::SCHEMA).await?;
    Ok(client)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Fleet {
    /// Connects (one attempt) and creates the table when missing. The connection runs on the
    /// caller's tokio runtime.
    ///
    /// # Errors
    /// A bad URL, no server, or a failing schema statement.
    pub async fn connect(url: &str) -> Result<Self, FleetError> {
        let config: Config = url.parse().map_err(FleetError::BadUrl)?;
        let client = open(&config).await.map_err(|e| {
            if e.code().is_some() {
                FleetError::Sql {
                    op: "creating the tasks table",
                    source: e,
                }
            } else {
                FleetError::Connect(e)
            }
        })?;
        Ok(Fleet {
            config,
            client: tokio::sync::Mutex::new(Some(Arc::new(client))),
            reconnect_window: RECONNECT_WINDOW,
        })
    }

    /// A live connection, made now if the last one is gone.
    async fn client(&self) -> Result<Arc<Client>, tokio_postgres::Error> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref()
            && !c.is_closed()
        {
            return Ok(Arc::clone(c));
        }
        *slot = None;
        let c = Arc::new(open(&self.config).await?);
        tracing::info!("task queue reconnected");
        *slot = Some(Arc::clone(&c));
        Ok(c)
    }

    /// Runs one statement. With `retry`, a lost connection (a server restart, a cut socket) is
    /// made again and the statement run again, for up to the reconnect window: only for
    /// statements that may run twice (a claim whose reply was lost leaves that task claimed
    /// until its visibility timeout; the fenced writes are harmless to repeat).
    async fn query(
        &self,
        op: &'static str,
        stmt: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        retry: bool,
    ) -> Result<Vec<Row>, FleetError> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(50);
        loop {
            let e = match self.client().await {
                Ok(c) => match c.query(stmt, params).await {
                    Ok(rows) => return Ok(rows),
                    Err(e) => e,
                },
                Err(e) => e,
            };
            if !retry || !is_connection_loss(&e) || start.elapsed() >= self.reconnect_window {
                return Err(FleetError::Sql { op, source: e });
            }
            tracing::warn!("task queue: {op}: {e}; reconnecting");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    /// Inserts all `specs` in one statement (all or none); returns their ids in order.
    ///
    /// # Errors
    /// A failed statement.
    pub async fn submit(&self, specs: &[TaskSpec]) -> Result<Vec<i64>, FleetError> {
        let col = |f: fn(&TaskSpec) -> Option<String>| specs.iter().map(f).collect::<Vec<_>>();
        let prompts = col(|s| Some(s.prompt.clone()));
        let repos = col(|s| Some(s.repo.clone()));
        let refs = col(|s| s.git_ref.clone());
        let models = col(|s| s.model.clone());
        let efforts = col(|s| s.effort.map(|e| e.as_str().to_owned()));
        let timeouts: Vec<Option<i32>> = specs
            .iter()
            .map(|s| s.limits.timeout_seconds.and_then(|t| i32::try_from(t).ok()))
            .collect();
        let rows = self
            .query(
                "submitting tasks",
                q::SUBMIT,
                &[&prompts, &repos, &refs, &models, &efforts, &timeouts],
                false,
            )
            .await?;
        let mut ids = rows
            .iter()
            .map(|r| r.try_get::<_, i64>(0))
            .collect::<Result<Vec<_>, _>>()
            .map_err(sql("reading the new ids"))?;
        ids.sort_unstable();
        Ok(ids)
    }

    /// Claims the oldest claimable task for `worker` until now + `visibility`: a queued one, or
    /// a running one whose claim expired. `None` when there is none.
    ///
    /// # Errors
    /// A failed statement or an unknown stored value.
    pub async fn claim(
        &self,
        worker: &str,
        visibility: Duration,
    ) -> Result<Option<Claim>, FleetError> {
        let rows = self
            .query(
                "claiming a task",
                q::CLAIM,
                &[&worker, &secs(visibility)],
                true,
            )
            .await?;
        let row = rows.into_iter().next();
        let Some(r) = row else { return Ok(None) };
        let id: i64 = g(&r, 0)?;
        Ok(Some(Claim {
            id,
            attempt: g(&r, 1)?,
            session_id: g(&r, 2)?,
            spec: TaskSpec {
                prompt: g(&r, 3)?,
                repo: g(&r, 4)?,
                git_ref: g(&r, 5)?,
                model: g(&r, 6)?,
                effort: parse_effort(id, g(&r, 7)?)?,
                limits: limits(g(&r, 8)?),
            },
        }))
    }

    /// Extends `claim` to now + `visibility`; `false` when it is no longer this attempt's (it
    /// expired and another worker took the task).
    ///
    /// # Errors
    /// A failed statement.
    pub async fn renew(&self, claim: &Claim, visibility: Duration) -> Result<bool, FleetError> {
        let rows = self
            .query(
                "renewing a claim",
                q::RENEW,
                &[&claim.id, &claim.attempt, &secs(visibility)],
                true,
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Records `result` for `claim`; `false` (nothing written) when the claim is no longer
    /// this attempt's.
    ///
    /// # Errors
    /// A failed statement.
    pub async fn finish(&self, claim: &Claim, result: &TaskResult) -> Result<bool, FleetError> {
        let o = &result.outcome;
        let u = &result.usage;
        let rows = self
            .query(
                "recording a result",
                q::FINISH,
                &[
                    &claim.id,
                    &claim.attempt,
                    &result.state.as_str(),
                    &o.exit_code,
                    &o.turn_end,
                    &o.error,
                    &u.input_tokens,
                    &u.output_tokens,
                    &u.requests,
                    &result.diff,
                ],
                true,
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Gives `claim` back to the queue; `false` when it was no longer this attempt's.
    ///
    /// # Errors
    /// A failed statement.
    pub async fn release(&self, claim: &Claim) -> Result<bool, FleetError> {
        let rows = self
            .query(
                "releasing a claim",
                q::RELEASE,
                &[&claim.id, &claim.attempt],
                true,
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Gives `claim` up without running it and keeps the task invisible for `delay` (its
    /// session is still held by an earlier attempt's writer); `false` when the claim was no
    /// longer this attempt's.
    ///
    /// # Errors
    /// A failed statement.
    pub async fn defer(&self, claim: &Claim, delay: Duration) -> Result<bool, FleetError> {
        let rows = self
            .query(
                "deferring a claim",
                q::DEFER,
                &[&claim.id, &claim.attempt, &secs(delay)],
                true,
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Every task, oldest first.
    ///
    /// # Errors
    /// A failed statement or an unknown stored value.
    pub async fn tasks(&self) -> Result<Vec<TaskRow>, FleetError> {
        let rows = self.query("listing tasks", q::TASKS, &[], true).await?;
        rows.iter().map(task_row).collect()
    }
}

fn parse_effort(id: i64, e: Option<String>) -> Result<Option<Effort>, FleetError> {
    match e {
        None => Ok(None),
        Some(s) => Effort::parse(&s).map(Some).ok_or(FleetError::BadRow {
            id,
            field: "effort",
            value: s,
        }),
    }
}

fn limits(timeout_seconds: Option<i32>) -> Limits {
    Limits {
        timeout_seconds: timeout_seconds.and_then(|t| u32::try_from(t).ok()),
    }
}

/// Column `i` of a row.
fn g<'a, T: tokio_postgres::types::FromSql<'a>>(r: &'a Row, i: usize) -> Result<T, FleetError> {
    r.try_get(i).map_err(sql("reading a task"))
}

fn task_row(r: &Row) -> Result<TaskRow, FleetError> {
    let id: i64 = g(r, 0)?;
    let state = TaskState::parse(id, &g::<String>(r, 6)?)?;
    let finished = matches!(state, TaskState::Done | TaskState::Failed);
    let exit_code: Option<i32> = g(r, 11)?;
    let turn_end: Option<String> = g(r, 12)?;
    let error: Option<String> = g(r, 13)?;
    let input: Option<i64> = g(r, 14)?;
    let output: Option<i64> = g(r, 15)?;
    let requests: Option<i64> = g(r, 16)?;
    Ok(TaskRow {
        id,
        spec: TaskSpec {
            prompt: g(r, 1)?,
            repo: g(r, 2)?,
            git_ref: g(r, 3)?,
            model: g(r, 4)?,
            effort: parse_effort(id, g(r, 5)?)?,
            limits: limits(g(r, 21)?),
        },
        state,
        attempts: g(r, 7)?,
        claimed_by: g(r, 8)?,
        visible_until_ms: g(r, 9)?,
        session_id: g(r, 10)?,
        outcome: finished.then_some(Outcome {
            exit_code,
            turn_end,
            error,
        }),
        usage: finished.then_some(Usage {
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
            requests: requests.unwrap_or(0),
        }),
        diff: g(r, 17)?,
        created_at_ms: g(r, 18)?,
        started_at_ms: g(r, 19)?,
        finished_at_ms: g(r, 20)?,
    })
}
