//! The `write` tool: create or replace a whole file, atomically.

use std::path::{Path, PathBuf};

use dsh_tools::{ToolContext, ToolError, ToolOutput};
use serde_json::{Value, json};

use dsh_sandbox::SandboxPolicy;

use crate::args::{nonblank, parse};
use crate::backend::{BackendError, FileBackend, backend_error, bounded, text_version};
use crate::fenced::fenced_write;
use crate::paths::{codes, current_version, io_error, resolve_path};

/// The JSON Schema of `write`'s arguments.
pub fn schema() -> Value {
    with_escalation(base_schema())
}

fn base_schema() -> Value {
    json!({"type":"object","properties":{
        "file_path":{"type":"string","description":"Absolute or relative to the working directory."},
        "content":{"type":"string"}},
      "required":["file_path","content"]})
}

/// The description sent to the model.
pub const DESCRIPTION: &str = "Create a file or replace its whole content (parent \
directories are created). Overwriting is refused unless you read the file first and it has not \
changed since (read it again). Prefer edit for partial changes. The content is not echoed.";

/// `write`'s arguments, as its schema names them.
#[derive(serde::Deserialize)]
struct WriteArgs {
    file_path: String,
    content: String,
}

/// The resolved path and the content.
fn write_args(ctx: &ToolContext, args: Value) -> Result<(PathBuf, String), ToolError> {
    let a: WriteArgs = parse(args)?;
    let path = resolve_path(ctx.cwd(), nonblank(&a.file_path, "file_path")?);
    Ok((path, a.content))
}

/// Run `write`; with a `policy`, the write is fenced by it (`FS_SANDBOX_DENIED`).
pub async fn run(
    ctx: ToolContext,
    args: Value,
    policy: Option<SandboxPolicy>,
) -> Result<ToolOutput, ToolError> {
    // The content is moved out of the arguments, not copied: it can be megabytes.
    let (path, content) = write_args(&ctx, args)?;
    tokio::task::spawn_blocking(move || write_file(&path, content.as_bytes(), policy.as_ref()))
        .await
        .map_err(|e| ToolError::failed(format!("write task failed: {e}")))?
}

/// Run `write` through `backend` (the client owns the file). The sandbox `policy` is checked
/// by dsh before the backend is asked; whether the file existed is asked of the backend.
pub async fn run_via(
    ctx: ToolContext,
    args: Value,
    policy: Option<SandboxPolicy>,
    backend: &dyn FileBackend,
) -> Result<ToolOutput, ToolError> {
    let (path, content) = write_args(&ctx, args)?;
    let content = content.as_str();
    if let Some(policy) = &policy {
        policy.check_write(&write_target(&path))?;
    }
    let existed = match bounded(&ctx, backend.read_text(&path)).await? {
        Ok(_) => true,
        Err(BackendError::NotFound) => false,
        Err(e) => return Err(backend_error(backend, "write", &path, &e)),
    };
    bounded(&ctx, backend.write_text(&path, content))
        .await?
        .map_err(|e| backend_error(backend, "write", &path, &e))?;
    Ok(written(
        &path,
        existed,
        content.len(),
        text_version(content),
    ))
}

/// Resolve a final-component symlink so the link's target is replaced, not the link.
pub(crate) fn write_target(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

fn write_file(
    path: &Path,
    bytes: &[u8],
    policy: Option<&SandboxPolicy>,
) -> Result<ToolOutput, ToolError> {
    let target = write_target(path);
    if let Some(policy) = policy {
        policy.check_write(&target)?;
    }
    let existed = match std::fs::metadata(&target) {
        Ok(m) if m.is_file() => true,
        Ok(_) => {
            return Err(ToolError::new(
                codes::FS_NOT_A_FILE,
                format!("cannot write \"{}\": not a regular file", path.display()),
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(io_error("write", path, &e)),
    };
    fenced_write(policy, "write", path, &target, bytes)?;
    let version = current_version(&target)
        .map_err(|e| io_error("write", path, &e))?
        .unwrap_or_default();
    Ok(written(path, existed, bytes.len(), version))
}

fn written(path: &Path, existed: bool, bytes: usize, version: String) -> ToolOutput {
    let verb = if existed {
        "Updated file"
    } else {
        "Created file"
    };
    ToolOutput::text(format!(
        "<path>{}</path>\n<type>file</type>\n<content>\n{verb}\n</content>",
        path.display()
    ))
    .with_meta(json!({
        "path": path.to_string_lossy(),
        "created": !existed,
        "bytes": bytes,
        "version": version,
    }))
}

/// Adds the sandbox escalation arguments (`sandbox_permissions`, `justification`).
fn with_escalation(mut schema: Value) -> Value {
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for (name, prop) in dsh_sandbox::escalation_properties_plain() {
            props.insert(name.to_owned(), prop);
        }
    }
    schema
}
