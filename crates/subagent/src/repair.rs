//! Crash repair of children: when a parent is resumed, its stored children (and theirs) that
//! a crash left inside a turn are opened once, which appends the repair closers (format §15),
//! and closed again, before the parent's first step.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_agent::events::AgentSessionStart;
use dsh_agent::hooks::{PreStep, PreStepInput};
use dsh_kernel::{BoxError, Ctx, Next};
use dsh_session::Sessions;
use parking_lot::Mutex;

/// Registers the listener and the pre-step hook on `ctx`.
pub(crate) fn install(ctx: &Ctx, sessions: Arc<dyn Sessions>) -> Result<(), BoxError> {
    let pending: Arc<Mutex<HashSet<String>>> = Arc::default();
    let p = pending.clone();
    ctx.on::<AgentSessionStart>(move |ev| {
        if ev.resumed {
            p.lock().insert(ev.agent_id.clone());
        }
        Ok(())
    })?;
    ctx.hook::<PreStep, _, _>(move |input: PreStepInput, next: Next<PreStep>| {
        let due = pending.lock().remove(input.agent.id());
        let sessions = sessions.clone();
        async move {
            if due {
                repair_children(sessions.as_ref(), input.agent.id()).await;
            }
            next.run(input).await
        }
    })?;
    Ok(())
}

/// Repairs every stored descendant of `parent` left inside a turn. Failures are logged: a
/// child that cannot be repaired now is repaired when it is itself opened.
pub async fn repair_children(sessions: &dyn Sessions, parent: &str) {
    let list = match sessions.list() {
        Ok(l) => l,
        Err(error) => {
            tracing::warn!(%error, "subagent repair: cannot list sessions");
            return;
        }
    };
    let mut stack = vec![parent.to_owned()];
    let mut seen = HashSet::new();
    while let Some(p) = stack.pop() {
        if !seen.insert(p.clone()) {
            continue;
        }
        for child in list
            .iter()
            .filter(|s| s.parent_session.as_deref() == Some(p.as_str()))
        {
            stack.push(child.id.clone());
            if sessions.get(&child.id).is_some() {
                continue;
            }
            let open = match sessions.read(&child.id) {
                Ok(log) => log.tracker().open_turn().is_some(),
                Err(error) => {
                    tracing::warn!(child = %child.id, %error, "subagent repair: unreadable child");
                    continue;
                }
            };
            if !open {
                continue;
            }
            match sessions.open(&child.id) {
                Ok(_) => {
                    if let Err(error) = sessions.close(&child.id).await {
                        tracing::warn!(child = %child.id, %error, "subagent repair: close failed");
                    } else {
                        tracing::info!(child = %child.id, "subagent repair: child log repaired");
                    }
                }
                Err(error) => {
                    tracing::warn!(child = %child.id, %error, "subagent repair: cannot open child");
                }
            }
        }
    }
}
