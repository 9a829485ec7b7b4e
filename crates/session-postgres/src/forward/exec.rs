//! The owner's side: claims the ops other servers forwarded to this one, applies each to the
//! local client (in order per session, sessions side by side) and records the reply.

use std::sync::Arc;

use dsh_protocol::ProtocolError;

use super::signals::{self, Key};
use super::{Reply, Request, Shared, sql};
use crate::error::PgStoreError;

/// One claimed op.
#[derive(Debug)]
struct Claimed {
    id: i64,
    session: String,
    epoch: i64,
    request: String,
}

/// Runs until aborted.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut rx = shared.signals.watch(Key::Ops);
    loop {
        rx.borrow_and_update();
        let claimed = match shared.me() {
            Some(me) => claim(&shared, &me).await,
            None => Ok(Vec::new()),
        };
        match claimed {
            Ok(ops) if !ops.is_empty() => {
                apply_all(&shared, ops).await;
                // More may have come meanwhile: look again at once.
                continue;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("forwarding: claiming ops failed: {e}"),
        }
        signals::wait(&mut rx, shared.options.poll).await;
    }
}

async fn claim(shared: &Shared, me: &str) -> Result<Vec<Claimed>, PgStoreError> {
    let rows = shared
        .db
        .with("claim forwarded ops", |c| {
            let me = me.to_owned();
            async move { c.client.query(sql::CLAIM, &[&me]).await }
        })
        .await?;
    let op = "claim forwarded ops";
    let mut ops = rows
        .iter()
        .map(|r| {
            Ok(Claimed {
                id: super::col(r, 0, op)?,
                session: super::col(r, 1, op)?,
                epoch: super::col(r, 2, op)?,
                request: super::col(r, 3, op)?,
            })
        })
        .collect::<Result<Vec<_>, PgStoreError>>()?;
    ops.sort_by_key(|o| o.id);
    Ok(ops)
}

/// Applies a batch: each session's ops in the order they were queued, sessions side by side.
async fn apply_all(shared: &Arc<Shared>, ops: Vec<Claimed>) {
    let mut groups: Vec<(String, Vec<Claimed>)> = Vec::new();
    for op in ops {
        match groups.iter_mut().find(|(s, _)| *s == op.session) {
            Some((_, g)) => g.push(op),
            None => groups.push((op.session.clone(), vec![op])),
        }
    }
    futures::future::join_all(groups.into_iter().map(|(_, ops)| async move {
        for op in ops {
            let reply = apply(shared, &op).await;
            super::relay::ensure(shared, &op.session);
            if let Err(e) = finish(shared, op.id, &reply).await {
                tracing::warn!(op = op.id, "forwarding: recording a reply failed: {e}");
            }
        }
    }))
    .await;
}

async fn apply(shared: &Shared, op: &Claimed) -> Reply {
    let holds = (shared.store)().and_then(|s| s.epoch(&op.session)) == Some(op.epoch);
    if !holds {
        return Reply::NotOwner;
    }
    let request: Request = match serde_json::from_str(&op.request) {
        Ok(r) => r,
        Err(e) => {
            return Reply::Failed {
                error: ProtocolError::new(
                    dsh_protocol::ErrorCode::InvalidRequest,
                    format!("forwarded op {} cannot be read: {e}", op.id),
                ),
            };
        }
    };
    tracing::debug!(session = %op.session, op = op.id, "applying a forwarded op");
    let local = &shared.local;
    let id = op.session.as_str();
    let failed = |error| Reply::Failed { error };
    match request {
        Request::Send { op } => match local.send(id, op).await {
            Ok(accepted) => Reply::Accepted { accepted },
            Err(e) => failed(e),
        },
        Request::Open { request } => match local.open(request).await {
            Ok(summary) => Reply::Opened {
                summary: Box::new(summary),
            },
            Err(e) => failed(e),
        },
        Request::Commands => match local.commands(id).await {
            Ok(commands) => Reply::Commands { commands },
            Err(e) => failed(e),
        },
        Request::Close => match local.close(id).await {
            Ok(()) => Reply::Closed,
            Err(e) => failed(e),
        },
    }
}

async fn finish(shared: &Shared, op: i64, reply: &Reply) -> Result<(), PgStoreError> {
    let text = serde_json::to_string(reply).unwrap_or_else(|_| {
        r#"{"type":"failed","error":{"code":"INTERNAL","message":"the reply cannot be written"}}"#
            .to_owned()
    });
    shared
        .db
        .with("record a forwarded op's reply", |c| {
            let text = text.clone();
            async move { c.client.query_opt(sql::FINISH, &[&op, &text]).await }
        })
        .await
        .map(|_| ())
}
