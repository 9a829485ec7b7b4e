//! [`Forwarder`] as a [`Client`]: each call served locally or forwarded to the owner.

use std::sync::Arc;

use dsh_protocol::{
    Client, CommandInfo, ErrorCode, EventStream, LogStream, Op, OpAccepted, OpenSession,
    ProtocolError, SessionQuery, SessionState, SessionSummary,
};
use futures::future::BoxFuture;

use super::{Forwarder, Reply, Request, Shared, sql};
use crate::error::PgStoreError;

fn storage(e: PgStoreError) -> ProtocolError {
    ProtocolError::new(ErrorCode::StorageFailed, e.to_string())
}

fn unexpected(reply: &Reply) -> ProtocolError {
    ProtocolError::new(
        ErrorCode::Internal,
        format!("the session's owner answered a forwarded call with {reply:?}"),
    )
}

impl Shared {
    /// Forwards `request` when another server owns the session; `None`: serve it here. A local
    /// refusal because another writer took the lease meanwhile is routed once more.
    async fn call<T>(
        &self,
        id: &str,
        request: Request,
        local: impl AsyncFnOnce() -> Result<T, ProtocolError>,
        unpack: impl Fn(Reply) -> Result<T, ProtocolError>,
    ) -> Result<T, ProtocolError> {
        if let Some(reply) = self.forward(id, &request).await? {
            return unpack(reply);
        }
        match local().await {
            Err(e) if e.code == ErrorCode::SessionLocked => {
                match self.forward(id, &request).await? {
                    Some(reply) => unpack(reply),
                    None => Err(self.why_locked(id, e).await),
                }
            }
            other => other,
        }
    }

    /// A `SESSION_LOCKED` that names the holder and says why the op was not forwarded to it.
    async fn why_locked(&self, id: &str, e: ProtocolError) -> ProtocolError {
        match self.lease(id).await {
            Ok(Some(l)) if self.elsewhere(&l) && !l.forwards => ProtocolError::new(
                e.code,
                format!(
                    "{}; it is held by {} (lease epoch {}), which takes no forwarded ops (a `dsh \
                     exec`, a worker, or a server that stopped): try again when it is done",
                    e.message,
                    l.owner.unwrap_or_default(),
                    l.epoch
                ),
            ),
            _ => e,
        }
    }

    /// Summaries of sessions another live owner serves say so: `working` when their last turn
    /// is open, else `idle` (the store does not know more), in place of `ended`.
    async fn mark_elsewhere(&self, summaries: &mut [SessionSummary]) -> Result<(), PgStoreError> {
        let ids: Vec<String> = summaries
            .iter()
            .filter(|s| s.state == SessionState::Ended)
            .map(|s| s.id.clone())
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let me = self.me().unwrap_or_default();
        let rows = self
            .db
            .with("list the sessions other servers own", |c| {
                let (me, ids) = (me.clone(), ids.clone());
                async move { c.client.query(sql::HELD_ELSEWHERE, &[&me, &ids]).await }
            })
            .await?;
        let held: Vec<String> = rows.iter().filter_map(|r| r.try_get(0).ok()).collect();
        for s in summaries.iter_mut().filter(|s| held.contains(&s.id)) {
            s.state = if s.turns > 0 && s.last_turn_end.is_none() {
                SessionState::Working
            } else {
                SessionState::Idle
            };
        }
        Ok(())
    }
}

fn accepted(reply: Reply) -> Result<OpAccepted, ProtocolError> {
    match reply {
        Reply::Accepted { accepted } => Ok(accepted),
        Reply::Failed { error } => Err(error),
        other => Err(unexpected(&other)),
    }
}

fn opened(reply: Reply) -> Result<SessionSummary, ProtocolError> {
    match reply {
        Reply::Opened { summary } => Ok(*summary),
        Reply::Failed { error } => Err(error),
        other => Err(unexpected(&other)),
    }
}

fn commands(reply: Reply) -> Result<Vec<CommandInfo>, ProtocolError> {
    match reply {
        Reply::Commands { commands } => Ok(commands),
        Reply::Failed { error } => Err(error),
        other => Err(unexpected(&other)),
    }
}

fn closed(reply: Reply) -> Result<(), ProtocolError> {
    match reply {
        Reply::Closed => Ok(()),
        Reply::Failed { error } => Err(error),
        other => Err(unexpected(&other)),
    }
}

impl Client for Forwarder {
    fn open(&self, request: OpenSession) -> BoxFuture<'_, Result<SessionSummary, ProtocolError>> {
        Box::pin(async move {
            let s = &self.shared;
            match &request {
                // A resume of a session another server serves is that server's.
                OpenSession::Resume { session_id, .. } => {
                    let id = session_id.clone();
                    let forwarded = Request::Open {
                        request: request.clone(),
                    };
                    let opened = s
                        .call(&id, forwarded, async || s.local.open(request).await, opened)
                        .await?;
                    super::relay::ensure(s, &id);
                    Ok(opened)
                }
                // A fork reads the log and creates a session here; a create is new.
                _ => {
                    let opened = s.local.open(request).await?;
                    super::relay::ensure(s, &opened.id);
                    Ok(opened)
                }
            }
        })
    }

    fn send(&self, session_id: &str, op: Op) -> BoxFuture<'_, Result<OpAccepted, ProtocolError>> {
        let id = session_id.to_owned();
        Box::pin(async move {
            let s = &self.shared;
            let request = Request::Send { op: op.clone() };
            let accepted = s
                .call(&id, request, async || s.local.send(&id, op).await, accepted)
                .await?;
            // Served here (a stored session is opened by its first op): its live events are
            // published for other hosts' watchers.
            super::relay::ensure(s, &id);
            Ok(accepted)
        })
    }

    fn subscribe(
        &self,
        session_id: &str,
        after: Option<u64>,
    ) -> BoxFuture<'_, Result<EventStream, ProtocolError>> {
        let id = session_id.to_owned();
        Box::pin(async move { super::tail::events(Arc::clone(&self.shared), id, after).await })
    }

    fn log(
        &self,
        session_id: &str,
        after: Option<u64>,
    ) -> BoxFuture<'_, Result<LogStream, ProtocolError>> {
        let id = session_id.to_owned();
        Box::pin(async move { super::tail::records(Arc::clone(&self.shared), id, after).await })
    }

    fn sessions(
        &self,
        query: SessionQuery,
    ) -> BoxFuture<'_, Result<Vec<SessionSummary>, ProtocolError>> {
        Box::pin(async move {
            let mut list = self.shared.local.sessions(query).await?;
            self.shared
                .mark_elsewhere(&mut list)
                .await
                .map_err(storage)?;
            Ok(list)
        })
    }

    fn session(&self, session_id: &str) -> BoxFuture<'_, Result<SessionSummary, ProtocolError>> {
        let id = session_id.to_owned();
        Box::pin(async move {
            let mut one = [self.shared.local.session(&id).await?];
            self.shared
                .mark_elsewhere(&mut one)
                .await
                .map_err(storage)?;
            let [one] = one;
            Ok(one)
        })
    }

    fn commands(&self, session_id: &str) -> BoxFuture<'_, Result<Vec<CommandInfo>, ProtocolError>> {
        let id = session_id.to_owned();
        Box::pin(async move {
            let s = &self.shared;
            s.call(
                &id,
                Request::Commands,
                async || s.local.commands(&id).await,
                commands,
            )
            .await
        })
    }

    fn close(&self, session_id: &str) -> BoxFuture<'_, Result<(), ProtocolError>> {
        let id = session_id.to_owned();
        Box::pin(async move {
            let s = &self.shared;
            s.call(
                &id,
                Request::Close,
                async || s.local.close(&id).await,
                closed,
            )
            .await
        })
    }
}
