//! [`SessionLog`]: the in-memory log of one session. Admission (format §4, [`admit`]), the
//! incremental surface fold (§8), the turn/step/tool-call [`TurnTracker`] that crash repair
//! (§15, [`repair`]) reads, the inbox projection (§11, [`Inbox`]) and fork seeds (§12, [`fork`]).
//!
//! Every rule runs on the typed payloads decoded once per event ([`crate::Event::core`]).

mod admit;
mod features;
mod fork;
mod inbox;
mod repair;
mod tracker;

use std::sync::Arc;

use dsh_llm::Message;

use crate::error::{AppendError, LogError, Rejection};
use crate::event::{Event, NewEvent, SurfaceOp};
use crate::header::SessionHeader;
use crate::surface::{Node, ReplacePlan, Surface};
use crate::vocab::EventKind;

pub use inbox::Inbox;
pub use repair::{CloseCause, texts};
pub use tracker::{PendingCall, TurnTracker};

use features::FeatureState;

/// A value of a closed set that this reader does not know, admitted from a stored log (written
/// by another harness or a newer one), kept verbatim in the event and reported here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownValue {
    /// The event's seq.
    pub seq: u64,
    /// The field (`turn/end reason.kind`, `request/header reason`, …).
    pub field: &'static str,
    /// The unknown value.
    pub value: String,
}

impl UnknownValue {
    /// The `field` of an event whose type this reader does not know, admitted because it is
    /// log-only (no `surfaceOp`, no `sourceEventSeqs`): its `value` is the type name.
    pub const EVENT_TYPE: &'static str = "type";

    /// The distinct unknown event types among `values`, in first-seen order (for one warning
    /// naming them).
    pub fn event_types(values: &[UnknownValue]) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for v in values.iter().filter(|v| v.field == Self::EVENT_TYPE) {
            if !out.contains(&v.value.as_str()) {
                out.push(&v.value);
            }
        }
        out
    }
}

/// What admission decided to do with an event (applied only after every check passed).
enum Effect {
    None,
    Splice {
        target: crate::wire::Target,
        start: usize,
        removed: usize,
        inserted: Vec<Arc<Message>>,
    },
    Append(Node),
    Replace(ReplacePlan, Node),
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
    last_turn_end: Option<u64>,
    last_request_header: Option<u64>,
    last_request_context: Option<u64>,
    unknown: Vec<UnknownValue>,
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
            last_turn_end: None,
            last_request_header: None,
            last_request_context: None,
            unknown: Vec::new(),
        }
    }

    /// Admits stored rows in order (format §4.1 step 4–5). Any failure refuses the whole log.
    /// Rows built by [`Event::from_line`] were decoded and checked there (in parallel by the
    /// reader); replay runs only the rules that depend on the earlier events.
    pub fn replay(header: SessionHeader, events: Vec<Event>) -> Result<Self, LogError> {
        let mut log = SessionLog::new(header);
        log.events.reserve(events.len());
        for ev in events {
            let ev = Arc::new(ev);
            let effect = log
                .admit(&ev, Mode::Replay)
                .map_err(|reason| LogError::Rejected {
                    error: AppendError {
                        seq: ev.seq(),
                        kind: ev.kind().to_owned(),
                        reason,
                    },
                    path: None,
                })?;
            log.apply(ev, effect);
        }
        if log.header.is_seeded != log.inherited_cut.is_some() {
            return Err(LogError::Rejected {
                error: AppendError {
                    seq: log.len(),
                    kind: "session".into(),
                    reason: Rejection::Relation(format!(
                        "session log header isSeeded is {} but the log {} an inherited session/end-seed marker",
                        log.header.is_seeded,
                        if log.inherited_cut.is_some() {
                            "has"
                        } else {
                            "has no"
                        }
                    )),
                },
                path: None,
            });
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
    /// Committed events with `seq >= from` (borrowed).
    pub fn events_since(&self, from: u64) -> &[Arc<Event>] {
        let from = usize::try_from(from)
            .unwrap_or(usize::MAX)
            .min(self.events.len());
        &self.events[from..]
    }
    /// The event of a seq.
    pub fn event(&self, seq: u64) -> Option<&Arc<Event>> {
        usize::try_from(seq).ok().and_then(|i| self.events.get(i))
    }
    /// The last committed event.
    pub fn last(&self) -> Option<&Arc<Event>> {
        self.events.last()
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
    /// Closed-set values this reader did not know, admitted from stored rows (see
    /// [`UnknownValue`]). A live append never adds one (it is refused).
    pub fn unknown_values(&self) -> &[UnknownValue] {
        &self.unknown
    }
    /// The model history (format §8.3), incrementally maintained.
    pub fn derive_messages(&self) -> Vec<Arc<Message>> {
        self.surface.derive_messages()
    }
    /// Seq of the latest `turn/end`, if any.
    pub fn last_turn_end(&self) -> Option<u64> {
        self.last_turn_end
    }
    /// The latest `request/header`, if any (O(1)).
    pub fn latest_request_header(&self) -> Option<&Arc<Event>> {
        self.last_request_header.and_then(|s| self.event(s))
    }
    /// The latest `request/context`, if any (O(1)).
    pub fn latest_request_context(&self) -> Option<&Arc<Event>> {
        self.last_request_context.and_then(|s| self.event(s))
    }

    /// Validates and commits one event. On error nothing changed.
    pub fn append(&mut self, new: NewEvent) -> Result<Arc<Event>, AppendError> {
        let seq = self.len();
        let kind = new.kind.clone();
        let reject = |reason: Rejection| AppendError {
            seq,
            kind: kind.to_string(),
            reason,
        };
        new.check_time().map_err(reject)?;
        let time = new.time.unwrap_or_else(now_ms);
        if let Some(s) = &new.source_event_seqs {
            crate::seqs::validate_logical(s, seq)
                .map_err(|e| reject(Rejection::Metadata(e.to_string())))?;
        }
        if let Some(SurfaceOp::Replace { start_seq, end_seq }) = new.surface_op
            && (start_seq >= seq || end_seq >= seq)
        {
            return Err(reject(Rejection::Metadata(format!(
                "replace bounds {start_seq}..{end_seq} must be earlier events than {seq}"
            ))));
        }
        let (surface_op, sources, ignorable) =
            (new.surface_op, new.source_event_seqs.clone(), new.ignorable);
        let (data, typed) = new.into_payload().map_err(reject)?;
        let ev = Arc::new(Event::build_appended(
            kind.clone(),
            seq,
            time,
            data,
            typed,
            surface_op,
            sources,
            ignorable,
        ));
        let effect = self.admit(&ev, Mode::Append).map_err(reject)?;
        self.apply(Arc::clone(&ev), effect);
        Ok(ev)
    }

    /// Appends several events in order; stops at the first rejection (earlier ones stay).
    pub fn append_all(&mut self, batch: Vec<NewEvent>) -> Result<Vec<Arc<Event>>, AppendError> {
        batch.into_iter().map(|e| self.append(e)).collect()
    }

    fn apply(&mut self, ev: Arc<Event>, effect: Effect) {
        self.tracker.apply(&ev);
        self.features.apply(&ev);
        match ev.event_kind() {
            EventKind::TurnEnd => self.last_turn_end = Some(ev.seq()),
            EventKind::RequestHeader => self.last_request_header = Some(ev.seq()),
            EventKind::RequestContext => self.last_request_context = Some(ev.seq()),
            EventKind::EndSeed => {
                if let Some(crate::data::CoreEvent::EndSeed(s)) = ev.core()
                    && s.inherited.is_some()
                {
                    self.inherited_cut = Some(ev.seq());
                }
            }
            _ => {}
        }
        match effect {
            Effect::None => {}
            Effect::Splice {
                target,
                start,
                removed,
                inserted,
            } => self.inbox.apply_splice(target, start, removed, inserted),
            Effect::Append(node) => self.surface.push(node),
            Effect::Replace(plan, node) => self.surface.apply_replace(plan, node),
            Effect::Offload(p) => self.surface.apply_offload(p),
        }
        self.events.push(ev);
    }
}
