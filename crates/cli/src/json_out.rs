//! `dsh exec --json`: the session's committed log records as JSON lines, byte for byte, read
//! through the front-end protocol's raw log stream ([`dsh_protocol::Client::log`]). The host
//! yields a record only once it is written through to the operating system, so whatever a
//! consumer saw survives a crash of dsh; the stream ends when the session is closed, after the
//! records its close committed.

use std::io::Write;

use dsh_protocol::LogStream;
use futures::StreamExt;
use tokio::task::JoinHandle;

/// The running printer; [`JsonPrinter::finish`] waits for the rest once the session is closed.
pub(crate) struct JsonPrinter {
    task: JoinHandle<()>,
}

impl JsonPrinter {
    /// Prints every record of `log` on stdout, one line each.
    pub(crate) fn start(log: LogStream) -> Self {
        JsonPrinter {
            task: tokio::spawn(print(log)),
        }
    }

    /// Waits for the last records. Call after the session is closed (the stream ends then).
    pub(crate) async fn finish(self) {
        let _ = self.task.await;
    }
}

async fn print(mut log: LogStream) {
    while let Some(item) = log.next().await {
        match item {
            Ok(record) => {
                let mut out = std::io::stdout().lock();
                let written = out
                    .write_all(record.line.as_bytes())
                    .and_then(|()| out.write_all(b"\n"))
                    .and_then(|()| out.flush());
                if written.is_err() {
                    // stdout closed (e.g. `| head`): nothing more to print.
                    return;
                }
            }
            Err(e) => {
                // Records that are not on disk are not printed: a consumer never sees one that
                // a crash could lose.
                tracing::error!(error = %e, "session storage failed; --json output stops");
                return;
            }
        }
    }
}
