//! Fork seeds (format §12): a child log from a prefix of this one.

use std::sync::Arc;

use crate::data::EndSeed;
use crate::error::{AppendError, ForkError};
use crate::event::NewEvent;
use crate::header::SessionHeader;

use super::{CloseCause, Mode, SessionLog};

impl SessionLog {
    /// Builds a fork child (format §12) from events `0..=boundary` (`None` = an empty prefix):
    /// the copied events, `session/end-seed {"inherited":true}`, then the `forked` closers if
    /// the prefix ends inside an open turn. `header` is the child's header (set `is_seeded`).
    /// The copied events are shared with this log, not copied.
    pub fn fork_seed(
        &self,
        boundary: Option<u64>,
        mut header: SessionHeader,
    ) -> Result<SessionLog, ForkError> {
        let count = match boundary {
            Some(b) if b >= self.len() => {
                return Err(ForkError::BeyondLog {
                    boundary: b,
                    len: self.len(),
                });
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
            let effect = child.admit(ev, Mode::Replay).map_err(|reason| {
                ForkError::Seed(AppendError {
                    seq: ev.seq(),
                    kind: ev.kind().to_owned(),
                    reason,
                })
            })?;
            child.apply(Arc::clone(ev), effect);
        }
        let time = self.events[..count]
            .last()
            .map(|e| e.time())
            .unwrap_or(self.header.created_at);
        child
            .append(
                NewEvent::core(EndSeed {
                    inherited: Some(true),
                })
                .at(time),
            )
            .map_err(ForkError::Seed)?;
        let closers = child.closers(CloseCause::Forked);
        child.append_all(closers).map_err(ForkError::Seed)?;
        Ok(child)
    }
}
