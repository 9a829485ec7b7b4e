//! [`SessionLog`]: the in-memory log of one session. Admission (format §4), the incremental
//! surface fold (§8) and the turn/step/tool-call tracker that crash repair (§15) reads.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_llm::Message;
use serde_json::Value;

use crate::error::{AppendError, LogError};
use crate::event::{Event, NewEvent, SurfaceOp};
use crate::header::SessionHeader;
use crate::json::as_safe_u64;
use crate::surface::{Node, Surface, static_kind};
use crate::validate::{check_payload, message_slot};
use crate::vocab::*;

/// A tool call advertised in the open step and not yet settled by a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCall {
    /// The provider's call id.
    pub call_id: String,
    /// Step of the advertising assistant message.
    pub step: u64,
    /// Seq of its `tool/call`, once dispatched.
    pub call_seq: Option<u64>,
    /// Tool name (from the block).
    pub name: String,
    /// Raw arguments (from the block).
    pub arguments: String,
}

/// Turn/step/tool-call state folded over the log.
#[derive(Debug, Clone, Default)]
pub struct TurnTracker {
    last_turn: u64,
    open_turn: Option<u64>,
    open_step: Option<u64>,
    last_step: u64,
    pending: Vec<PendingCall>,
    advertised: HashSet<String>,
}

impl TurnTracker {
    /// The open turn, if any.
    pub fn open_turn(&self) -> Option<u64> {
        self.open_turn
    }
    /// The open step, if any.
    pub fn open_step(&self) -> Option<u64> {
        self.open_step
    }
    /// The highest turn number seen.
    pub fn last_turn(&self) -> u64 {
        self.last_turn
    }
    /// Unsettled calls of the open step, in advertisement order.
    pub fn pending(&self) -> &[PendingCall] {
        &self.pending
    }
}

fn turn_step(data: &Value) -> (u64, u64) {
    let g = |k: &str| data.get(k).and_then(as_safe_u64).unwrap_or(0);
    (g("turn"), g("step"))
}

/// The two pending inbox lists, rebuilt by replaying every `agent/inbox/spliced` in log order
/// (format §11): how a resumed agent finds its queued input.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inbox {
    /// `next-turn` list (follow-ups; one is claimed at each turn's first step).
    pub next_turn: Vec<Arc<Message>>,
    /// `next-step` list (steer and inject; claimed whole at each step).
    pub next_step: Vec<Arc<Message>>,
}

/// What admission decided to do with an event (applied only after every check passed).
enum Effect {
    None,
    Splice {
        next_step: bool,
        start: usize,
        removed: usize,
        inserted: Vec<Arc<Message>>,
    },
    Append(Node),
    Replace(crate::surface::ReplacePlan, Node),
    Offload(Vec<(usize, Arc<Message>)>),
}

/// Reading (replay of stored rows) or writing (live append).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Replay,
    Append,
}

/// The in-memory log of one session: header, immutable shared events, surface and tracker.
#[derive(Debug, Clone)]
pub struct SessionLog {
    header: SessionHeader,
    events: Vec<Arc<Event>>,
    surface: Surface,
    tracker: TurnTracker,
    inherited_cut: Option<u64>,
    inbox: Inbox,
    features: FeatureState,
}

/// State of the feature-event relationship rules (format §4.7): command runs and provider
/// retries.
#[derive(Debug, Clone, Default)]
struct FeatureState {
    /// commandId → whether its `command/done` was logged.
    commands: std::collections::HashMap<String, bool>,
    /// retryId → (turn, step, retry, started).
    retries: std::collections::HashMap<String, (u64, u64, u64, bool)>,
}

/// Crash-repair texts (format §15), exact.
pub mod texts {
    /// Crash, call never started.
    pub const CRASH_NOT_STARTED: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";
    /// Crash, call started.
    pub const CRASH_UNKNOWN: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";
    /// Fork, call never started.
    pub const FORK_NOT_STARTED: &str = "The history inherited by this branch has no record of this tool call starting. The parent session may have executed it after the fork point. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";
    /// Fork, call started.
    pub const FORK_UNKNOWN: &str = "The history inherited by this branch records this tool call starting but does not include its result. The parent session may have completed it after the fork point. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";
}

/// Why closers are synthesized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseCause {
    /// Crash repair on resume (`turn/end {interrupted}`).
    Interrupted,
    /// Fork seed (`turn/end {forked}`).
    Forked,
}

/// Current time in epoch milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl SessionLog {
    /// An empty log (a new session).
    pub fn new(header: SessionHeader) -> Self {
        SessionLog {
            header,
            events: Vec::new(),
            surface: Surface::default(),
            tracker: TurnTracker::default(),
            inherited_cut: None,
            inbox: Inbox::default(),
            features: FeatureState::default(),
        }
    }

    /// Admits stored rows in order (format §4.1 step 4–5). Any failure refuses the whole log.
    pub fn replay(header: SessionHeader, events: Vec<Event>) -> Result<Self, LogError> {
        let mut log = SessionLog::new(header);
        log.events.reserve(events.len());
        for ev in events {
            let ev = Arc::new(ev);
            let effect = log.admit(&ev, Mode::Replay).map_err(|reason| {
                let unsupported = reason.starts_with("unknown required event type");
                let msg = format!(
                    "session log rejected at event {} (\"{}\"): {reason}",
                    ev.seq(),
                    ev.kind()
                );
                if unsupported {
                    LogError::Unsupported(msg)
                } else {
                    LogError::Corrupt(msg)
                }
            })?;
            log.apply(ev, effect);
        }
        if log.header.is_seeded != log.inherited_cut.is_some() {
            return Err(LogError::Corrupt(format!(
                "session log header isSeeded is {} but the log {} an inherited session/end-seed marker",
                log.header.is_seeded,
                if log.inherited_cut.is_some() {
                    "has"
                } else {
                    "has no"
                }
            )));
        }
        Ok(log)
    }

    /// The header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }
    /// All committed events (shared, immutable).
    pub fn events(&self) -> &[Arc<Event>] {
        &self.events
    }
    /// Number of events (= the next seq).
    pub fn len(&self) -> u64 {
        self.events.len() as u64
    }
    /// Whether no event was appended.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
    /// The surface.
    pub fn surface(&self) -> &Surface {
        &self.surface
    }
    /// Turn/step/tool-call state.
    pub fn tracker(&self) -> &TurnTracker {
        &self.tracker
    }
    /// The pending inbox lists (format §11).
    pub fn inbox(&self) -> &Inbox {
        &self.inbox
    }
    /// Seq of the last `session/end-seed {inherited:true}` (events before it are inherited).
    pub fn inherited_cut(&self) -> Option<u64> {
        self.inherited_cut
    }
    /// The model history (format §8.3), incrementally maintained.
    pub fn derive_messages(&self) -> Vec<Arc<Message>> {
        self.surface.derive_messages()
    }
    /// Seq of the latest `turn/end`, if any.
    pub fn last_turn_end(&self) -> Option<u64> {
        self.events
            .iter()
            .rev()
            .find(|e| e.kind() == TURN_END)
            .map(|e| e.seq())
    }
    /// Seq of the latest `request/header`, if any.
    pub fn latest_request_header(&self) -> Option<&Arc<Event>> {
        self.events
            .iter()
            .rev()
            .find(|e| e.kind() == REQUEST_HEADER)
    }

    /// Validates and commits one event. On error nothing changed.
    pub fn append(&mut self, new: NewEvent) -> Result<Arc<Event>, AppendError> {
        let seq = self.len();
        let reject = |reason: String| AppendError {
            seq,
            kind: new.kind.clone(),
            reason,
        };
        new.check_lossless().map_err(reject)?;
        let time = new.time.unwrap_or_else(now_ms);
        if let Some(s) = &new.source_event_seqs {
            crate::seqs::validate_logical(s, seq).map_err(reject)?;
        }
        if let Some(SurfaceOp::Replace { start_seq, end_seq }) = new.surface_op
            && (start_seq >= seq || end_seq >= seq)
        {
            return Err(reject("replace bounds must be earlier events".into()));
        }
        let ev = Arc::new(Event::from_parts(
            new.kind.as_str(),
            seq,
            time,
            new.data,
            new.surface_op,
            new.source_event_seqs,
            new.ignorable,
        ));
        let effect = self
            .admit(&ev, Mode::Append)
            .map_err(|reason| AppendError {
                seq,
                kind: ev.kind().to_string(),
                reason,
            })?;
        self.apply(Arc::clone(&ev), effect);
        Ok(ev)
    }

    /// Appends several events in order; stops at the first rejection (earlier ones stay).
    pub fn append_all(&mut self, batch: Vec<NewEvent>) -> Result<Vec<Arc<Event>>, AppendError> {
        batch.into_iter().map(|e| self.append(e)).collect()
    }

    fn admit(&self, ev: &Event, mode: Mode) -> Result<Effect, String> {
        let kind = ev.kind();
        let known = is_known(kind);
        let surface = is_surface(kind);
        if !known {
            if !ev.ignorable() {
                return Err(format!(
                    "unknown required event type \"{kind}\" (not marked ignorable)"
                ));
            }
            if mode == Mode::Append
                && (ev.surface_op().is_some() || ev.source_event_seqs().is_some())
            {
                return Err(
                    "plugin-owned events must not carry surfaceOp or sourceEventSeqs".into(),
                );
            }
            return Ok(Effect::None);
        }
        if surface && ev.surface_op().is_none() {
            return Err("surface events must carry surfaceOp".into());
        }
        if !surface && (ev.surface_op().is_some() || ev.source_event_seqs().is_some()) {
            return Err("only surface events may carry surfaceOp or sourceEventSeqs".into());
        }
        if kind == ASSISTANT_MESSAGE && ev.source_event_seqs().is_some() {
            return Err("assistant/message must not carry sourceEventSeqs".into());
        }
        if mode == Mode::Replay {
            crate::json::validate_lossless(ev.data(), "data").map_err(|e| e.to_string())?;
        }
        check_payload(kind, ev.data())?;
        self.check_relations(ev)?;

        if kind == IMAGE_OFFLOAD {
            return Ok(Effect::Offload(self.surface.check_offload(ev.data())?));
        }
        if kind == INBOX_SPLICED {
            return self.check_splice(ev.data());
        }
        if !surface {
            return Ok(Effect::None);
        }
        let slot = message_slot(kind, ev.data()).unwrap_or(&Value::Null);
        let message = Message::deserialize_value(slot)?;
        let node = Node {
            seq: ev.seq(),
            kind: static_kind(kind),
            message: Arc::new(message),
        };
        match ev.surface_op() {
            Some(SurfaceOp::Replace { start_seq, end_seq }) => {
                let plan = self.surface.check_replace(
                    kind,
                    start_seq,
                    end_seq,
                    ev.source_event_seqs(),
                    &self.events,
                    ev.data(),
                )?;
                Ok(Effect::Replace(plan, node))
            }
            _ => Ok(Effect::Append(node)),
        }
    }

    fn check_relations(&self, ev: &Event) -> Result<(), String> {
        let t = &self.tracker;
        let data = ev.data();
        let (turn, step) = turn_step(data);
        let in_step = || -> Result<(), String> {
            match (t.open_turn, t.open_step) {
                (Some(ot), Some(os)) if ot == turn && os == step => Ok(()),
                _ => Err(format!("turn {turn} step {step} is not the open step")),
            }
        };
        match ev.kind() {
            TURN_START => {
                if t.open_turn.is_some() {
                    return Err("a turn is already open".into());
                }
                if turn <= t.last_turn {
                    return Err(format!("turn {turn} does not follow turn {}", t.last_turn));
                }
            }
            TURN_END => {
                if t.open_turn != Some(turn) {
                    return Err(format!("turn {turn} is not the open turn"));
                }
                if t.open_step.is_some() {
                    return Err("turn/end while a step is open".into());
                }
            }
            STEP_START => {
                if t.open_turn != Some(turn) || t.open_step.is_some() {
                    return Err(format!(
                        "step/start {turn}/{step} outside an open turn or inside a step"
                    ));
                }
                if step <= t.last_step {
                    return Err(format!("step {step} does not follow step {}", t.last_step));
                }
            }
            STEP_END => {
                in_step()?;
                if let Some(p) = t.pending.first() {
                    return Err(format!(
                        "step/end leaves tool call \"{}\" unresolved",
                        p.call_id
                    ));
                }
            }
            SYSTEM_MESSAGE | DEVELOPER_MESSAGE | ASSISTANT_ATTEMPT | ASSISTANT_MESSAGE => {
                in_step()?;
                if ev.kind() == ASSISTANT_MESSAGE {
                    let mut seen = HashSet::new();
                    for call in calls_of(data) {
                        if t.advertised.contains(call.0) || !seen.insert(call.0) {
                            return Err(format!("tool call id \"{}\" is advertised twice", call.0));
                        }
                    }
                }
                if ev.kind() == DEVELOPER_MESSAGE
                    && let Some(h) = data.get("headerSeq").and_then(as_safe_u64)
                {
                    self.check_header_seq(h, data)?;
                }
            }
            TOOL_CALL => {
                in_step()?;
                let call_id = data.get("callId").and_then(Value::as_str).unwrap_or("");
                let p = t
                    .pending
                    .iter()
                    .find(|p| p.call_id == call_id)
                    .ok_or_else(|| {
                        format!("tool/call \"{call_id}\" names no advertised pending call")
                    })?;
                if p.call_seq.is_some() {
                    return Err(format!("tool/call \"{call_id}\" is logged twice"));
                }
                if data.get("name").and_then(Value::as_str) != Some(p.name.as_str())
                    || data.get("arguments").and_then(Value::as_str) != Some(p.arguments.as_str())
                {
                    return Err(format!(
                        "tool/call \"{call_id}\" must repeat the block's name and arguments"
                    ));
                }
            }
            TOOL_RESULT => {
                if let Some(SurfaceOp::Replace { .. }) = ev.surface_op() {
                    if t.open_turn.is_none() {
                        return Err("a tool/result replacement must be inside an open turn".into());
                    }
                } else {
                    in_step()?;
                    let call_id = data
                        .pointer("/message/toolCallId")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let p = t
                        .pending
                        .iter()
                        .find(|p| p.call_id == call_id)
                        .ok_or_else(|| {
                            format!("tool/result \"{call_id}\" settles no pending call")
                        })?;
                    if p.call_seq.is_none() && !is_not_started_repair(ev, call_id) {
                        return Err(format!(
                            "tool/result \"{call_id}\" precedes its tool/call (only the exact TOOL_NOT_STARTED repair may)"
                        ));
                    }
                }
            }
            REQUEST_HEADER | REQUEST_CONTEXT if t.open_turn.is_none() => {
                return Err(format!("{} outside an open turn", ev.kind()));
            }
            END_SEED if data.get("inherited").is_some() && !self.header.is_seeded => {
                return Err("an inherited session/end-seed needs header isSeeded: true".into());
            }
            "command/run"
            | "command/done"
            | "llm/retry"
            | "llm/retry-started"
            | "session/title"
            | "session/title-llm-request" => self.check_feature(ev)?,
            _ => {}
        }
        Ok(())
    }

    fn check_splice(&self, data: &Value) -> Result<Effect, String> {
        let next_step = data.get("target").and_then(Value::as_str) == Some("next-step");
        let list = if next_step {
            &self.inbox.next_step
        } else {
            &self.inbox.next_turn
        };
        let start = data.get("start").and_then(as_safe_u64).unwrap_or(0) as usize;
        let removed = data.get("removedCount").and_then(as_safe_u64).unwrap_or(0) as usize;
        if start > list.len() || start + removed > list.len() {
            return Err(format!(
                "inbox splice {start}+{removed} is outside its list of {}",
                list.len()
            ));
        }
        let mut inserted = Vec::new();
        for m in data
            .get("inserted")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            inserted.push(Arc::new(Message::deserialize_value(m)?));
        }
        let mut ids: HashSet<&str> = HashSet::new();
        let other = if next_step {
            &self.inbox.next_turn
        } else {
            &self.inbox.next_step
        };
        let kept = list[..start].iter().chain(&list[start + removed..]);
        for m in other.iter().chain(kept).chain(&inserted) {
            if !ids.insert(m.id.as_str()) {
                return Err(format!("inbox message id \"{}\" is queued twice", m.id));
            }
        }
        Ok(Effect::Splice {
            next_step,
            start,
            removed,
            inserted,
        })
    }

    fn check_feature(&self, ev: &Event) -> Result<(), String> {
        let data = ev.data();
        let f = &self.features;
        let str_of = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or("");
        match ev.kind() {
            "command/run" => {
                let id = str_of("commandId");
                if id.is_empty() || f.commands.contains_key(id) {
                    return Err(format!("command/run id \"{id}\" is empty or not unique"));
                }
            }
            "command/done" => {
                let id = str_of("commandId");
                match f.commands.get(id) {
                    None => return Err(format!("command/done \"{id}\" follows no command/run")),
                    Some(true) => return Err(format!("command/done \"{id}\" is logged twice")),
                    Some(false) => {}
                }
                if let Some(s) = data.get("sourceEventSeq") {
                    let cited = as_safe_u64(s)
                        .and_then(|s| self.events.get(s as usize))
                        .filter(|e| !e.kind().starts_with("command/"));
                    if cited.is_none() || str_of("kind") != "success" {
                        return Err("command/done sourceEventSeq must name an earlier non-command event, on success only".into());
                    }
                }
            }
            "llm/retry" => {
                let id = str_of("retryId");
                if id.is_empty() || f.retries.contains_key(id) {
                    return Err(format!("llm/retry id \"{id}\" is empty or not unique"));
                }
            }
            "llm/retry-started" => {
                let id = str_of("retryId");
                let (turn, step) = turn_step(data);
                let retry = data.get("retry").and_then(as_safe_u64);
                match f.retries.get(id) {
                    Some((t, s, r, false)) if *t == turn && *s == step && Some(*r) == retry => {}
                    Some((.., true)) => {
                        return Err(format!("llm/retry-started \"{id}\" is logged twice"));
                    }
                    _ => {
                        return Err(format!(
                            "llm/retry-started \"{id}\" matches no scheduled retry"
                        ));
                    }
                }
            }
            _ => {
                // session/title, session/title-llm-request: cite distinct earlier human prompts.
                let seqs = data
                    .get("messageSeqs")
                    .and_then(Value::as_array)
                    .ok_or("messageSeqs must be an array")?;
                if ev.kind() == "session/title-llm-request" && seqs.is_empty() {
                    return Err("session/title-llm-request must cite messages".into());
                }
                let mut seen = HashSet::new();
                for s in seqs {
                    let ok = as_safe_u64(s)
                        .filter(|s| seen.insert(*s))
                        .and_then(|s| self.events.get(s as usize))
                        .is_some_and(|e| {
                            e.kind() == USER_MESSAGE
                                && e.data().pointer("/source/kind").and_then(Value::as_str)
                                    == Some("user")
                        });
                    if !ok {
                        return Err(format!(
                            "{} messageSeqs must cite distinct earlier human user/message events",
                            ev.kind()
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_header_seq(&self, h: u64, data: &Value) -> Result<(), String> {
        let header = self
            .events
            .get(h as usize)
            .filter(|e| e.kind() == REQUEST_HEADER)
            .ok_or("developer/message headerSeq must reference an earlier request/header")?;
        let tools = header
            .data()
            .pointer("/header/tools")
            .and_then(Value::as_array);
        let content = data.pointer("/message/content").and_then(Value::as_array);
        for b in content.into_iter().flatten() {
            if b.get("type").and_then(Value::as_str) != Some("tool-addition") {
                continue;
            }
            let name = b.get("toolName").and_then(Value::as_str).unwrap_or("");
            let n = tools
                .into_iter()
                .flatten()
                .filter(|t| t.get("name").and_then(Value::as_str) == Some(name))
                .count();
            if n != 1 {
                return Err(format!(
                    "developer/message tool-addition \"{name}\" must name exactly one tool in headerSeq {h}"
                ));
            }
        }
        Ok(())
    }

    fn apply(&mut self, ev: Arc<Event>, effect: Effect) {
        let data = ev.data();
        let t = &mut self.tracker;
        match ev.kind() {
            TURN_START => {
                let (turn, _) = turn_step(data);
                t.open_turn = Some(turn);
                t.last_turn = turn;
                t.open_step = None;
                t.last_step = 0;
                t.pending.clear();
            }
            TURN_END => {
                t.open_turn = None;
                t.open_step = None;
                t.pending.clear();
            }
            STEP_START => {
                let (_, step) = turn_step(data);
                t.open_step = Some(step);
                t.last_step = step;
            }
            STEP_END => {
                t.pending.clear();
                t.open_step = None;
            }
            ASSISTANT_MESSAGE => {
                let (_, step) = turn_step(data);
                for (id, name, args) in calls_of(data) {
                    t.advertised.insert(id.to_string());
                    t.pending.push(PendingCall {
                        call_id: id.to_string(),
                        step,
                        call_seq: None,
                        name: name.to_string(),
                        arguments: args.to_string(),
                    });
                }
            }
            TOOL_CALL => {
                let id = data.get("callId").and_then(Value::as_str).unwrap_or("");
                if let Some(p) = t.pending.iter_mut().find(|p| p.call_id == id) {
                    p.call_seq = Some(ev.seq());
                }
            }
            TOOL_RESULT if ev.surface_op() == Some(SurfaceOp::Append) => {
                let id = data
                    .pointer("/message/source/callId")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                t.pending.retain(|p| p.call_id != id);
            }
            END_SEED if data.get("inherited").is_some() => {
                self.inherited_cut = Some(ev.seq());
            }
            "command/run" => {
                let id = data.get("commandId").and_then(Value::as_str).unwrap_or("");
                self.features.commands.insert(id.to_string(), false);
            }
            "command/done" => {
                let id = data.get("commandId").and_then(Value::as_str).unwrap_or("");
                self.features.commands.insert(id.to_string(), true);
            }
            "llm/retry" => {
                let id = data.get("retryId").and_then(Value::as_str).unwrap_or("");
                let (turn, step) = turn_step(data);
                let retry = data.get("retry").and_then(as_safe_u64).unwrap_or(0);
                self.features
                    .retries
                    .insert(id.to_string(), (turn, step, retry, false));
            }
            "llm/retry-started" => {
                let id = data.get("retryId").and_then(Value::as_str).unwrap_or("");
                if let Some(r) = self.features.retries.get_mut(id) {
                    r.3 = true;
                }
            }
            _ => {}
        }
        match effect {
            Effect::None => {}
            Effect::Splice {
                next_step,
                start,
                removed,
                inserted,
            } => {
                let list = if next_step {
                    &mut self.inbox.next_step
                } else {
                    &mut self.inbox.next_turn
                };
                list.splice(start..start + removed, inserted);
            }
            Effect::Append(node) => self.surface.push(node),
            Effect::Replace(plan, node) => self.surface.apply_replace(plan, node),
            Effect::Offload(p) => self.surface.apply_offload(p),
        }
        self.events.push(ev);
    }

    /// The closers of format §15 (cause `Interrupted`) or §12 (cause `Forked`) for the open
    /// turn: one error result per pending call, `step/end` if a step is open, then `turn/end`.
    /// Empty when no turn is open. Seqs continue the log; times equal the last event's time.
    pub fn closers(&self, cause: CloseCause) -> Vec<NewEvent> {
        let Some(turn) = self.tracker.open_turn else {
            return Vec::new();
        };
        let time = self
            .events
            .last()
            .map(|e| e.time())
            .unwrap_or(self.header.created_at);
        let mut out = Vec::new();
        for (seq, p) in (self.len()..).zip(self.tracker.pending.iter()) {
            let started = p.call_seq.is_some();
            let (prefix, text) = match (cause, started) {
                (CloseCause::Interrupted, false) => ("interrupted", texts::CRASH_NOT_STARTED),
                (CloseCause::Interrupted, true) => ("interrupted", texts::CRASH_UNKNOWN),
                (CloseCause::Forked, false) => ("forked", texts::FORK_NOT_STARTED),
                (CloseCause::Forked, true) => ("forked", texts::FORK_UNKNOWN),
            };
            let (name, code) = if started {
                ("ToolOutcomeUnknownError", "TOOL_OUTCOME_UNKNOWN")
            } else {
                ("ToolNotStartedError", "TOOL_NOT_STARTED")
            };
            let data = serde_json::json!({
                "turn": turn,
                "step": p.step,
                "message": {
                    "id": format!("{prefix}-tool-result-{}-{seq}", p.call_id),
                    "role": "tool",
                    "toolCallId": p.call_id,
                    "isError": true,
                    "source": {"kind": "tool", "callId": p.call_id},
                    "content": [{"type": "text", "text": text}],
                },
                "error": {"name": name, "code": code},
            });
            let mut ev = NewEvent::new(TOOL_RESULT, data).at(time);
            if let Some(c) = p.call_seq {
                ev = ev.with_sources(vec![c]);
            }
            out.push(ev);
        }
        if let Some(step) = self.tracker.open_step {
            out.push(
                NewEvent::new(STEP_END, serde_json::json!({"turn": turn, "step": step})).at(time),
            );
        }
        let kind = match cause {
            CloseCause::Interrupted => "interrupted",
            CloseCause::Forked => "forked",
        };
        out.push(
            NewEvent::new(
                TURN_END,
                serde_json::json!({"turn": turn, "reason": {"kind": kind}}),
            )
            .at(time),
        );
        out
    }

    /// Crash repair (format §15): appends the closers of an open last turn, exactly once.
    /// Returns the appended events (empty for a balanced log).
    pub fn repair(&mut self) -> Result<Vec<Arc<Event>>, AppendError> {
        let closers = self.closers(CloseCause::Interrupted);
        self.append_all(closers)
    }

    /// Builds a fork child (format §12) from events `0..=boundary` (`None` = an empty prefix):
    /// the copied events, `session/end-seed {"inherited":true}`, then the `forked` closers if
    /// the prefix ends inside an open turn. `header` is the child's header (set `is_seeded`).
    pub fn fork_seed(
        &self,
        boundary: Option<u64>,
        mut header: SessionHeader,
    ) -> Result<SessionLog, String> {
        let count = match boundary {
            Some(b) if b >= self.len() => {
                return Err(format!(
                    "fork boundary {b} is beyond the log (len {})",
                    self.len()
                ));
            }
            Some(b) => b as usize + 1,
            None => 0,
        };
        header.is_seeded = true;
        header
            .parent_session
            .get_or_insert_with(|| self.header.id.clone());
        let mut child = SessionLog::new(header);
        for ev in &self.events[..count] {
            let effect = child
                .admit(ev, Mode::Replay)
                .map_err(|e| format!("fork copy: {e}"))?;
            child.apply(Arc::clone(ev), effect);
        }
        let time = self.events[..count]
            .last()
            .map(|e| e.time())
            .unwrap_or(self.header.created_at);
        child
            .append(NewEvent::new(END_SEED, serde_json::json!({"inherited": true})).at(time))
            .map_err(|e| e.to_string())?;
        let closers = child.closers(CloseCause::Forked);
        child.append_all(closers).map_err(|e| e.to_string())?;
        Ok(child)
    }
}

fn calls_of(data: &Value) -> impl Iterator<Item = (&str, &str, &str)> {
    data.pointer("/message/content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool-call"))
        .map(|b| {
            let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("");
            (s("id"), s("name"), s("arguments"))
        })
}

fn is_not_started_repair(ev: &Event, call_id: &str) -> bool {
    if ev.source_event_seqs().is_some() {
        return false;
    }
    let d = ev.data();
    if d.pointer("/error/code").and_then(Value::as_str) != Some("TOOL_NOT_STARTED") {
        return false;
    }
    let id = d
        .pointer("/message/id")
        .and_then(Value::as_str)
        .unwrap_or("");
    let text = d.pointer("/message/content/0/text").and_then(Value::as_str);
    let suffix_ok = |rest: &str| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = id.strip_prefix(&format!("interrupted-tool-result-{call_id}-")) {
        return suffix_ok(rest) && text == Some(texts::CRASH_NOT_STARTED);
    }
    if let Some(rest) = id.strip_prefix(&format!("forked-tool-result-{call_id}-")) {
        return rest == ev.seq().to_string() && text == Some(texts::FORK_NOT_STARTED);
    }
    false
}

/// Deserializing a message from a JSON slot with a readable error.
trait FromSlot: Sized {
    fn deserialize_value(v: &Value) -> Result<Self, String>;
}
impl FromSlot for Message {
    fn deserialize_value(v: &Value) -> Result<Self, String> {
        serde::Deserialize::deserialize(v).map_err(|e| format!("message does not decode: {e}"))
    }
}
