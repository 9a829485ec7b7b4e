//! `dsh-acp`: dsh as an Agent Client Protocol (v1) agent over stdio, on the
//! `agent-client-protocol` crate. A front end on the session protocol only: every ACP session is
//! a session of an [`dsh_protocol::Client`] (the composition root hands in the in-process host),
//! driven with [`dsh_protocol::Op`]s and rendered from its [`dsh_protocol::Event`]s: deltas as
//! message and thought chunks, tool calls as cards built from their [`dsh_protocol::ToolDisplay`],
//! task lists as plans, approval requests and questions as `session/request_permission`.
//!
//! What the client offers besides that (its terminal, its files, its MCP servers) is handed to
//! the composition root's [`SessionSetup`], which gives it to the engine.

mod config;
mod files;
mod mcp;
mod permission;
mod session;
mod setup;
mod terminal;
mod updates;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommandsUpdate, CancelNotification, ContentBlock, Implementation,
    InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse,
    SessionConfigOption, SessionId, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, StopReason,
};
use agent_client_protocol::{Agent, Client, ConnectTo, Error};
use dsh_protocol::{
    Client as Host, CommandInfo, CommandOutcome, ErrorCode, Op, OpenSession, ProtocolError,
    SessionOptions, SessionState,
};
use parking_lot::Mutex;

pub use setup::{Attached, ClientOffer, NoSetup, SessionSetup, SetupError};

/// Errors that stop the ACP server.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// The connection failed.
    #[error("ACP connection: {0}")]
    Connection(String),
}

/// What the server needs to know besides the host.
#[derive(Clone, Debug)]
pub struct AcpOptions {
    /// `agentInfo.version`.
    pub version: String,
    /// Offer the client's terminal (`terminal/*`) to sessions when the client has one.
    pub client_terminal: bool,
    /// Offer the client's files (`fs/read_text_file`, `fs/write_text_file`) to sessions when
    /// the client offers both (on unless `dsh acp --local-fs`).
    pub client_fs: bool,
}

/// One open session.
///
/// An ACP session keeps the id the client knows; a conversation rewind continues it in a forked
/// host session, which it drives from then on (`target`): ACP has no message for an agent to
/// move its client to another session, and a client that `session/load`s the old id still
/// gets the old branch, which says where it continues.
struct Open {
    /// The host's session this ACP session drives (its own id until a rewind forks it).
    target: Mutex<String>,
    /// The session's directory and the client's MCP servers (offered to a fork too).
    cwd: PathBuf,
    servers: Vec<dsh_mcp_api::McpServerConfig>,
    /// What the composition root set up for the client's offer; dropped with the entry.
    attached: Mutex<Attached>,
    /// Renders the session's events; stopped with the entry.
    forwarder: Mutex<tokio::task::JoinHandle<()>>,
    /// The turn a prompt waits for.
    turns: Arc<session::Turns>,
    /// The session's slash commands (a prompt `/name args` naming one runs it).
    commands: Vec<CommandInfo>,
    /// Set by `session/cancel` while a prompt runs.
    cancelled: AtomicBool,
    /// A prompt is running.
    prompting: AtomicBool,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.forwarder.lock().abort();
    }
}

impl Open {
    /// The host's session driven now.
    fn target(&self) -> String {
        self.target.lock().clone()
    }
}

struct State {
    host: Arc<dyn Host>,
    setup: Arc<dyn SessionSetup>,
    options: AcpOptions,
    open: Mutex<HashMap<String, Arc<Open>>>,
    /// The client said `clientCapabilities.terminal: true`.
    client_has_terminal: AtomicBool,
    /// The client said `clientCapabilities.fs.readTextFile` and `.writeTextFile: true`.
    client_has_fs: AtomicBool,
}

fn internal(message: impl Into<String>) -> Error {
    Error::new(-32603, message.into())
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(-32602, message.into())
}

/// The ACP error of a host's error.
fn host_error(e: ProtocolError) -> Error {
    match e.code {
        ErrorCode::SessionNotFound => Error::new(-32002, e.to_string()),
        ErrorCode::InvalidRequest | ErrorCode::UnknownCommand | ErrorCode::Conflict => {
            invalid(e.to_string())
        }
        _ => internal(e.to_string()),
    }
}

/// Serves ACP on `transport` (the binary passes `Stdio`) with sessions of `host`, until the
/// client disconnects; then closes every session it opened (each flushes its log).
pub async fn serve(
    host: Arc<dyn Host>,
    setup: Arc<dyn SessionSetup>,
    options: AcpOptions,
    transport: impl ConnectTo<Agent> + 'static,
) -> Result<(), AcpError> {
    let state = Arc::new(State {
        host,
        setup,
        options,
        open: Mutex::new(HashMap::new()),
        client_has_terminal: AtomicBool::new(false),
        client_has_fs: AtomicBool::new(false),
    });
    let s1 = state.clone();
    let s2 = state.clone();
    let s3 = state.clone();
    let s4 = state.clone();
    let s5 = state.clone();
    let s6 = state.clone();
    let result = Agent
        .v1()
        .name("dsh")
        .on_receive_request(
            async move |req: InitializeRequest, responder, _connection: ConnectionTo<Client>| {
                s1.client_has_terminal
                    .store(req.client_capabilities.terminal, Ordering::SeqCst);
                let fs = &req.client_capabilities.fs;
                s1.client_has_fs
                    .store(fs.read_text_file && fs.write_text_file, Ordering::SeqCst);
                responder.respond(
                    InitializeResponse::new(req.protocol_version)
                        .agent_capabilities(
                            AgentCapabilities::new()
                                .load_session(true)
                                .mcp_capabilities(McpCapabilities::new().http(true)),
                        )
                        .agent_info(Implementation::new("dsh", s1.options.version.clone())),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest, responder, connection: ConnectionTo<Client>| {
                // Opening may wait for MCP servers: off the dispatch loop.
                let state = s2.clone();
                tokio::spawn(async move {
                    let _ = match state.new_session(req, connection).await {
                        Ok(r) => responder.respond(r),
                        Err(e) => responder.respond_with_error(e),
                    };
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest, responder, connection: ConnectionTo<Client>| {
                let state = s3.clone();
                tokio::spawn(async move {
                    let _ = match state.load_session(req, connection).await {
                        Ok(r) => responder.respond(r),
                        Err(e) => responder.respond_with_error(e),
                    };
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder, connection: ConnectionTo<Client>| {
                // The turn runs outside the dispatch loop: cancel and permission answers must
                // get through while it runs.
                let state = s4.clone();
                tokio::spawn(async move {
                    let _ = match state.prompt(req, connection).await {
                        Ok(r) => responder.respond(r),
                        Err(e) => responder.respond_with_error(e),
                    };
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionConfigOptionRequest,
                        responder,
                        _connection: ConnectionTo<Client>| {
                let state = s6.clone();
                tokio::spawn(async move {
                    let _ = match state.set_config(req).await {
                        Ok(r) => responder.respond(r),
                        Err(e) => responder.respond_with_error(e),
                    };
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _connection: ConnectionTo<Client>| {
                let state = s5.clone();
                tokio::spawn(async move { state.cancel(&n.session_id).await });
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await;
    let open: Vec<String> = state.open.lock().drain().map(|(_, o)| o.target()).collect();
    for id in open {
        if let Err(e) = state.host.close(&id).await {
            tracing::warn!(session = %id, error = %e, "cannot close the session");
        }
    }
    result.map_err(|e| AcpError::Connection(e.to_string()))
}

/// Sends one `session/update`.
pub(crate) fn notify(connection: &ConnectionTo<Client>, session: &str, update: SessionUpdate) {
    if let Err(e) =
        connection.send_notification(SessionNotification::new(SessionId::new(session), update))
    {
        tracing::debug!(error = %e, "session/update not sent");
    }
}

impl State {
    /// What the client offers a session in `cwd`.
    fn offer(
        &self,
        connection: &ConnectionTo<Client>,
        id: &str,
        cwd: PathBuf,
        mcp_servers: Vec<dsh_mcp_api::McpServerConfig>,
    ) -> ClientOffer {
        let terminal = (self.options.client_terminal
            && self.client_has_terminal.load(Ordering::SeqCst))
        .then(|| {
            Arc::new(terminal::ClientTerminal {
                connection: connection.clone(),
                session: id.to_owned(),
            }) as Arc<dyn dsh_shell::ShellExecutor>
        });
        let files =
            (self.options.client_fs && self.client_has_fs.load(Ordering::SeqCst)).then(|| {
                Arc::new(files::ClientFiles {
                    connection: connection.clone(),
                    session: id.to_owned(),
                }) as Arc<dyn dsh_fs_backend::FileBackend>
            });
        ClientOffer {
            cwd,
            terminal,
            files,
            mcp_servers,
        }
    }

    async fn new_session(
        &self,
        req: NewSessionRequest,
        connection: ConnectionTo<Client>,
    ) -> Result<NewSessionResponse, Error> {
        if !req.cwd.is_absolute() || !req.cwd.is_dir() {
            return Err(invalid(format!(
                "cwd must be an absolute directory, got {}",
                req.cwd.display()
            )));
        }
        let servers = mcp::configs(&req.mcp_servers).map_err(|e| invalid(e.to_string()))?;
        let summary = self
            .host
            .open(OpenSession::Create {
                session_id: None,
                options: SessionOptions {
                    cwd: Some(req.cwd.display().to_string()),
                    ..Default::default()
                },
                prompt: None,
            })
            .await
            .map_err(host_error)?;
        let id = summary.id;
        self.attach(&id, req.cwd, servers, connection).await?;
        Ok(NewSessionResponse::new(id).config_options(config_options(&summary.settings)))
    }

    async fn load_session(
        &self,
        req: LoadSessionRequest,
        connection: ConnectionTo<Client>,
    ) -> Result<LoadSessionResponse, Error> {
        let id = req.session_id.0.to_string();
        if self.open.lock().contains_key(&id) {
            return Err(invalid(format!("session {id} is already open")));
        }
        let servers = mcp::configs(&req.mcp_servers).map_err(|e| invalid(e.to_string()))?;
        let summary = self
            .host
            .open(OpenSession::Resume {
                session_id: id.clone(),
                options: SessionOptions {
                    cwd: Some(req.cwd.display().to_string()),
                    ..Default::default()
                },
            })
            .await
            .map_err(|e| match e.code {
                ErrorCode::SessionNotFound => Error::new(-32002, format!("no stored session {id}")),
                _ => host_error(e),
            })?;
        self.attach(&id, req.cwd, servers, connection).await?;
        Ok(LoadSessionResponse::new().config_options(config_options(&summary.settings)))
    }

    /// Sets up what the client offers the open session `id`, replays its history to the
    /// client, announces its commands and starts forwarding its live events. A failure closes
    /// the session again.
    async fn attach(
        &self,
        id: &str,
        cwd: PathBuf,
        servers: Vec<dsh_mcp_api::McpServerConfig>,
        connection: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let offer = self.offer(&connection, id, cwd.clone(), servers.clone());
        let attached = match self.setup.attach(id, offer).await {
            Ok(a) => a,
            Err(e) => {
                let _ = self.host.close(id).await;
                return Err(internal(e.to_string()));
            }
        };
        let turns = Arc::new(session::Turns::default());
        let mut renderer = session::Renderer::new(
            connection.clone(),
            self.host.clone(),
            (id.to_owned(), id.to_owned()),
            cwd.clone(),
            turns.clone(),
        );
        let live = match renderer.replay().await {
            Ok(s) => s,
            Err(e) => {
                drop(attached);
                let _ = self.host.close(id).await;
                return Err(host_error(e));
            }
        };
        let commands = match self.host.commands(id).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(session = %id, error = %e, "no slash commands");
                Vec::new()
            }
        };
        if !commands.is_empty() {
            notify(
                &connection,
                id,
                SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(
                    updates::commands(&commands),
                )),
            );
        }
        let forwarder = tokio::spawn(renderer.forward(live));
        self.open.lock().insert(
            id.to_owned(),
            Arc::new(Open {
                target: Mutex::new(id.to_owned()),
                cwd,
                servers,
                attached: Mutex::new(attached),
                forwarder: Mutex::new(forwarder),
                turns,
                commands,
                cancelled: AtomicBool::new(false),
                prompting: AtomicBool::new(false),
            }),
        );
        Ok(())
    }

    async fn prompt(
        &self,
        req: PromptRequest,
        connection: ConnectionTo<Client>,
    ) -> Result<PromptResponse, Error> {
        let id = req.session_id.0.to_string();
        let open = self
            .open
            .lock()
            .get(&id)
            .cloned()
            .ok_or_else(|| invalid(format!("unknown session: {id}")))?;
        let text = prompt_text(&req.prompt)?;
        if open.prompting.swap(true, Ordering::SeqCst) {
            return Err(invalid("a prompt is already running in this session"));
        }
        let result = self.run_prompt(&id, &open, text, &connection).await;
        open.prompting.store(false, Ordering::SeqCst);
        result
    }

    async fn run_prompt(
        &self,
        id: &str,
        open: &Open,
        text: String,
        connection: &ConnectionTo<Client>,
    ) -> Result<PromptResponse, Error> {
        let target = open.target();
        let summary = self.host.session(&target).await.map_err(host_error)?;
        if matches!(
            summary.state,
            SessionState::Working | SessionState::WaitingForApproval
        ) {
            return Err(invalid("a prompt is already running in this session"));
        }
        open.cancelled.store(false, Ordering::SeqCst);
        // Waiting from before the op: the turn may end before the op's answer arrives.
        let turn = open.turns.expect(summary.last_seq);
        let op = match slash_command(&text, &open.commands) {
            Some((name, args)) => Op::RunCommand { name, args },
            None => Op::Submit {
                text,
                attachments: Vec::new(),
            },
        };
        let accepted = match self.host.send(&target, op).await {
            Ok(a) => a,
            Err(e) => {
                open.turns.clear();
                return Err(host_error(e));
            }
        };
        match accepted.command {
            // A command that ran here: its output is the answer; no turn runs.
            Some(CommandOutcome::Done { text }) => {
                open.turns.clear();
                if !text.is_empty() {
                    notify(
                        connection,
                        id,
                        SessionUpdate::AgentMessageChunk(updates::text_chunk(&text)),
                    );
                }
                return Ok(PromptResponse::new(StopReason::EndTurn));
            }
            // A rewind's preview or a switch to a forked session: shown as text (an ACP
            // client applies a preview by sending its `confirm` as `/rewind ...`).
            Some(CommandOutcome::RewindPreview(p)) => {
                open.turns.clear();
                let text = format!(
                    "Rewind to before turn {}:\n```diff\n{}```\nApply: /rewind {}",
                    p.to_turn, p.diff, p.confirm
                );
                notify(
                    connection,
                    id,
                    SessionUpdate::AgentMessageChunk(updates::text_chunk(&text)),
                );
                return Ok(PromptResponse::new(StopReason::EndTurn));
            }
            // A conversation rewind: this ACP session goes on in the fork.
            Some(CommandOutcome::SwitchSession { session_id, text }) => {
                open.turns.clear();
                let text = match self.follow(id, open, &session_id, connection).await {
                    Ok(()) => format!(
                        "{text}\nThis session continues in `{session_id}`: the next prompts go \
                         there.\n"
                    ),
                    Err(e) => format!("{text}\nThe fork could not be opened here: {e}\n"),
                };
                notify(
                    connection,
                    id,
                    SessionUpdate::AgentMessageChunk(updates::text_chunk(&text)),
                );
                return Ok(PromptResponse::new(StopReason::EndTurn));
            }
            // Work that reports through later events (a compaction): the prompt is done.
            Some(CommandOutcome::Started) => {
                open.turns.clear();
                return Ok(PromptResponse::new(StopReason::EndTurn));
            }
            // A prompt was submitted (a plain one, or a command's expansion): its turn.
            Some(CommandOutcome::Submitted { .. }) | None => {}
        }
        let reason = turn.await.ok();
        let was_cancelled = open.cancelled.swap(false, Ordering::SeqCst);
        updates::stop_reason(reason.as_ref(), was_cancelled)
            .map(PromptResponse::new)
            .map_err(|e| internal(e.to_string()))
    }

    /// `session/set_config_option`: the op of the option, then the options as they are now.
    async fn set_config(
        &self,
        req: SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, Error> {
        let id = req.session_id.0.to_string();
        let Some(target) = self.open.lock().get(&id).map(|o| o.target()) else {
            return Err(invalid(format!("unknown session: {id}")));
        };
        let op = config::op(&req.config_id.0, &req.value).map_err(|e| invalid(e.to_string()))?;
        self.host.send(&target, op).await.map_err(host_error)?;
        let summary = self.host.session(&target).await.map_err(host_error)?;
        Ok(SetSessionConfigOptionResponse::new(config::options(
            &summary.settings,
        )))
    }

    /// Moves ACP session `id` to the host's session `fork` (a conversation rewind's): opens
    /// it with what the client offers, renders its events from now on (its history, a prefix of
    /// what the client shows, is not sent again) and closes the session left.
    async fn follow(
        &self,
        id: &str,
        open: &Open,
        fork: &str,
        connection: &ConnectionTo<Client>,
    ) -> Result<(), ProtocolError> {
        self.host
            .open(OpenSession::Resume {
                session_id: fork.to_owned(),
                options: SessionOptions::default(),
            })
            .await?;
        let offer = self.offer(connection, id, open.cwd.clone(), open.servers.clone());
        let attached = match self.setup.attach(fork, offer).await {
            Ok(a) => a,
            Err(e) => {
                let _ = self.host.close(fork).await;
                return Err(ProtocolError::new(ErrorCode::Internal, e.to_string()));
            }
        };
        let mut renderer = session::Renderer::new(
            connection.clone(),
            self.host.clone(),
            (id.to_owned(), fork.to_owned()),
            open.cwd.clone(),
            open.turns.clone(),
        );
        let live = match renderer.skip_history().await {
            Ok(s) => s,
            Err(e) => {
                drop(attached);
                let _ = self.host.close(fork).await;
                return Err(e);
            }
        };
        let left = std::mem::replace(&mut *open.target.lock(), fork.to_owned());
        *open.attached.lock() = attached;
        let old = std::mem::replace(
            &mut *open.forwarder.lock(),
            tokio::spawn(renderer.forward(live)),
        );
        old.abort();
        if let Err(e) = self.host.close(&left).await {
            tracing::warn!(session = %left, error = %e, "cannot close the session left");
        }
        Ok(())
    }

    async fn cancel(&self, session: &SessionId) {
        let open = self.open.lock().get(&*session.0).cloned();
        if let Some(o) = open {
            o.cancelled.store(true, Ordering::SeqCst);
            // Delivered text is kept: the loop commits it as an interrupted message.
            if let Err(e) = self.host.send(&o.target(), Op::Interrupt).await {
                tracing::debug!(error = %e, "interrupt not taken");
            }
        }
    }
}

/// The config options of a session with `settings` (`None` when it has none).
fn config_options(settings: &dsh_protocol::SessionSettings) -> Option<Vec<SessionConfigOption>> {
    let options = config::options(settings);
    (!options.is_empty()).then_some(options)
}

/// `/name args` when `name` is one of the session's commands.
fn slash_command(text: &str, commands: &[CommandInfo]) -> Option<(String, String)> {
    let line = text.strip_prefix('/')?;
    let (name, args) = match line.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (line.trim_end(), ""),
    };
    commands
        .iter()
        .any(|c| c.name == name)
        .then(|| (name.to_owned(), args.to_owned()))
}

/// The prompt as one user text: text blocks in order, resource links flattened.
fn prompt_text(blocks: &[ContentBlock]) -> Result<String, Error> {
    let mut parts = Vec::new();
    for b in blocks {
        match b {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::ResourceLink(l) => parts.push(format!(
                "[resource_link name=\"{}\" uri=\"{}\"]",
                l.name, l.uri
            )),
            _ => {
                return Err(invalid(
                    "only text and resource_link prompt blocks are supported",
                ));
            }
        }
    }
    let text = parts.join("\n");
    if text.trim().is_empty() {
        return Err(invalid("the prompt is empty"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_protocol::CommandSource;

    fn command(name: &str) -> CommandInfo {
        CommandInfo {
            name: name.into(),
            description: String::new(),
            argument_hint: None,
            source: CommandSource::Builtin,
        }
    }

    #[test]
    fn only_a_known_command_is_run_as_one() {
        let commands = [command("model"), command("compact")];
        assert_eq!(
            slash_command("/model deepseek-chat", &commands),
            Some(("model".into(), "deepseek-chat".into()))
        );
        assert_eq!(
            slash_command("/compact", &commands),
            Some(("compact".into(), String::new()))
        );
        assert_eq!(slash_command("/usr/bin/env is a path", &commands), None);
        assert_eq!(slash_command("run /model", &commands), None);
    }
}
