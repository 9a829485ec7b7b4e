//! `dsh exec --server URL`: the same task, run by a `dsh serve` through the front-end protocol
//! (`dsh-protocol` over HTTP). Same output and exit status as a local `exec`: the final answer
//! on stdout, streamed text on stderr when it is a terminal, 0 when the turn completed, 1 when
//! it ended otherwise (the reason on stderr), 2 for usage errors, 130 after Ctrl-C (the turn is
//! interrupted on the server first).

use std::io::{IsTerminal, Write};

use anyhow::anyhow;
use dsh_protocol::{
    Client, ErrorCode, EventMsg, Op, OpenSession, ProtocolError, SessionOptions, SessionSettings,
    TurnEndReason,
};
use dsh_serve::RemoteClient;
use futures::StreamExt;

use crate::{ExecArgs, Failure};

fn failure(e: ProtocolError) -> Failure {
    match e.code {
        ErrorCode::InvalidRequest | ErrorCode::SessionNotFound | ErrorCode::Unauthorized => {
            Failure::usage(anyhow!("{e}"))
        }
        _ => Failure::run(anyhow!("{e}")),
    }
}

fn effort(e: crate::Effort) -> dsh_protocol::Effort {
    match e {
        crate::Effort::Off => dsh_protocol::Effort::Off,
        crate::Effort::Low => dsh_protocol::Effort::Low,
        crate::Effort::High => dsh_protocol::Effort::High,
        crate::Effort::Max => dsh_protocol::Effort::Max,
    }
}

fn describe(reason: &TurnEndReason) -> String {
    match reason {
        TurnEndReason::Error { error } => {
            format!("the turn failed: {}: {}", error.code, error.message)
        }
        TurnEndReason::Aborted => "the turn was aborted".to_owned(),
        TurnEndReason::MaxTokens => "the turn ended `max-tokens`".to_owned(),
        TurnEndReason::Blocked => "the turn ended `blocked`".to_owned(),
        TurnEndReason::Interrupted => "the turn ended `interrupted`".to_owned(),
        TurnEndReason::Forked => "the turn ended `forked`".to_owned(),
        TurnEndReason::Other { kind } => format!("the turn ended `{kind}`"),
        TurnEndReason::Completed => "the turn completed".to_owned(),
    }
}

/// Runs `dsh exec --server URL`.
pub(crate) async fn run(args: ExecArgs, server: String, prompt: String) -> Result<u8, Failure> {
    if args.json {
        return Err(Failure::usage(anyhow!(
            "--json prints the session log, which a server does not send; follow \
             GET /v1/sessions/ID/events for its events instead"
        )));
    }
    let token = std::env::var("DSH_SERVER_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    let client = RemoteClient::new(&server, token)
        .map_err(|e| Failure::usage(anyhow!("--server {server}: {e}")))?;
    let cwd = match &args.cwd {
        // The directory is the server's: passed as given, checked there.
        Some(d) => Some(d.display().to_string()),
        None => std::env::current_dir()
            .ok()
            .map(|d| d.display().to_string()),
    };
    let options = SessionOptions {
        cwd,
        settings: SessionSettings {
            model: args.model.clone(),
            effort: args.effort.map(effort),
            ..Default::default()
        },
    };
    let open = match (&args.resume, &args.session) {
        (Some(id), _) => OpenSession::Resume {
            session_id: id.clone(),
            options,
        },
        (None, id) => OpenSession::Create {
            session_id: id.clone(),
            options,
            prompt: None,
        },
    };
    let session = client.open(open).await.map_err(failure)?;
    let id = session.id.clone();
    let tty = std::io::stderr().is_terminal();
    if tty {
        eprintln!("session {id} on {server}");
    }
    let mut events = client
        .subscribe(&id, session.last_seq)
        .await
        .map_err(failure)?;
    client
        .send(
            &id,
            Op::Submit {
                text: prompt,
                attachments: Vec::new(),
            },
        )
        .await
        .map_err(failure)?;
    let mut text = String::new();
    let mut interrupted = false;
    let reason = loop {
        let ev = tokio::select! {
            ev = events.next() => ev,
            r = tokio::signal::ctrl_c(), if !interrupted => {
                if r.is_ok() {
                    interrupted = true;
                    client.send(&id, Op::Interrupt).await.map_err(failure)?;
                }
                continue;
            }
        };
        let Some(ev) = ev else {
            return Err(Failure::run(anyhow!(
                "the server closed session {id} before its turn ended"
            )));
        };
        match ev.msg {
            EventMsg::TextDelta { text: t } if tty => {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "{t}");
            }
            EventMsg::AssistantMessage { text: t, .. } if !t.is_empty() => text = t,
            EventMsg::Retrying {
                attempt,
                delay_ms,
                error,
                ..
            } => eprintln!(
                "\ndsh: the answer restarts: {} ({}); retry {attempt} in {delay_ms} ms",
                error.code, error.message
            ),
            EventMsg::Error(e) => eprintln!("dsh: {e}"),
            EventMsg::TurnEnded { reason, .. } => break reason,
            _ => {}
        }
    };
    if tty {
        eprintln!();
    }
    if !text.is_empty() {
        crate::config_cmd::write_stdout(&format!("{text}\n"))?;
    }
    if interrupted {
        eprintln!("dsh: interrupted; session {id} saved on the server");
        return Ok(130);
    }
    match reason {
        TurnEndReason::Completed => Ok(0),
        r => Err(Failure::run(anyhow!("{} (session {id})", describe(&r)))),
    }
}
