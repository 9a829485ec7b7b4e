//! Background sessions on one machine (issue 34, item 5): `dsh exec --bg`, `dsh ps`,
//! `dsh stop`, `dsh attach`, over the per-user server of [`server`] (a `dsh serve` on a unix
//! socket under `$DSH_HOME/run`, started on demand, gone when idle).

pub(crate) mod follow;
pub(crate) mod ps;
pub(crate) mod server;

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use dsh_protocol::{
    ApprovalDecision, Client, ErrorCode, EventMsg, Op, OpenSession, ProtocolError, SessionOptions,
    SessionQuery, SessionSettings, SessionState, SessionSummary,
};
use dsh_serve::RemoteClient;
use futures::StreamExt;

use crate::{ExecArgs, Failure};

/// How long `dsh stop` waits for an interrupted turn to end.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// `dsh ps`.
#[derive(Debug, Args)]
pub(crate) struct PsArgs {
    /// Print `{running, socket, sessions: [...]}` as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Idle open sessions too (finished tasks), not only working and waiting ones.
    #[arg(long, short = 'a')]
    pub(crate) all: bool,
}

/// `dsh stop`.
#[derive(Debug, Args)]
pub(crate) struct StopArgs {
    /// The session (its id or a unique prefix of it).
    #[arg(
        value_name = "ID",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    pub(crate) id: Option<String>,
    /// Every working or waiting session of the background server.
    #[arg(long)]
    pub(crate) all: bool,
}

/// `dsh attach`.
#[derive(Debug, Args)]
pub(crate) struct AttachArgs {
    /// The session (its id or a unique prefix of it).
    #[arg(value_name = "ID")]
    pub(crate) id: String,
    /// Print the session's events as text and follow them, read-only, instead of opening the
    /// terminal UI (the default when stdin or stdout is not a terminal).
    #[arg(long)]
    pub(crate) follow: bool,
}

fn protocol(e: ProtocolError) -> Failure {
    crate::exec_remote::failure(e)
}

/// Opens the session of `dsh exec --bg` and submits its task; the session's id.
async fn submit(
    client: &RemoteClient,
    args: &ExecArgs,
    settings: &SessionSettings,
    prompt: &str,
) -> Result<String, ProtocolError> {
    let cwd = args.cwd.as_ref().map(|d| d.display().to_string());
    let options = SessionOptions {
        cwd,
        settings: settings.clone(),
    };
    match &args.resume {
        Some(id) => {
            let s = client
                .open(OpenSession::Resume {
                    session_id: id.clone(),
                    options,
                })
                .await?;
            client
                .send(
                    &s.id,
                    Op::Submit {
                        text: prompt.to_owned(),
                        attachments: Vec::new(),
                    },
                )
                .await?;
            Ok(s.id)
        }
        None => {
            let s = client
                .open(OpenSession::Create {
                    session_id: args.session.clone(),
                    options,
                    prompt: Some(prompt.to_owned()),
                })
                .await?;
            Ok(s.id)
        }
    }
}

/// `dsh exec --bg`: the task runs in the background server (started if none answers); its
/// session id is printed at once.
pub(crate) async fn exec(mut args: ExecArgs, prompt: String) -> Result<u8, Failure> {
    // The directory is checked here and sent absolute: the server runs elsewhere.
    args.cwd = Some(crate::exec::working_dir(args.cwd.as_ref())?);
    let settings = crate::exec_remote::remote_settings(&args, Some(args.provider.clone()), "--bg")?;
    let (client, started) = server::ensure().await?;
    let id = match submit(&client, &args, &settings, &prompt).await {
        Ok(id) => id,
        // A server that was stopping as this one connected: start one and try again.
        Err(e) if e.code == ErrorCode::Transport => {
            let (client, _) = server::ensure().await?;
            submit(&client, &args, &settings, &prompt)
                .await
                .map_err(protocol)?
        }
        Err(e) => return Err(protocol(e)),
    };
    crate::config_cmd::write_stdout(&format!("{id}\n"))?;
    if std::io::stderr().is_terminal() {
        let how = if started {
            " (background server started)"
        } else {
            ""
        };
        eprintln!(
            "running in the background{how}: `dsh ps` lists it, `dsh attach {id}` opens it, \
             `dsh stop {id}` interrupts it"
        );
    }
    Ok(0)
}

/// The open session `id` names (exactly or as a unique prefix).
pub(crate) async fn resolve(client: &RemoteClient, id: &str) -> Result<SessionSummary, Failure> {
    let list = client
        .sessions(SessionQuery::default())
        .await
        .map_err(|e| Failure::run(anyhow!("the background server: {e}")))?;
    if let Some(s) = list.iter().find(|s| s.id == id) {
        if s.state == SessionState::Ended {
            return Err(Failure::usage(anyhow!(
                "session `{id}` is not open in the background server (it is stored: \
                 `dsh exec --bg --resume {id} \"…\"` continues it)"
            )));
        }
        return Ok(s.clone());
    }
    let matches: Vec<&SessionSummary> = list
        .iter()
        .filter(|s| s.state != SessionState::Ended && s.id.starts_with(id))
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(Failure::usage(anyhow!(
            "no open session `{id}` in the background server (`dsh ps --all` lists them)"
        ))),
        many => Err(Failure::usage(anyhow!(
            "`{id}` names {} open sessions: {}",
            many.len(),
            many.iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Interrupts `session`'s turn and waits (capped) until it has ended. An approval the turn
/// waits for is denied as well: the host's interrupt does not end that wait.
async fn interrupt(client: &RemoteClient, session: &SessionSummary) -> Result<bool, Failure> {
    let id = &session.id;
    let mut events = client
        .subscribe(id, session.last_seq)
        .await
        .map_err(protocol)?;
    let mut pending = Vec::new();
    let snapshot = async {
        while let Some(ev) = events.next().await {
            if let EventMsg::Snapshot(s) = ev.msg {
                return Some(s);
            }
        }
        None
    };
    match tokio::time::timeout(STOP_WAIT, snapshot).await {
        Ok(Some(s)) if s.session.state == SessionState::Idle => return Ok(true),
        Ok(Some(s)) => pending.extend(s.pending_approvals.into_iter().map(|a| a.request_id)),
        _ => return Ok(false),
    }
    client.send(id, Op::Interrupt).await.map_err(protocol)?;
    for request_id in pending {
        let deny = Op::AnswerApproval {
            request_id,
            decision: ApprovalDecision::Deny {
                reason: Some("the user stopped the session (`dsh stop`)".into()),
            },
        };
        // Answered meanwhile by someone else: nothing to do.
        if let Err(e) = client.send(id, deny).await
            && e.code != ErrorCode::UnknownRequest
        {
            return Err(protocol(e));
        }
    }
    let ended = async {
        while let Some(ev) = events.next().await {
            match ev.msg {
                EventMsg::TurnEnded { .. }
                | EventMsg::State {
                    state: SessionState::Idle,
                } => return true,
                EventMsg::Snapshot(s) if s.session.state == SessionState::Idle => return true,
                _ => {}
            }
        }
        false
    };
    Ok(tokio::time::timeout(STOP_WAIT, ended)
        .await
        .unwrap_or(false))
}

/// `dsh stop ID | --all`.
pub(crate) async fn stop(args: StopArgs) -> Result<u8, Failure> {
    let client = server::running()?.ok_or_else(server::none_running)?;
    let targets = match &args.id {
        Some(id) => vec![resolve(&client, id).await?],
        None => ps::rows(&client, false)
            .await?
            .into_iter()
            .map(|r| SessionSummary {
                id: r.id,
                state: r.state,
                ..Default::default()
            })
            .collect(),
    };
    if targets.is_empty() {
        eprintln!("no session is working");
        return Ok(0);
    }
    let mut code = 0;
    for t in targets {
        // A fresh summary: its last seq is where the wait for the turn's end starts.
        let s = client.session(&t.id).await.map_err(protocol)?;
        if s.state == SessionState::Idle {
            eprintln!("session {} is idle: nothing to stop", s.id);
            continue;
        }
        if interrupt(&client, &s).await? {
            println!("stopped {}", s.id);
        } else {
            eprintln!(
                "dsh: session {} was interrupted but its turn had not ended after {} s",
                s.id,
                STOP_WAIT.as_secs()
            );
            code = 1;
        }
    }
    Ok(code)
}

/// `dsh attach ID`: the terminal UI on the session through the background server (the
/// session stays there when the UI quits), or a read-only follow as text.
pub(crate) async fn attach(args: AttachArgs) -> Result<u8, Failure> {
    let client = server::running()?.ok_or_else(server::none_running)?;
    let session = resolve(&client, &args.id).await?;
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if args.follow || !terminal {
        return follow::follow(&client, &session).await;
    }
    crate::tui_cmd::run_with_client(
        std::sync::Arc::new(client),
        crate::tui_cmd::TuiRun::attach(session.id),
    )
    .await
}

/// `dsh serve --unix PATH --idle-exit D`: serves until SIGTERM or `idle` without clients and
/// work, then removes its socket (when it is still the one it bound). No token is asked, even
/// when `dsh serve token create` made some: the socket's mode (0600, in a 0700 directory for
/// the background server) is the access control.
pub(crate) async fn serve_until_idle(
    listener: tokio::net::UnixListener,
    client: std::sync::Arc<dyn Client>,
    mut config: dsh_serve::ServeConfig,
    idle: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    socket: std::path::PathBuf,
) -> Result<(), dsh_serve::ServeError> {
    config.tokens = None;
    let identity = server::socket_identity(&socket);
    let ended =
        dsh_serve::idle::serve_unix_until_idle(listener, client, config, idle, shutdown).await;
    server::remove_socket(&socket, identity);
    if let Ok(dsh_serve::idle::Ended::Idle) = ended {
        eprintln!(
            "dsh serve: idle for {}, stopping (closing every open session)",
            server::format_duration(idle)
        );
    }
    ended.map(|_| ())
}
