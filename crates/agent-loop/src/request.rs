//! Request bookkeeping (`session-format.md` §9) and system prompt reconciliation (§10.2).

use std::sync::Arc;

use dsh_llm::{ContentBlock, Message, MessageSource, Role, ToolSpec};
use dsh_session::data::{
    DeveloperMessage, EpochHeader, RequestContext, RequestHeader, RequestReason, SystemMessage,
};
use dsh_session::{CoreEvent, NewEvent, Session, SessionError};

use crate::context::ContextTracker;

/// Per loop-instance request state.
pub(crate) struct RequestState {
    /// Whether this loop instance has logged a header yet.
    header_logged: bool,
    /// `content_generation` at attachment, then after every built request.
    pub(crate) request_surface_generation: u64,
    /// The latest `request/context` payload in the log.
    last_context: Option<RequestContext>,
    /// The retained runtime-context snapshot, folded incrementally.
    pub(crate) context: ContextTracker,
    /// The tool list last offered (or the latest header's at attachment), shared by the
    /// headers and compared by pointer while the assembled tools stay equal to it.
    tools: Option<Arc<[ToolSpec]>>,
}

impl RequestState {
    /// State of a loop attaching to `session` (fresh or resumed).
    pub(crate) fn attach(session: &Session) -> Self {
        let (generation, last_context, context) = session.with_log(|l| {
            let ctx = l.latest_request_context().and_then(|e| match e.core() {
                Some(CoreEvent::RequestContext(c)) => Some((**c).clone()),
                _ => None,
            });
            (
                l.surface().content_generation(),
                ctx,
                ContextTracker::attach(l),
            )
        });
        Self {
            header_logged: false,
            request_surface_generation: generation,
            last_context,
            context,
            tools: latest_header(session).and_then(|(_, h)| h.header.tools),
        }
    }

    /// The assembled `tools` as a shared list: the one offered before when they are equal (one
    /// comparison per step instead of a copy of every schema and two comparisons), else a new
    /// one. `None` when there are no tools.
    pub(crate) fn shared_tools(&mut self, tools: &[ToolSpec]) -> Option<Arc<[ToolSpec]>> {
        if tools.is_empty() {
            return None;
        }
        match &self.tools {
            Some(t) if **t == *tools => {}
            _ => self.tools = Some(Arc::from(tools)),
        }
        self.tools.clone()
    }
}

pub(crate) use dsh_session::ids::message_id as new_id;

/// Text of a system node: `Some("")` empty, `Some(t)` one text block, `None` anything else (⊥).
fn node_text(message: &Message) -> Option<&str> {
    match message.content.as_slice() {
        [] => Some(""),
        [ContentBlock::Text { text }] => Some(text.as_str()),
        _ => None,
    }
}

fn system_event(turn: u64, step: u64, text: &str) -> NewEvent {
    let content = if text.is_empty() {
        Vec::new()
    } else {
        vec![ContentBlock::text(text)]
    };
    let message = Message::new(
        new_id(),
        Role::System,
        content,
        MessageSource::system_prompt(),
    );
    NewEvent::core(SystemMessage {
        turn,
        step,
        message: message.into(),
    })
}

/// Reconciles the rendered prompt with the surviving system nodes (§10.2) and appends the
/// resulting `system/message` events.
pub(crate) fn reconcile_prompt(
    session: &Session,
    rendered: &str,
    in_history: bool,
    starts_series: bool,
    turn: u64,
    step: u64,
) -> Result<(), SessionError> {
    let nodes: Vec<(u64, Option<String>)> = session.with_log(|l| {
        l.surface()
            .nodes()
            .iter()
            .filter(|n| n.kind == dsh_session::vocab::SYSTEM_MESSAGE)
            .map(|n| (n.seq, node_text(&n.message).map(str::to_owned)))
            .collect()
    });
    let Some((head_seq, head_text)) = nodes.first().cloned() else {
        session.append(system_event(turn, step, rendered))?;
        return Ok(());
    };
    if !in_history || starts_series || rendered.is_empty() {
        for (seq, text) in nodes.iter().skip(1) {
            if text.as_deref() != Some("") {
                session.append(
                    system_event(turn, step, "")
                        .replacing(*seq, *seq)
                        .with_sources(vec![*seq]),
                )?;
            }
        }
        if head_text.as_deref() != Some(rendered) {
            session.append(
                system_event(turn, step, rendered)
                    .replacing(head_seq, head_seq)
                    .with_sources(vec![head_seq]),
            )?;
        }
        return Ok(());
    }
    let latest = nodes
        .iter()
        .rev()
        .find(|(_, t)| t.as_deref() != Some(""))
        .unwrap_or(&nodes[0]);
    if latest.1.as_deref() == Some(rendered) {
        return Ok(());
    }
    session.append(system_event(turn, step, rendered))?;
    Ok(())
}

fn latest_header(session: &Session) -> Option<(u64, Box<RequestHeader>)> {
    session.with_log(|l| {
        let ev = l.latest_request_header()?;
        match ev.core() {
            Some(CoreEvent::RequestHeader(h)) => Some((ev.seq(), h.clone())),
            _ => None,
        }
    })
}

/// `tools` (the assembled, canonical order) in the order the session's latest `request/header`
/// declared them: the tools it declared keep their places and the tools that arrived since
/// follow, in the canonical order. A late tool (an MCP server that became ready after the
/// first request, `tools/list_changed`) is thus appended to the request's tools instead of
/// being sorted into their middle, so the cached prefix holds up to it; the developer message
/// of the change announces it as usual. Without a header the canonical order stands.
pub(crate) fn keep_declared_order(session: &Session, tools: Vec<ToolSpec>) -> Vec<ToolSpec> {
    let Some((_, header)) = latest_header(session) else {
        return tools;
    };
    let Some(declared) = header.header.tools.as_deref() else {
        return tools;
    };
    let mut rest: Vec<Option<ToolSpec>> = tools.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(rest.len());
    for d in declared {
        if let Some(slot) = rest
            .iter_mut()
            .find(|t| t.as_ref().is_some_and(|t| t.name == d.name))
        {
            out.extend(slot.take());
        }
    }
    out.extend(rest.into_iter().flatten());
    out
}

/// Whether the assembled tools (shared by [`RequestState::shared_tools`]) differ from the
/// latest header's tools.
pub(crate) fn tools_changed(session: &Session, tools: Option<&Arc<[ToolSpec]>>) -> bool {
    match latest_header(session) {
        Some((_, h)) => match (h.header.tools.as_ref(), tools) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b) && a != b,
            (a, b) => a.is_some_and(|t| !t.is_empty()) || b.is_some_and(|t| !t.is_empty()),
        },
        None => false,
    }
}

fn names(tools: &Option<std::sync::Arc<[ToolSpec]>>) -> Vec<String> {
    tools
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

/// Logs `request/header` (§9.2), `developer/message` (§9.4) and `request/context` (§9.5) as
/// needed for this attempt.
pub(crate) fn log_request(
    session: &Session,
    state: &mut RequestState,
    header: EpochHeader,
    context: RequestContext,
    starts_pre_step: bool,
    turn: u64,
    step: u64,
) -> Result<(), SessionError> {
    let generation = session.content_generation();
    let starts = starts_pre_step || state.request_surface_generation != generation;
    let baseline = latest_header(session);
    let reason = if !state.header_logged {
        Some(if baseline.is_some() {
            RequestReason::Resume
        } else {
            RequestReason::Initial
        })
    } else if baseline
        .as_ref()
        .is_none_or(|(_, b)| !b.header.same_as(&header))
    {
        Some(RequestReason::Change)
    } else if starts {
        Some(RequestReason::Series)
    } else {
        None
    };
    if let Some(reason) = reason {
        let starts_series = (starts && reason != RequestReason::Series).then_some(true);
        let changed = matches!(reason, RequestReason::Resume | RequestReason::Change);
        let ev = session.append(NewEvent::core(RequestHeader {
            header: header.clone(),
            reason,
            starts_series,
        }))?;
        state.header_logged = true;
        if let (Some((_, base)), true) = (&baseline, changed) {
            let prev = names(&base.header.tools);
            let cur = names(&header.tools);
            let mut content = Vec::new();
            let mut additions = false;
            for n in &cur {
                if !prev.contains(n) {
                    additions = true;
                    content.push(ContentBlock::ToolAddition {
                        tool_name: n.clone(),
                    });
                }
            }
            for n in &prev {
                if !cur.contains(n) {
                    content.push(ContentBlock::ToolRemoval {
                        tool_name: n.clone(),
                    });
                }
            }
            if !content.is_empty() {
                let message = Message::new(
                    new_id(),
                    Role::Developer,
                    content,
                    MessageSource::new("tool-registry"),
                );
                let data = DeveloperMessage {
                    turn,
                    step,
                    message: message.into(),
                    header_seq: additions.then_some(ev.seq()),
                };
                session.append(NewEvent::core(data))?;
            }
        }
    }
    if state.last_context.as_ref() != Some(&context) {
        session.append(NewEvent::core(context.clone()))?;
        state.last_context = Some(context);
    }
    Ok(())
}
