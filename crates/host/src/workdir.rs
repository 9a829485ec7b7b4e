//! `Op::SetWorkingDirectory`: moves a session to another directory, as the SDK runtime's
//! `session/working-directory/set` and the `working_directory` tool do. The change is logged
//! as `working-directory/change {cwd}` (a resumed session continues there) and the model is
//! told in a one-line notice before its next request.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_agent::Agent;
use dsh_llm::{ContentBlock, Message, MessageSource, Role};
use dsh_protocol::{ErrorCode, ProtocolError};
use dsh_session::NewEvent;
use dsh_session::feature::WorkingDirectoryChange;

use crate::agent_error;

fn invalid(message: String) -> ProtocolError {
    ProtocolError::new(ErrorCode::InvalidRequest, message)
}

fn internal(message: String) -> ProtocolError {
    ProtocolError::new(ErrorCode::Internal, message)
}

/// Moves `agent` to `path` (absolute, or relative to its current directory) and answers the
/// new directory, canonical.
pub(crate) fn set(agent: &Arc<dyn Agent>, path: &str) -> Result<String, ProtocolError> {
    if path.is_empty() {
        return Err(invalid(
            "setWorkingDirectory: path must be non-empty".into(),
        ));
    }
    let base = current(agent)?;
    let target = resolve(&base, path)?;
    change(agent, &target)?;
    Ok(target.display().to_string())
}

/// The session's effective directory: its current one, or its origin (moved to, and logged)
/// when the current one vanished.
fn current(agent: &Arc<dyn Agent>) -> Result<PathBuf, ProtocolError> {
    let cwd = agent.options().cwd;
    if cwd.is_dir() {
        return Ok(cwd);
    }
    let origin = agent
        .session()
        .header()
        .cwd
        .map(PathBuf::from)
        .filter(|p| p.is_dir());
    match origin {
        Some(o) => {
            change(agent, &o)?;
            Ok(o)
        }
        None => Err(invalid(format!(
            "the working directory {} no longer exists",
            cwd.display()
        ))),
    }
}

/// `path` against `base`, as an existing canonical directory.
fn resolve(base: &Path, path: &str) -> Result<PathBuf, ProtocolError> {
    let joined = base.join(path);
    let canonical = joined
        .canonicalize()
        .map_err(|e| invalid(format!("setWorkingDirectory: {}: {e}", joined.display())))?;
    if !canonical.is_dir() {
        return Err(invalid(format!(
            "setWorkingDirectory: {} is not a directory",
            canonical.display()
        )));
    }
    Ok(canonical)
}

/// Moves the agent and records it (nothing when unchanged).
fn change(agent: &Arc<dyn Agent>, cwd: &Path) -> Result<(), ProtocolError> {
    if agent.options().cwd == cwd {
        return Ok(());
    }
    agent.set_cwd(cwd.to_path_buf()).map_err(agent_error)?;
    let text = cwd.display().to_string();
    let event = NewEvent::plugin(&WorkingDirectoryChange { cwd: text.clone() })
        .map_err(|e| internal(format!("cannot encode working-directory/change: {e}")))?;
    agent
        .session()
        .append(event)
        .map_err(|e| internal(format!("cannot log working-directory/change: {e}")))?;
    let notice = Message::new(
        "",
        Role::User,
        vec![ContentBlock::text(format!(
            "The working directory is now {text}."
        ))],
        MessageSource::new("working-directory").with("form", serde_json::Value::from("notice")),
    );
    agent.inject(notice).map_err(agent_error)?;
    Ok(())
}
