//! A read-only follow of one session as text: its transcript so far, then what happens, until
//! Ctrl-C or the session closes (`dsh attach` without the TUI).

use std::io::Write;

use anyhow::anyhow;
use dsh_protocol::{Client, Event, EventMsg, MessageSource, SessionSummary, TurnEndReason};
use dsh_serve::RemoteClient;
use futures::StreamExt;

use crate::Failure;

/// What the printer remembers between events.
#[derive(Default)]
struct Printer {
    /// Live text was printed since the last committed message (a committed answer is then not
    /// printed again).
    streamed: bool,
    /// The snapshot has been seen: events from now on are live.
    live: bool,
}

impl Printer {
    fn line(&mut self, out: &mut impl Write, text: &str) -> std::io::Result<()> {
        if self.streamed {
            writeln!(out)?;
            self.streamed = false;
        }
        writeln!(out, "{text}")
    }

    fn event(&mut self, out: &mut impl Write, ev: Event) -> std::io::Result<()> {
        match ev.msg {
            EventMsg::UserMessage {
                text,
                source: MessageSource::User | MessageSource::Command,
                ..
            } => self.line(out, &format!("> {text}"))?,
            EventMsg::UserMessage {
                source: MessageSource::Agent,
                ..
            } => self.line(out, "(a sub-agent or job reported)")?,
            EventMsg::TextDelta { text } if self.live => {
                write!(out, "{text}")?;
                out.flush()?;
                self.streamed = true;
            }
            EventMsg::AssistantMessage { text, .. } => {
                if self.streamed {
                    writeln!(out)?;
                    self.streamed = false;
                } else if !text.is_empty() {
                    writeln!(out, "{text}")?;
                }
            }
            EventMsg::ToolCallBegan { display, .. } => {
                let subject = display.subject.map(|s| format!(" {s}")).unwrap_or_default();
                self.line(out, &format!("[{}]{subject}", display.title))?;
            }
            EventMsg::ToolCallEnded {
                display,
                is_error: true,
                ..
            } => self.line(out, &format!("[{}] failed", display.title))?,
            EventMsg::ApprovalRequested(a) => self.line(
                out,
                &format!(
                    "waiting for approval: [{}] {} ({})",
                    a.display.title,
                    a.display.subject.unwrap_or_default(),
                    a.reason
                ),
            )?,
            EventMsg::ApprovalResolved { outcome, .. } => {
                self.line(out, &format!("approval: {outcome:?}"))?;
            }
            EventMsg::TurnEnded { turn, reason, .. } => {
                let why = match reason {
                    TurnEndReason::Completed => "completed".to_owned(),
                    TurnEndReason::Error { error } => format!("failed: {}", error.message),
                    other => format!("{other:?}").to_lowercase(),
                };
                self.line(out, &format!("-- turn {turn} {why}"))?;
            }
            EventMsg::Snapshot(s) => {
                self.live = true;
                for a in &s.pending_approvals {
                    self.line(
                        out,
                        &format!(
                            "waiting for approval: [{}] {}",
                            a.display.title,
                            a.display.subject.clone().unwrap_or_default()
                        ),
                    )?;
                }
                if let Some(l) = s.live.filter(|l| !l.text.is_empty()) {
                    write!(out, "{}", l.text)?;
                    self.streamed = true;
                }
                out.flush()?;
            }
            EventMsg::Error(e) => self.line(out, &format!("dsh: {e}"))?,
            _ => {}
        }
        Ok(())
    }
}

/// Prints `session`'s events from its start and follows it until Ctrl-C or its end.
pub(crate) async fn follow(client: &RemoteClient, session: &SessionSummary) -> Result<u8, Failure> {
    let mut events = client
        .subscribe(&session.id, None)
        .await
        .map_err(|e| Failure::run(anyhow!("{e}")))?;
    eprintln!(
        "following session {} (read-only; Ctrl-C stops following, the session keeps running)",
        session.id
    );
    let mut printer = Printer::default();
    loop {
        let ev = tokio::select! {
            ev = events.next() => ev,
            _ = tokio::signal::ctrl_c() => break,
        };
        let Some(ev) = ev else {
            eprintln!("\nthe session was closed");
            break;
        };
        let mut out = std::io::stdout().lock();
        if let Err(e) = printer.event(&mut out, ev) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(0);
            }
            return Err(Failure::run(anyhow!("cannot write: {e}")));
        }
    }
    Ok(0)
}
