//! `dsh exec --json`: committed session events as JSON lines, printed only once they are on
//! disk as far as the operating system (a `write_through` of the session), so that whatever a
//! consumer saw survives a crash of dsh. One write-through per batch of events that arrived
//! while the previous batch was being written, so the cost stays a few syscalls per step.

use std::io::Write;
use std::sync::Arc;

use dsh_kernel::{Ctx, Registration};
use dsh_session::plugin::SessionEvent;
use dsh_session::{Event, Session};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The running printer; [`JsonPrinter::finish`] prints what is left and stops it.
pub(crate) struct JsonPrinter {
    registration: Registration,
    tx: mpsc::UnboundedSender<Msg>,
    task: JoinHandle<()>,
}

enum Msg {
    Event(Arc<Event>),
    /// The session is closed (so durable): print the rest without a barrier, then stop.
    Finish,
}

impl JsonPrinter {
    /// Starts printing the committed events of `session` from now on; with `from_start`
    /// (a new session) the events already logged (e.g. `sandbox/mode`, appended when the
    /// session started) come first.
    pub(crate) fn start(
        root: &Ctx,
        session: Arc<Session>,
        from_start: bool,
    ) -> anyhow::Result<Self> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
        let id: Arc<str> = Arc::from(session.id());
        let events = tx.clone();
        let registration = root.on::<SessionEvent>(move |e| {
            if e.session_id == id {
                // The receiver lives until `finish`; a send after it is moot.
                let _ = events.send(Msg::Event(e.event.clone()));
            }
            Ok(())
        })?;
        // After the listener is in place: an event appended in between arrives twice and is
        // printed once (by seq).
        let existing: Vec<Arc<Event>> = if from_start {
            session.events().to_vec()
        } else {
            Vec::new()
        };
        let mut next_seq = existing.first().map(|e| e.seq());
        for e in existing {
            let _ = tx.send(Msg::Event(e));
        }
        let task = tokio::spawn(async move {
            let mut batch: Vec<Arc<Event>> = Vec::new();
            let mut pending: std::collections::BTreeMap<u64, Arc<Event>> = Default::default();
            let mut stopped = false;
            while let Some(first) = rx.recv().await {
                let mut finish = false;
                for msg in std::iter::once(first).chain(std::iter::from_fn(|| rx.try_recv().ok())) {
                    match msg {
                        Msg::Event(e) => {
                            // Seqs are contiguous: print in seq order, each once.
                            let next = *next_seq.get_or_insert(e.seq());
                            if e.seq() >= next {
                                pending.insert(e.seq(), e);
                            }
                            while let Some(e) = next_seq.and_then(|n| pending.remove(&n)) {
                                next_seq = Some(e.seq() + 1);
                                batch.push(e);
                            }
                        }
                        Msg::Finish => finish = true,
                    }
                }
                // A session closed meanwhile was flushed by its close: no barrier needed (and
                // a write-through on it would fail).
                if !finish
                    && !stopped
                    && let Err(e) = session.write_through().await
                    && !session.is_closed()
                {
                    // Events that are not on disk are not printed: a consumer never sees an
                    // event that a crash could lose.
                    tracing::error!(error = %e, "session storage failed; --json output stops");
                    stopped = true;
                }
                if !stopped && print(&batch).is_err() {
                    // stdout closed (e.g. `| head`): nothing more to print.
                    stopped = true;
                }
                batch.clear();
                if finish {
                    break;
                }
            }
        });
        Ok(JsonPrinter {
            registration,
            tx,
            task,
        })
    }

    /// Prints every event committed so far and stops. Call after the session is closed (its
    /// close flushed everything), so no barrier is needed for the last events.
    pub(crate) async fn finish(self) {
        self.registration.dispose();
        let _ = self.tx.send(Msg::Finish);
        let _ = self.task.await;
    }
}

fn print(batch: &[Arc<Event>]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    for e in batch {
        out.write_all(e.to_json_line().as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
