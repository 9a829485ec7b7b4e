//! Admission of one event (format §4.3–§4.7): metadata placement, the payload rules decided when
//! the event was built, then the rules that depend on earlier events.

use std::sync::Arc;

use crate::data::{CoreEvent, TurnEndReason};
use crate::error::Rejection;
use crate::event::{Event, SurfaceOp};
use crate::surface::{Node, static_kind};
use crate::vocab::EventKind;

use super::{Effect, Mode, SessionLog, UnknownValue};

impl SessionLog {
    pub(super) fn admit(&mut self, ev: &Event, mode: Mode) -> Result<Effect, Rejection> {
        let kind = ev.event_kind();
        if !kind.is_known() {
            if !ev.ignorable() {
                // A newer writer's log-only type (no surface operation, no provenance) cannot
                // change what the model sees: a stored one is admitted, kept verbatim and
                // reported. One that could (or a live append of one) is refused.
                let model_visible = ev.surface_op().is_some() || ev.source_event_seqs().is_some();
                if mode == Mode::Append || model_visible || !well_formed_type(kind.as_str()) {
                    return Err(Rejection::UnknownRequiredType(kind.to_string()));
                }
                self.unknown.push(UnknownValue {
                    seq: ev.seq(),
                    field: UnknownValue::EVENT_TYPE,
                    value: kind.to_string(),
                });
                return Ok(Effect::None);
            }
            if mode == Mode::Append {
                if ev.surface_op().is_some() || ev.source_event_seqs().is_some() {
                    return Err(Rejection::Metadata(
                        "plugin-owned events must not carry surfaceOp or sourceEventSeqs".into(),
                    ));
                }
                if let Some(r) = ev.payload_rejection() {
                    return Err(r.clone());
                }
            }
            return Ok(Effect::None);
        }
        let surface = kind.is_surface();
        if surface && ev.surface_op().is_none() {
            return Err(Rejection::Metadata(format!(
                "{kind} is a surface event and must carry surfaceOp"
            )));
        }
        if !surface && (ev.surface_op().is_some() || ev.source_event_seqs().is_some()) {
            return Err(Rejection::Metadata(format!(
                "{kind}: only surface events may carry surfaceOp or sourceEventSeqs"
            )));
        }
        if *kind == EventKind::AssistantMessage && ev.source_event_seqs().is_some() {
            return Err(Rejection::Metadata(
                "assistant/message must not carry sourceEventSeqs".into(),
            ));
        }
        if let Some(r) = ev.payload_rejection() {
            return Err(r.clone());
        }
        let Some(core) = ev.core() else {
            // A known feature or opaque type.
            self.check_feature(ev)?;
            return Ok(Effect::None);
        };
        self.check_unknown_values(ev.seq(), core, mode)?;
        self.check_structure(ev, core)?;
        match core {
            CoreEvent::ImageOffload(o) => Ok(Effect::Offload(self.surface.check_offload(o)?)),
            CoreEvent::InboxSpliced(s) => self.inbox.check_splice(s),
            CoreEvent::DeveloperMessage(d) => {
                if let Some(h) = d.header_seq {
                    self.check_header_seq(h, d)?;
                }
                Ok(self.surface_effect(ev, core)?)
            }
            _ if surface => self.surface_effect(ev, core),
            _ => Ok(Effect::None),
        }
    }

    fn surface_effect(&self, ev: &Event, core: &CoreEvent) -> Result<Effect, Rejection> {
        let Some(message) = core.message() else {
            return Err(Rejection::Payload(format!(
                "{} has no message",
                ev.event_kind()
            )));
        };
        let node = Node {
            seq: ev.seq(),
            kind: static_kind(ev.event_kind()),
            message: Arc::clone(message),
        };
        match ev.surface_op() {
            Some(SurfaceOp::Replace { start_seq, end_seq }) => {
                let plan = self.surface.check_replace(
                    core,
                    start_seq,
                    end_seq,
                    ev.source_event_seqs(),
                    &self.events,
                )?;
                Ok(Effect::Replace(plan, node))
            }
            _ => Ok(Effect::Append(node)),
        }
    }

    /// Unknown closed-set values: refused on a live append (dsh never writes them), kept and
    /// reported when replaying another writer's log.
    fn check_unknown_values(
        &mut self,
        seq: u64,
        core: &CoreEvent,
        mode: Mode,
    ) -> Result<(), Rejection> {
        let (field, value) = match core {
            CoreEvent::TurnEnd(e) if !e.reason.is_known() => {
                let value = match &e.reason {
                    TurnEndReason::Aborted { reason } => format!("aborted/{}", reason.kind()),
                    other => other.kind().to_owned(),
                };
                ("turn/end reason.kind", value)
            }
            CoreEvent::RequestHeader(h) if !h.reason.is_known() => {
                ("request/header reason", h.reason.as_str().to_owned())
            }
            CoreEvent::InboxSpliced(s) if s.outcome.as_ref().is_some_and(|o| !o.is_known()) => (
                "agent/inbox/spliced outcome",
                s.outcome
                    .as_ref()
                    .map(|o| o.as_str().to_owned())
                    .unwrap_or_default(),
            ),
            _ => return Ok(()),
        };
        if mode == Mode::Append {
            return Err(Rejection::Payload(format!(
                "{field} \"{value}\" is not known"
            )));
        }
        tracing::warn!(seq, field, value = %value, "session log holds an unknown value (kept)");
        self.unknown.push(UnknownValue { seq, field, value });
        Ok(())
    }

    fn check_header_seq(
        &self,
        h: u64,
        dev: &crate::data::DeveloperMessage,
    ) -> Result<(), Rejection> {
        let header = match self.event(h).and_then(|e| e.core()) {
            Some(CoreEvent::RequestHeader(r)) => r,
            _ => {
                return Err(Rejection::Relation(format!(
                    "developer/message headerSeq {h} must reference an earlier request/header"
                )));
            }
        };
        let tools = header.header.tools.as_deref().unwrap_or(&[]);
        for b in &dev.message.content {
            let dsh_llm::ContentBlock::ToolAddition { tool_name } = b else {
                continue;
            };
            let n = tools.iter().filter(|t| &t.name == tool_name).count();
            if n != 1 {
                return Err(Rejection::Relation(format!(
                    "developer/message tool-addition \"{tool_name}\" must name exactly one tool in headerSeq {h}"
                )));
            }
        }
        Ok(())
    }
}

/// Whether `name` is spelled like an event type (`seg/seg…`, optionally `plugin:`-prefixed,
/// segments `[a-z0-9][a-z0-9._-]*`): a mangled name is damage, never a newer writer's type.
fn well_formed_type(name: &str) -> bool {
    let body = name.strip_prefix("plugin:").unwrap_or(name);
    let mut segments = 0;
    for seg in body.split('/') {
        let mut chars = seg.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if !first_ok
            || !chars.all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
            })
        {
            return false;
        }
        segments += 1;
    }
    segments >= 2
}

#[cfg(test)]
mod tests {
    #[test]
    fn type_names_are_checked_for_shape() {
        for ok in ["job/registered", "acme/x", "plugin:a/b.c", "a-b/c_d/e"] {
            assert!(super::well_formed_type(ok), "{ok}");
        }
        for bad in ["}ession/end-seed", "single", "Upper/x", "a//b", "/x", "a/"] {
            assert!(!super::well_formed_type(bad), "{bad}");
        }
    }
}
