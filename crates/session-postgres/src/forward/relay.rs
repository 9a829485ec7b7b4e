//! The owner's side of what is live only: the steers and the questions to the user of a session
//! this server holds are not in the log, so the server publishes them to `dsh_live` for the
//! servers that watch the session from another host.
//!
//! One task per session this server holds (started by the first op it serves for it, ended when
//! the session closes): a subscriber of the local session that keeps the steer and question
//! events (`steerQueued`, `steerDelivered`, `steerWithdrawn`, `questionAsked`,
//! `questionAnswered`) and the pending ones of its first snapshot, and writes each as a row
//! with the lease's owner and epoch, `NOTIFY dsh_commits` in the same statement. These come at
//! the pace of a person and of `ask_user_question` calls, so a statement each costs nothing that
//! matters; text and reasoning deltas (tens a second while the model streams) are not
//! published: a notification or a row each would load the database with what only a person
//! looking at the owner needs at that pace.

use std::sync::Arc;

use dsh_protocol::EventMsg;
use futures::StreamExt;

use super::{Shared, sql};

/// Starts the relay of `id` when this server holds the session and none runs.
pub(crate) fn ensure(shared: &Arc<Shared>, id: &str) {
    let Some(store) = (shared.store)() else {
        return;
    };
    let Some(epoch) = store.epoch(id) else {
        return;
    };
    let owner = store.owner().to_owned();
    let mut relays = shared.relays.lock();
    relays.retain(|_, t| !t.is_finished());
    if relays.contains_key(id) {
        return;
    }
    let task = tokio::spawn(run(Arc::clone(shared), id.to_owned(), owner, epoch));
    relays.insert(id.to_owned(), task);
}

/// Whether a live event is one the relay publishes.
fn relayed(msg: &EventMsg) -> bool {
    matches!(
        msg,
        EventMsg::SteerQueued { .. }
            | EventMsg::SteerDelivered { .. }
            | EventMsg::SteerWithdrawn { .. }
            | EventMsg::QuestionAsked(_)
            | EventMsg::QuestionAnswered { .. }
    )
}

async fn run(shared: Arc<Shared>, id: String, owner: String, epoch: i64) {
    // From the end of the log: only what happens from now on (and the snapshot's pending state).
    let mut events = match shared.local.subscribe(&id, Some(u64::MAX)).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(session = %id, "forwarding: cannot follow the session's live events: {e}");
            return;
        }
    };
    while let Some(ev) = events.next().await {
        let seq = i64::try_from(ev.seq).unwrap_or(i64::MAX);
        let msgs = match ev.msg {
            EventMsg::Snapshot(snap) => {
                let mut out: Vec<EventMsg> = snap
                    .queued_steers
                    .into_iter()
                    .map(|s| EventMsg::SteerQueued {
                        steer_id: s.steer_id,
                        text: s.text,
                    })
                    .collect();
                out.extend(
                    snap.pending_questions
                        .into_iter()
                        .map(EventMsg::QuestionAsked),
                );
                out
            }
            EventMsg::Error(e) => {
                tracing::warn!(session = %id, "forwarding: the live relay stopped: {e}");
                break;
            }
            msg if relayed(&msg) => vec![msg],
            _ => continue,
        };
        for msg in msgs {
            if let Err(e) = publish(&shared, &id, (&owner, epoch), seq, &msg).await {
                tracing::warn!(session = %id, "forwarding: publishing a live event failed: {e}");
            }
        }
    }
    // Closed here: its live events go (another owner publishes its own).
    let gone = shared
        .db
        .with("remove a session's live events", |c| {
            let (id, owner) = (id.clone(), owner.clone());
            async move { c.client.execute(sql::UNPUBLISH, &[&id, &owner]).await }
        })
        .await;
    if let Err(e) = gone {
        tracing::warn!(session = %id, "forwarding: {e}");
    }
}

/// Writes one live event of lease `(owner, epoch)`, which happened after committed event `seq`.
async fn publish(
    shared: &Shared,
    id: &str,
    (owner, epoch): (&str, i64),
    seq: i64,
    msg: &EventMsg,
) -> Result<(), crate::PgStoreError> {
    let body = serde_json::to_string(msg).map_err(|e| {
        crate::PgStoreError::Runtime(format!("a live event cannot be written: {e}"))
    })?;
    shared
        .db
        .with("publish a live event", |c| {
            let (id, owner, body) = (id.to_owned(), owner.to_owned(), body.clone());
            async move {
                c.client
                    .query_one(sql::PUBLISH, &[&id, &owner, &epoch, &body, &seq])
                    .await
            }
        })
        .await
        .map(|_| ())
}

/// What the relayed events leave open: the pending questions and the queued steers.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    pub questions: Vec<dsh_protocol::QuestionRequest>,
    pub steers: Vec<dsh_protocol::QueuedSteer>,
}

impl Pending {
    /// Folds one relayed event in; `false`: it changes nothing (a repeat).
    pub fn update(&mut self, msg: &EventMsg) -> bool {
        match msg {
            EventMsg::SteerQueued { steer_id, text } => {
                if self.steers.iter().any(|s| &s.steer_id == steer_id) {
                    return false;
                }
                self.steers.push(dsh_protocol::QueuedSteer {
                    steer_id: steer_id.clone(),
                    text: text.clone(),
                });
            }
            EventMsg::SteerDelivered { steer_id } | EventMsg::SteerWithdrawn { steer_id } => {
                self.steers.retain(|s| &s.steer_id != steer_id);
            }
            EventMsg::QuestionAsked(q) => {
                if self.questions.iter().any(|p| p.request_id == q.request_id) {
                    return false;
                }
                self.questions.push(q.clone());
            }
            EventMsg::QuestionAnswered { request_id, .. } => {
                self.questions.retain(|q| &q.request_id != request_id);
            }
            _ => {}
        }
        true
    }
}
