//! The `edit` tool: literal string replacement in a text file.

use std::path::{Path, PathBuf};

use dsh_sandbox::SandboxPolicy;
use dsh_tools::{ToolContext, ToolError, ToolOutput};
use serde_json::{Value, json};

use crate::args::{nonblank, parse};
use crate::backend::{FileBackend, backend_error, bounded, text_version};
use crate::fenced::fenced_write;
use crate::paths::{codes, current_version, io_error, resolve_path};
use crate::write::write_target;

/// Largest file `edit` loads (it holds the text a few times over while replacing).
pub const MAX_EDIT_BYTES: u64 = 64 * 1024 * 1024;

/// The JSON Schema of `edit`'s arguments.
pub fn schema() -> Value {
    with_escalation(base_schema())
}

fn base_schema() -> Value {
    json!({"type":"object","properties":{
        "file_path":{"type":"string","description":"Absolute or relative to the working directory."},
        "old_string":{"type":"string"},
        "new_string":{"type":"string","description":"Empty deletes."},
        "replace_all":{"type":"boolean","description":"Every occurrence (default false)."}},
      "required":["file_path","old_string","new_string"]})
}

/// The description sent to the model.
pub const DESCRIPTION: &str = "Replace literal text in a file: old_string must match exactly \
once unless replace_all (add surrounding lines to make it unique). Refused if it is not found or \
ambiguous, or if the file was not read first or changed since (read it again). Line endings are \
normalised for matching; the file keeps its own.";

/// `edit`'s arguments, as its schema names them.
#[derive(serde::Deserialize)]
struct RawEditArgs {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: Option<bool>,
}

struct EditArgs {
    path: PathBuf,
    old: String,
    new: String,
    replace_all: bool,
}

fn edit_args(ctx: &ToolContext, args: Value) -> Result<EditArgs, ToolError> {
    let a: RawEditArgs = parse(args)?;
    let path = resolve_path(ctx.cwd(), nonblank(&a.file_path, "file_path")?);
    if a.old_string.is_empty() {
        return Err(ToolError::invalid_args(
            "old_string must be a non-empty string",
        ));
    }
    if a.old_string == a.new_string {
        return Err(ToolError::invalid_args(
            "old_string and new_string must differ",
        ));
    }
    Ok(EditArgs {
        path,
        old: a.old_string,
        new: a.new_string,
        replace_all: a.replace_all.unwrap_or(false),
    })
}

/// Run `edit`; with a `policy`, the write is fenced by it (`FS_SANDBOX_DENIED`).
pub async fn run(
    ctx: ToolContext,
    args: Value,
    policy: Option<SandboxPolicy>,
) -> Result<ToolOutput, ToolError> {
    let a = edit_args(&ctx, args)?;
    tokio::task::spawn_blocking(move || {
        edit_file(&a.path, &a.old, &a.new, a.replace_all, policy.as_ref())
    })
    .await
    .map_err(|e| ToolError::failed(format!("edit task failed: {e}")))?
}

/// Run `edit` through `backend` (the client owns the file): its text is read and written
/// whole; the sandbox `policy` is checked by dsh before the backend is asked.
pub async fn run_via(
    ctx: ToolContext,
    args: Value,
    policy: Option<SandboxPolicy>,
    backend: &dyn FileBackend,
) -> Result<ToolOutput, ToolError> {
    let a = edit_args(&ctx, args)?;
    let path = &a.path;
    if let Some(policy) = &policy {
        policy.check_write(&write_target(path))?;
    }
    let text = bounded(&ctx, backend.read_text(path))
        .await?
        .map_err(|e| backend_error(backend, "edit", path, &e))?;
    let p = path.display();
    if text.len() as u64 > MAX_EDIT_BYTES {
        return Err(ToolError::new(
            codes::FS_TOO_LARGE,
            format!(
                "cannot edit \"{p}\": file too large ({} bytes; the limit is {MAX_EDIT_BYTES})",
                text.len()
            ),
        ));
    }
    if text.as_bytes().contains(&0) {
        return Err(ToolError::new(
            codes::FS_NOT_TEXT,
            format!("cannot edit \"{p}\": binary file"),
        ));
    }
    let (out, count) = apply(path, &text, &a.old, &a.new, a.replace_all)?;
    bounded(&ctx, backend.write_text(path, &out))
        .await?
        .map_err(|e| backend_error(backend, "edit", path, &e))?;
    Ok(edited(path, count, a.replace_all, text_version(&out)))
}

fn edit_file(
    path: &Path,
    old: &str,
    new: &str,
    replace_all: bool,
    policy: Option<&SandboxPolicy>,
) -> Result<ToolOutput, ToolError> {
    let p = path.display();
    let target = write_target(path);
    if let Some(policy) = policy {
        policy.check_write(&target)?;
    }
    let meta = std::fs::metadata(&target).map_err(|e| io_error("edit", path, &e))?;
    if !meta.is_file() {
        return Err(ToolError::new(
            codes::FS_NOT_A_FILE,
            format!("cannot edit \"{p}\": not a regular file"),
        ));
    }
    if meta.len() > MAX_EDIT_BYTES {
        return Err(ToolError::new(
            codes::FS_TOO_LARGE,
            format!(
                "cannot edit \"{p}\": file too large ({} bytes; the limit is {MAX_EDIT_BYTES})",
                meta.len()
            ),
        ));
    }
    let bytes = std::fs::read(&target).map_err(|e| io_error("edit", path, &e))?;
    if bytes.contains(&0) {
        return Err(ToolError::new(
            codes::FS_NOT_TEXT,
            format!("cannot edit \"{p}\": binary file"),
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        ToolError::new(
            codes::FS_NOT_TEXT,
            format!("cannot edit \"{p}\": invalid UTF-8 text"),
        )
    })?;
    let (out, count) = apply(path, &text, old, new, replace_all)?;
    fenced_write(policy, "edit", path, &target, out.as_bytes())?;
    let version = current_version(&target)
        .map_err(|e| io_error("edit", path, &e))?
        .unwrap_or_default();
    Ok(edited(path, count, replace_all, version))
}

/// The edited text and the number of replacements, or the not-found / ambiguous errors.
fn apply(
    path: &Path,
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, usize), ToolError> {
    let p = path.display();
    let crlf = prefers_crlf(text);
    let normalized = text.replace("\r\n", "\n");
    let old_n = old.replace("\r\n", "\n");
    let new_n = new.replace("\r\n", "\n");
    let count = normalized.matches(old_n.as_str()).count();
    if count == 0 {
        return Err(ToolError::new(
            codes::FS_EDIT_NOT_FOUND,
            format!("old_string was not found in \"{p}\""),
        ));
    }
    if count > 1 && !replace_all {
        return Err(ToolError::new(
            codes::FS_AMBIGUOUS_EDIT,
            format!(
                "old_string matched {count} times in \"{p}\"; provide a more specific old_string or set replace_all to true"
            ),
        ));
    }
    let replaced = if replace_all {
        normalized.replace(old_n.as_str(), &new_n)
    } else {
        normalized.replacen(old_n.as_str(), &new_n, 1)
    };
    let out = if crlf {
        replaced.replace('\n', "\r\n")
    } else {
        replaced
    };
    Ok((out, count))
}

fn edited(path: &Path, count: usize, replace_all: bool, version: String) -> ToolOutput {
    let p = path.display();
    let text = if replace_all {
        format!("The file {p} has been updated. All occurrences were successfully replaced.")
    } else {
        format!("The file {p} has been updated successfully.")
    };
    ToolOutput::text(text).with_meta(json!({
        "path": path.to_string_lossy(),
        "replacements": count,
        "version": version,
    }))
}

/// CRLF style when CRLF pairs outnumber bare LFs in the first 4096 characters.
fn prefers_crlf(text: &str) -> bool {
    let head: String = text.chars().take(4096).collect();
    let crlf = head.matches("\r\n").count();
    let lf = head.matches('\n').count() - crlf;
    crlf > lf
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

#[cfg(test)]
mod tests {
    use super::prefers_crlf;

    #[test]
    fn line_ending_style() {
        assert!(prefers_crlf("a\r\nb\r\nc\n"));
        assert!(!prefers_crlf("a\r\nb\nc\n"));
        assert!(!prefers_crlf("no newline"));
    }
}
