//! The one writer of stdout: every frame (responses, `session.event`, `session.status`) goes
//! through one ordered queue, in the order the server queues them (a status only after the log
//! records before it: see `streams`).
//!
//! Memory stays bounded when the client stops reading: responses hold a permit of a bounded
//! semaphore (the reader stops reading requests when they run out), and events are queued as
//! the `Arc`'d lines the log stream yields.

use std::sync::Arc;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot, watch};

use crate::frame;
use crate::protocol::WireStatus;

/// One queued frame.
pub(crate) enum Out {
    /// A response, holding its permit until written.
    Line {
        /// The frame.
        text: String,
        /// Released when the frame leaves the queue.
        _permit: Option<OwnedSemaphorePermit>,
    },
    /// `session.event`: the session id and the record's exact log line.
    Event(Arc<str>, Arc<str>),
    /// `session.status`.
    Status(Arc<str>, WireStatus),
    /// Resolves once everything queued before it is written and flushed.
    Flush(oneshot::Sender<()>),
}

fn render(out: &Out) -> Option<String> {
    match out {
        Out::Line { text, .. } => Some(text.clone()),
        Out::Event(session, event) => {
            let params = format!(
                r#"{{"sessionId":{},"event":{}}}"#,
                serde_json::Value::String(session.to_string()),
                event
            );
            Some(frame::notification_raw("session.event", &params))
        }
        Out::Status(session, status) => {
            let params = serde_json::json!({"sessionId": &**session, "status": status});
            Some(frame::notification_raw(
                "session.status",
                &params.to_string(),
            ))
        }
        Out::Flush(_) => None,
    }
}

/// Writes the queue to `w` until every sender is gone. On a write error (the client closed its
/// end) it sets `closed` and discards the rest.
pub(crate) async fn write_loop<W: AsyncWrite + Unpin>(
    w: W,
    mut rx: mpsc::UnboundedReceiver<Out>,
    closed: watch::Sender<bool>,
) {
    let mut w = tokio::io::BufWriter::with_capacity(64 * 1024, w);
    let mut broken = false;
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item {
                Out::Flush(done) => {
                    if !broken && w.flush().await.is_err() {
                        broken = true;
                        let _ = closed.send(true);
                    }
                    let _ = done.send(());
                }
                item => {
                    if !broken && let Some(mut line) = render(&item) {
                        line.push('\n');
                        if w.write_all(line.as_bytes()).await.is_err() {
                            broken = true;
                            let _ = closed.send(true);
                        }
                    }
                    // The permit (if any) is released here: the frame left the queue.
                    drop(item);
                }
            }
            next = rx.try_recv().ok();
        }
        if !broken && w.flush().await.is_err() {
            broken = true;
            let _ = closed.send(true);
        }
    }
    if !broken {
        let _ = w.flush().await;
    }
}
