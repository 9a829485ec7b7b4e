//! `bash` through the client's terminal (`terminal/*`), for clients that offer the capability
//! when `dsh acp --client-terminal` asks for it: a [`ShellExecutor`] whose runs are
//! `terminal/create` (`bash -c <command>`), `terminal/wait_for_exit` (bounded by the call's
//! deadline and cancellation, then `terminal/kill`), `terminal/output` and `terminal/release`.
//! The composition root gives the session its own `bash` tool on it ([`crate::SessionSetup`]),
//! so the editor shows and owns the processes. They run where the client runs them:
//! dsh's sandbox does not confine them.

use std::path::PathBuf;
use std::time::Instant;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, EnvVariable, KillTerminalRequest, ReleaseTerminalRequest, SessionId,
    TerminalExitStatus, TerminalId, TerminalOutputRequest, WaitForTerminalExitRequest,
};
use dsh_shell::{
    CapturedStream, ShellError, ShellExecutor, ShellOutcome, ShellRequest, Termination, limits,
};
use futures::future::BoxFuture;

/// Runs commands in the client's terminals.
pub(crate) struct ClientTerminal {
    pub(crate) connection: ConnectionTo<Client>,
    pub(crate) session: String,
}

fn failure(context: &'static str, e: impl std::fmt::Display) -> ShellError {
    ShellError::Process {
        context,
        source: std::io::Error::other(format!("the client's terminal: {e}")),
    }
}

fn termination(status: Option<&TerminalExitStatus>) -> Termination {
    match status {
        Some(TerminalExitStatus {
            exit_code: Some(c), ..
        }) => Termination::Exited {
            code: i32::try_from(*c).unwrap_or(i32::MAX),
        },
        Some(TerminalExitStatus {
            signal: Some(s), ..
        }) => Termination::Signaled {
            signal: 0,
            name: s.clone(),
        },
        _ => Termination::Exited { code: -1 },
    }
}

impl ClientTerminal {
    async fn run_in_client(&self, request: ShellRequest) -> Result<ShellOutcome, ShellError> {
        let started = Instant::now();
        let timeout = limits::clamp_timeout(request.timeout);
        let session = SessionId::new(self.session.as_str());
        let mut env: Vec<EnvVariable> = request
            .env
            .iter()
            .map(|(k, v)| EnvVariable::new(k.clone(), v.clone()))
            .collect();
        if let Some(id) = &request.session_id {
            env.push(EnvVariable::new("DSH_SESSION_ID", id.clone()));
        }
        let create = CreateTerminalRequest::new(session.clone(), "bash")
            .args(vec!["-c".to_owned(), request.command.clone()])
            .env(env)
            .cwd(Some(PathBuf::from(&request.cwd)))
            .output_byte_limit(Some(limits::STREAM_CAPTURE_BYTES as u64));
        let terminal: TerminalId = self
            .connection
            .send_request(create)
            .block_task()
            .await
            .map_err(|e| failure("creating a terminal", e))?
            .terminal_id;
        let wait = || {
            self.connection
                .send_request(WaitForTerminalExitRequest::new(
                    session.clone(),
                    terminal.clone(),
                ))
                .block_task()
        };
        let (mut timed_out, mut cancelled) = (false, false);
        tokio::select! {
            r = wait() => { r.map_err(|e| failure("waiting for the terminal", e))?; }
            () = tokio::time::sleep(timeout) => timed_out = true,
            () = request.cancel.cancelled() => cancelled = true,
        }
        if timed_out || cancelled {
            let kill = KillTerminalRequest::new(session.clone(), terminal.clone());
            if let Err(e) = self.connection.send_request(kill).block_task().await {
                tracing::warn!(error = %e, "terminal/kill failed");
            }
            if let Err(e) = wait().await {
                tracing::warn!(error = %e, "terminal/wait_for_exit after kill failed");
            }
        }
        let output = self
            .connection
            .send_request(TerminalOutputRequest::new(
                session.clone(),
                terminal.clone(),
            ))
            .block_task()
            .await
            .map_err(|e| failure("reading the terminal's output", e));
        let release = ReleaseTerminalRequest::new(session, terminal);
        if let Err(e) = self.connection.send_request(release).block_task().await {
            tracing::warn!(error = %e, "terminal/release failed");
        }
        let output = output?;
        let bytes = output.output.into_bytes();
        Ok(ShellOutcome {
            stdout: CapturedStream {
                total_bytes: bytes.len() as u64,
                truncated: output.truncated,
                tail: bytes,
                spill_path: None,
                spill_skipped: output
                    .truncated
                    .then_some(dsh_shell::SpillSkipped::Unavailable),
            },
            stderr: CapturedStream::default(),
            termination: termination(output.exit_status.as_ref()),
            timed_out,
            cancelled,
            timeout,
            elapsed: started.elapsed(),
            pid: 0,
        })
    }
}

impl ShellExecutor for ClientTerminal {
    fn name(&self) -> &str {
        "acp-client-terminal"
    }

    fn run(&self, request: ShellRequest) -> BoxFuture<'_, Result<ShellOutcome, ShellError>> {
        Box::pin(self.run_in_client(request))
    }
}
