//! The in-process job registry.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::{AgentStatus, Agents};
use dsh_kernel::Ctx;
use dsh_llm::{Message, MessageSource};
use dsh_session::feature::{JobRegistered, JobSettled};
use dsh_session::wire::{JobCause, JobStatus};
use dsh_session::{NewEvent, Session};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::notice_text;
use crate::{JobInfo, JobReport, JobSpec, JobState, Jobs, JobsError, Producer};

/// One job.
struct Job {
    spec: JobSpec,
    started_at: u64,
    session: Arc<Session>,
    cancel: CancellationToken,
    /// `Some(reason)` once a kill was requested.
    kill: Option<Option<String>>,
    /// The settled outcome (set once its `job/settled` record is in the log).
    settled: Option<(JobStatus, JobReport)>,
    /// A settlement is being logged (guards against a second one meanwhile).
    settling: bool,
    /// The final result was returned by `job_output`.
    delivered: bool,
    /// `job_output` calls waiting for it now.
    waiters: usize,
    done: watch::Sender<bool>,
}

impl Job {
    fn status(&self) -> JobState {
        match (&self.settled, &self.kill) {
            (Some((s, _)), _) => JobState::Settled(s.clone()),
            (None, Some(_)) => JobState::Stopping,
            (None, None) => JobState::Running,
        }
    }
}

struct Inner {
    ctx: Ctx,
    jobs: Mutex<BTreeMap<String, Job>>,
    order: Mutex<Vec<String>>,
    wake_on_settle: bool,
    /// Notified whenever a job settles.
    changed: tokio::sync::Notify,
}

/// The `detail` of a job settled because its owner was torn down.
pub const TEARDOWN_DETAIL: &str = "its owner session ended";

/// The in-process [`Jobs`] implementation.
#[derive(Clone)]
pub struct LocalJobs(Arc<Inner>);

impl std::fmt::Debug for LocalJobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalJobs").finish_non_exhaustive()
    }
}

fn now_ms() -> u64 {
    u64::try_from(dsh_session::now_ms()).unwrap_or(0)
}

fn append(session: &Session, event: Result<NewEvent, serde_json::Error>) {
    match event {
        Ok(e) => {
            if let Err(error) = session.append(e) {
                tracing::warn!(%error, "jobs: cannot log a job record");
            }
        }
        Err(error) => tracing::warn!(%error, "jobs: cannot encode a job record"),
    }
}

impl LocalJobs {
    /// A registry whose producer tasks are owned by `ctx`'s fiber. `wake_on_settle`: send the
    /// settlement notice (`completionDelivery: wakeup`), else stay quiet.
    pub fn new(ctx: Ctx, wake_on_settle: bool) -> Self {
        Self(Arc::new(Inner {
            ctx,
            jobs: Mutex::new(BTreeMap::new()),
            order: Mutex::new(Vec::new()),
            wake_on_settle,
            changed: tokio::sync::Notify::new(),
        }))
    }

    fn settle(inner: &Inner, id: &str, report: JobReport) {
        let (notice, session, settled) = {
            let mut jobs = inner.jobs.lock();
            let Some(job) = jobs.get_mut(id) else {
                return;
            };
            if job.settled.is_some() || job.settling {
                return;
            }
            job.settling = true;
            let (status, cause, detail) = match &job.kill {
                Some(reason) => {
                    let mut detail = report.detail.clone();
                    if let Some(r) = reason {
                        detail = Some(match detail {
                            Some(d) => format!("{d}; {r}"),
                            None => r.clone(),
                        });
                    }
                    (JobStatus::Killed, JobCause::Kill, detail)
                }
                None => (
                    report.status.clone(),
                    JobCause::Producer,
                    report.detail.clone(),
                ),
            };
            let settled = JobSettled {
                job_id: id.to_owned(),
                owner: job.spec.owner.clone(),
                kind: job.spec.kind.clone(),
                label: job.spec.label.clone(),
                started_at: job.started_at,
                tool_call: job.spec.tool_call.clone(),
                finished_at: now_ms(),
                status: status.clone(),
                cause,
                producer_reported: true,
                detail: detail.clone(),
            };
            let quiet = job.kill.is_some() || job.waiters > 0 || !inner.wake_on_settle;
            let outcome = (
                status.clone(),
                JobReport {
                    status: status.clone(),
                    output: report.output,
                    detail,
                },
            );
            let notice = (!quiet).then(|| {
                (
                    job.spec.owner.clone(),
                    notice_text(id, &job.spec.kind, &job.spec.label, status.as_str()),
                )
            });
            (notice, job.session.clone(), (settled, outcome))
        };
        let (settled, outcome) = settled;
        // The record is in the log before anyone can see the job settled (a waiting
        // `job_output`, a listing): readers of the log never lag behind the registry.
        append(&session, NewEvent::plugin(&settled));
        let done = inner.jobs.lock().get_mut(id).map(|job| {
            job.settled = Some(outcome);
            job.settling = false;
            job.done.clone()
        });
        // The notice is in the owner's inbox before anyone sees the job done: a front end that
        // waits for the jobs and then for the owner's idle never misses the woken turn.
        if let Some((owner, text)) = notice {
            Self::notify(inner, &owner, text);
        }
        if let Some(done) = done {
            done.send_replace(true);
        }
        inner.changed.notify_waiters();
    }

    /// Settles every unsettled job of `owner` with cause `teardown` (status `killed`) and
    /// cancels its producer: the owner is being torn down, its session still open.
    pub fn teardown(&self, owner: &str) {
        let inner = &self.0;
        let ids: Vec<String> = inner
            .jobs
            .lock()
            .iter()
            .filter(|(_, j)| j.spec.owner == owner && j.settled.is_none() && !j.settling)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let (session, settled, done) = {
                let mut jobs = inner.jobs.lock();
                let Some(job) = jobs.get_mut(&id) else {
                    continue;
                };
                if job.settled.is_some() || job.settling {
                    continue;
                }
                let detail = Some(match job.kill.as_ref() {
                    Some(Some(reason)) => format!("{TEARDOWN_DETAIL}; {reason}"),
                    _ => TEARDOWN_DETAIL.to_owned(),
                });
                let record = JobSettled {
                    job_id: id.clone(),
                    owner: job.spec.owner.clone(),
                    kind: job.spec.kind.clone(),
                    label: job.spec.label.clone(),
                    started_at: job.started_at,
                    tool_call: job.spec.tool_call.clone(),
                    finished_at: now_ms(),
                    status: JobStatus::Killed,
                    cause: JobCause::Teardown,
                    producer_reported: false,
                    detail: detail.clone(),
                };
                job.settled = Some((
                    JobStatus::Killed,
                    JobReport {
                        status: JobStatus::Killed,
                        output: String::new(),
                        detail,
                    },
                ));
                job.cancel.cancel();
                (job.session.clone(), record, job.done.clone())
            };
            append(&session, NewEvent::plugin(&settled));
            done.send_replace(true);
            tracing::info!(job = %id, owner, "jobs: settled at its owner's teardown");
        }
        inner.changed.notify_waiters();
    }

    /// Unsettled jobs of `owner`.
    pub fn running(&self, owner: &str) -> Vec<String> {
        self.0
            .jobs
            .lock()
            .iter()
            .filter(|(_, j)| j.spec.owner == owner && j.settled.is_none())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Idle owner: a new turn; busy owner: a steer into its running turn.
    fn notify(inner: &Inner, owner: &str, text: String) {
        let Some(agent) = inner.ctx.get::<dyn Agents>().and_then(|a| a.get(owner)) else {
            tracing::debug!(owner, "jobs: owner gone; notice dropped");
            return;
        };
        let source = MessageSource::new("tool-jobs").with("form", "notice".into());
        let message = Message::new(
            "",
            dsh_llm::Role::User,
            vec![dsh_llm::ContentBlock::text(text)],
            source,
        );
        let sent = if agent.status() == AgentStatus::Running {
            agent.steer(message)
        } else {
            agent.followup(message)
        };
        if let Err(error) = sent {
            tracing::warn!(%error, owner, "jobs: cannot deliver the settlement notice");
        }
    }

    fn check_owner<'a>(
        jobs: &'a mut BTreeMap<String, Job>,
        caller: &str,
        id: &str,
    ) -> Result<&'a mut Job, JobsError> {
        let job = jobs
            .get_mut(id)
            .ok_or_else(|| JobsError::NotFound(id.to_owned()))?;
        if job.spec.owner != caller {
            return Err(JobsError::NotOwner(id.to_owned()));
        }
        Ok(job)
    }
}

/// `<text>\n[status: <s>]` or `[status: <s>, <detail>]`.
fn with_status(text: &str, status: &JobState, detail: Option<&str>) -> String {
    let tail = match detail {
        Some(d) if !d.is_empty() => format!("[status: {status}, {d}]"),
        _ => format!("[status: {status}]"),
    };
    if text.is_empty() {
        tail
    } else if text.ends_with('\n') {
        format!("{text}{tail}")
    } else {
        format!("{text}\n{tail}")
    }
}

impl Jobs for LocalJobs {
    fn start(&self, spec: JobSpec, producer: Producer) -> Result<String, JobsError> {
        let agent = self
            .0
            .ctx
            .get::<dyn Agents>()
            .and_then(|a| a.get(&spec.owner))
            .ok_or_else(|| JobsError::OwnerUnavailable(spec.owner.clone()))?;
        let session = agent.session();
        let id = format!(
            "{}-{:016x}",
            spec.kind,
            uuid::Uuid::now_v7().as_u64_pair().1
        );
        let started_at = now_ms();
        let cancel = CancellationToken::new();
        append(
            &session,
            NewEvent::plugin(&JobRegistered {
                job_id: id.clone(),
                owner: spec.owner.clone(),
                kind: spec.kind.clone(),
                label: spec.label.clone(),
                started_at,
                tool_call: spec.tool_call.clone(),
            }),
        );
        self.0.jobs.lock().insert(
            id.clone(),
            Job {
                spec,
                started_at,
                session,
                cancel: cancel.clone(),
                kill: None,
                settled: None,
                settling: false,
                delivered: false,
                waiters: 0,
                done: watch::channel(false).0,
            },
        );
        self.0.order.lock().push(id.clone());
        let inner = self.0.clone();
        let job_id = id.clone();
        let task = async move {
            let report = producer(cancel).await;
            LocalJobs::settle(&inner, &job_id, report);
        };
        if let Err(error) = self.0.ctx.spawn(task) {
            tracing::warn!(%error, "jobs: cannot start the producer");
            self.0.jobs.lock().remove(&id);
            return Err(JobsError::ShuttingDown);
        }
        Ok(id)
    }

    fn output(
        &self,
        caller: &str,
        id: &str,
        wait: Option<Duration>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<String, JobsError>> {
        let inner = self.0.clone();
        let caller = caller.to_owned();
        let id = id.to_owned();
        Box::pin(async move {
            let mut done = {
                let mut jobs = inner.jobs.lock();
                let job = LocalJobs::check_owner(&mut jobs, &caller, &id)?;
                if job.settled.is_none() && wait.is_some() {
                    job.waiters += 1;
                }
                job.done.subscribe()
            };
            if let Some(limit) = wait {
                let waited = async {
                    let _ = done.wait_for(|d| *d).await;
                };
                tokio::select! {
                    () = waited => {}
                    () = tokio::time::sleep(limit) => {}
                    () = cancel.cancelled() => {}
                }
            }
            let mut jobs = inner.jobs.lock();
            let job = LocalJobs::check_owner(&mut jobs, &caller, &id)?;
            if wait.is_some() && job.waiters > 0 {
                job.waiters -= 1;
            }
            let status = job.status();
            match &job.settled {
                Some((_, report)) if !job.delivered => {
                    job.delivered = true;
                    let text = if report.output.is_empty() {
                        "(no output)"
                    } else {
                        report.output.as_str()
                    };
                    Ok(with_status(text, &status, report.detail.as_deref()))
                }
                Some((_, report)) => Ok(with_status(
                    "(no new output)",
                    &status,
                    report.detail.as_deref(),
                )),
                None => Ok(with_status("(no new output)", &status, None)),
            }
        })
    }

    fn list(&self, caller: &str) -> Vec<JobInfo> {
        let jobs = self.0.jobs.lock();
        self.0
            .order
            .lock()
            .iter()
            .filter_map(|id| jobs.get(id).map(|j| (id, j)))
            .filter(|(_, j)| j.spec.owner == caller)
            .map(|(id, j)| JobInfo {
                id: id.clone(),
                kind: j.spec.kind.clone(),
                status: j.status(),
                label: j.spec.label.clone(),
            })
            .collect()
    }

    fn running(&self, owner: &str) -> Vec<String> {
        LocalJobs::running(self, owner)
    }

    fn when_settled(&self, owner: &str) -> BoxFuture<'static, ()> {
        let me = self.clone();
        let owner = owner.to_owned();
        Box::pin(async move {
            loop {
                let changed = me.0.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if LocalJobs::running(&me, &owner).is_empty() {
                    return;
                }
                changed.await;
            }
        })
    }

    fn teardown(&self, owner: &str) {
        LocalJobs::teardown(self, owner);
    }

    fn kill(&self, caller: &str, id: &str, reason: Option<String>) -> Result<(), JobsError> {
        let mut jobs = self.0.jobs.lock();
        let job = LocalJobs::check_owner(&mut jobs, caller, id)?;
        if job.settled.is_none() && job.kill.is_none() {
            job.kill = Some(reason);
            job.cancel.cancel();
        }
        Ok(())
    }
}
