//! `dsh exec --server URL`: the same task, run by a `dsh serve` through the front-end protocol
//! (`dsh-protocol` over HTTP) on the same path as a local `exec` ([`crate::exec::drive`]), with
//! a `RemoteClient` instead of the in-process host. Same output and exit status: the final
//! answer on stdout (with `--json`, the session's committed records, from the server's log
//! stream), streamed text on stderr when it is a terminal, the wait for background work, the
//! usage line, 0 when the turn (or the goal) completed, 1 when it ended otherwise (the reason on
//! stderr), 2 for usage errors, 130 after Ctrl-C and 143 after SIGTERM (the turn is interrupted
//! on the server first). The session is closed on the server at the end, as a local one is:
//! stored there, resumable with `--resume`. What the server's session asks a person is answered
//! on behalf of nobody ([`crate::exec_follow::Headless`]: approvals declined, questions told no
//! one can answer), so a headless run never waits for an answer that cannot come.

use std::sync::Arc;

use anyhow::anyhow;
use dsh_protocol::{ErrorCode, OpenSession, ProtocolError, SessionOptions, SessionSettings};
use dsh_serve::RemoteClient;

use crate::{ExecArgs, Failure};

pub(crate) fn failure(e: ProtocolError) -> Failure {
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

fn sandbox_mode(m: dsh_sandbox::SandboxMode) -> dsh_protocol::SandboxMode {
    match m {
        dsh_sandbox::SandboxMode::ReadOnly => dsh_protocol::SandboxMode::ReadOnly,
        dsh_sandbox::SandboxMode::WorkspaceWrite => dsh_protocol::SandboxMode::WorkspaceWrite,
        dsh_sandbox::SandboxMode::DangerFullAccess => dsh_protocol::SandboxMode::DangerFullAccess,
    }
}

fn approval_policy(p: dsh_approval::ApprovalPolicy) -> dsh_protocol::ApprovalPolicy {
    match p {
        dsh_approval::ApprovalPolicy::Untrusted => dsh_protocol::ApprovalPolicy::Untrusted,
        dsh_approval::ApprovalPolicy::OnRequest => dsh_protocol::ApprovalPolicy::OnRequest,
        dsh_approval::ApprovalPolicy::OnFailure => dsh_protocol::ApprovalPolicy::OnFailure,
        dsh_approval::ApprovalPolicy::Never => dsh_protocol::ApprovalPolicy::Never,
    }
}

/// The session settings `exec --server` and `exec --bg` ask the server for: the route (`--bg`
/// names it; `--server` takes the server's), model, effort, and the session's own sandbox mode
/// and approval policy (pinned in its log by the server, refused there when it cannot enforce
/// them). The flags that change the server's composition are refused with their reason: they
/// would otherwise be silently ignored.
pub(crate) fn remote_settings(
    args: &ExecArgs,
    route: Option<String>,
    how: &str,
) -> Result<SessionSettings, Failure> {
    let composition_only = [
        (args.sandbox.network.is_some(), "--network"),
        (args.compose.config.is_some(), "--config"),
        (!args.compose.patch.is_empty(), "--patch"),
        (args.plan.plan.is_some(), "--plan"),
        (args.max_parallel_tools.is_some(), "--max-parallel-tools"),
    ];
    if let Some((_, flag)) = composition_only.iter().find(|(set, _)| *set) {
        return Err(Failure::usage(anyhow!(
            "{flag} cannot be used with {how}: it changes the composition, which is the \
             server's (start the server with it instead)"
        )));
    }
    Ok(SessionSettings {
        route,
        model: args.model.clone(),
        effort: args.effort.map(effort),
        sandbox: args.sandbox.sandbox.map(sandbox_mode),
        approval_policy: args.sandbox.ask_for_approval.map(approval_policy),
        ..Default::default()
    })
}

/// Runs `dsh exec --server URL`.
pub(crate) async fn run(args: ExecArgs, server: String, prompt: String) -> Result<u8, Failure> {
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
        settings: remote_settings(&args, None, "--server")?,
    };
    let client: Arc<dyn dsh_protocol::Client> = Arc::new(client);
    // `--continue`: the latest session of this directory among the server's.
    let resume = match (&args.resume, args.continue_latest, &options.cwd) {
        (Some(id), _, _) => Some(id.clone()),
        (None, true, Some(cwd)) => Some(crate::exec::latest_for(&*client, cwd).await?),
        _ => None,
    };
    let open = match (resume, &args.session) {
        (Some(id), _) => OpenSession::Resume {
            session_id: id,
            options,
        },
        (None, id) => OpenSession::Create {
            session_id: id.clone(),
            options,
            prompt: None,
        },
    };
    let options = crate::exec::DriveOptions {
        json: args.json,
        usage: args.usage,
        wait: std::time::Duration::from_secs(args.wait_background),
        server: Some(&server),
    };
    crate::exec::drive(client, open, prompt, options).await
}
