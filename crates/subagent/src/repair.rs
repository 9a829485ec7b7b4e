//! Crash repair of children: when a parent is resumed, its stored children (and theirs) that
//! a crash left inside a turn are opened once, which appends the repair closers (format §15),
//! and closed again, before the parent's first step.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_agent::events::AgentSessionStart;
use dsh_agent::hooks::{PreStep, PreStepInput};
use dsh_kernel::{BoxError, Ctx, Next};
use dsh_session::{PluginEvent, SessionLog, Sessions};

use dsh_subagent_api::SubagentCatalog;
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
///
/// Descendants are found through the `subagent/catalog` entries of each log (the parent's own,
/// then each child's), not by listing every stored session: the catalog entry is appended to
/// the parent before the child's first turn, so a child without one never started a turn and
/// has nothing to repair. The cost is one read per descendant, whatever else the store holds.
pub async fn repair_children(sessions: &dyn Sessions, parent: &str) {
    let mut stack = match sessions.get(parent) {
        Some(s) => s.with_log(catalog_children),
        None => match sessions.read(parent) {
            Ok(log) => catalog_children(&log),
            Err(error) => {
                tracing::warn!(%parent, %error, "subagent repair: unreadable parent");
                return;
            }
        },
    };
    let mut seen = HashSet::new();
    seen.insert(parent.to_owned());
    while let Some(child) = stack.pop() {
        if !seen.insert(child.clone()) {
            continue;
        }
        if let Some(live) = sessions.get(&child) {
            // Open here: already repaired by its own open; its children may not be.
            stack.extend(live.with_log(catalog_children));
            continue;
        }
        let open = match sessions.read(&child) {
            Ok(log) => {
                stack.extend(catalog_children(&log));
                log.tracker().open_turn().is_some()
            }
            Err(error) => {
                tracing::warn!(%child, %error, "subagent repair: unreadable child");
                continue;
            }
        };
        if !open {
            continue;
        }
        match sessions.open(&child) {
            Ok(_) => {
                if let Err(error) = sessions.close(&child).await {
                    tracing::warn!(%child, %error, "subagent repair: close failed");
                } else {
                    tracing::info!(%child, "subagent repair: child log repaired");
                }
            }
            Err(error) => {
                tracing::warn!(%child, %error, "subagent repair: cannot open child");
            }
        }
    }
}

/// The child ids of a log's `subagent/catalog` entries, in log order.
fn catalog_children(log: &SessionLog) -> Vec<String> {
    log.events()
        .iter()
        .filter(|e| e.kind() == <SubagentCatalog as PluginEvent>::TYPE)
        .filter_map(|e| e.plugin::<SubagentCatalog>()?.ok())
        .map(|c| c.child_id)
        .collect()
}
