//! What a tool is: the [`Tool`] trait, the [`ToolContext`] its body receives, what it returns
//! ([`ToolOutput`]) and what the pipeline makes of it ([`ToolResult`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dsh_llm::ContentBlock;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use dsh_llm::ToolErrorCode;

use crate::display::{DisplayInput, generic_display};
use crate::error::ToolError;
use dsh_protocol::ToolDisplay;

/// Whether a call may run concurrently with other parallel-safe calls of the same batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Concurrency {
    /// May run in the rolling pool with other parallel-safe calls.
    ParallelSafe,
    /// A barrier: runs alone. The default for anything that does not say otherwise.
    Exclusive,
}

/// What a tool body receives besides its validated arguments.
///
/// Built by the caller of [`crate::Tools::execute`] (the agent loop) from the session and the
/// call; the pipeline fills in the tool name and its own cancellation token.
#[derive(Clone)]
pub struct ToolContext {
    call_id: String,
    tool_name: String,
    session_id: String,
    cwd: PathBuf,
    scope: Option<String>,
    cancel: CancellationToken,
    scratch_dir: Option<PathBuf>,
    scratch_cap: Option<u64>,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("call_id", &self.call_id)
            .field("tool_name", &self.tool_name)
            .field("session_id", &self.session_id)
            .field("cwd", &self.cwd)
            .field("scope", &self.scope)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish()
    }
}

impl ToolContext {
    /// A context for call `call_id` in session `session_id` working in `cwd`, with a fresh
    /// cancellation token and no scratch directory (the pipeline always sets one: the
    /// request's, or the service's private one).
    pub fn new(
        call_id: impl Into<String>,
        session_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            tool_name: String::new(),
            session_id: session_id.into(),
            cwd: cwd.into(),
            scope: None,
            cancel: CancellationToken::new(),
            scratch_dir: None,
            scratch_cap: None,
        }
    }

    /// Builder: the tool name (set by the pipeline).
    pub fn with_tool_name(mut self, name: impl Into<String>) -> Self {
        self.tool_name = name.into();
        self
    }

    /// Builder: the cancellation token the body must honour.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Builder: the agent scope the call runs in (`None` = global).
    pub fn with_scope(mut self, scope: Option<String>) -> Self {
        self.scope = scope;
        self
    }

    /// Builder: the session-private directory for spill files.
    pub fn with_scratch_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.scratch_dir = Some(dir.into());
        self
    }

    /// Builder: the cap on the total size of the files in the scratch directory.
    pub fn with_scratch_cap(mut self, cap: Option<u64>) -> Self {
        self.scratch_cap = cap;
        self
    }

    /// The provider's call id.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The name the tool was called by.
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }

    /// The session the call belongs to (`DSH_SESSION_ID` for shell tools; observation key).
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The session's (or agent's) working directory; relative paths resolve against it.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The agent scope key, when the call runs in an agent scope.
    pub fn scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }

    /// Cancelled when the call is aborted or its deadline passes. A body must stop promptly
    /// and return; the pipeline awaits it.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Session-private directory for spill files (not created until needed). Set by the
    /// pipeline for every call: the session's artefact directory when the caller gave one,
    /// else the Tools service's private temporary directory. `None` only for a context built
    /// by hand without one.
    pub fn scratch_dir(&self) -> Option<&Path> {
        self.scratch_dir.as_deref()
    }

    /// Cap on the total size of the files in [`Self::scratch_dir`] (the session's spill
    /// budget), when the caller set one. Writers check it before writing.
    pub fn scratch_cap(&self) -> Option<u64> {
        self.scratch_cap
    }

    /// Whether `bytes` more fit in the scratch directory under [`Self::scratch_cap`]: `Ok(())`
    /// when they do (or there is no cap), else an error saying the session's spill files
    /// reached their cap. Call it before writing a spill file of known size.
    pub fn check_scratch_room(&self, bytes: u64) -> std::io::Result<()> {
        let (Some(dir), Some(cap)) = (&self.scratch_dir, self.scratch_cap) else {
            return Ok(());
        };
        if dir_size(dir).saturating_add(bytes) > cap {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                format!("this session's spill files reached their cap of {cap} bytes"),
            ));
        }
        Ok(())
    }

    /// Create a new private spill file (mode 0600 in a 0700 directory) named
    /// `<stem>-<call id>-<n>.<ext>` under [`Self::scratch_dir`]. Fails with `NotFound` when
    /// the context has no scratch directory.
    pub fn create_spill_file(
        &self,
        stem: &str,
        ext: &str,
    ) -> std::io::Result<(std::fs::File, PathBuf)> {
        let Some(dir) = &self.scratch_dir else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "this tool call has no scratch directory",
            ));
        };
        create_private_file(dir, stem, &self.call_id, ext)
    }
}

/// `s` with every character outside `[A-Za-z0-9_-]` replaced by `_` (for file names).
pub(crate) fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Total size of the regular files under `dir` (0 when it does not exist).
pub(crate) fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_size(&entry.path()),
            Ok(t) if t.is_file() => entry.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

pub(crate) fn create_private_file(
    dir: &Path,
    stem: &str,
    call_id: &str,
    ext: &str,
) -> std::io::Result<(std::fs::File, PathBuf)> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let safe_call = file_safe(call_id);
    for n in 0..1000u32 {
        let path = dir.join(format!("{stem}-{safe_call}-{n}.{ext}"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => return Ok((file, path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "too many spill files for this call",
    ))
}

/// What a tool body returns on success.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    /// The JSON value of the result. A string renders as one text block by default.
    pub value: Value,
    /// Tool-private presentation payload for `tool/result.meta` (opaque to the core).
    pub meta: Option<Value>,
    /// Context the tool defers to the next step (kept in order ahead of wrapper and
    /// post-execute contexts).
    pub contexts: Vec<String>,
}

impl ToolOutput {
    /// A text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            value: Value::String(text.into()),
            meta: None,
            contexts: Vec::new(),
        }
    }

    /// A JSON result.
    pub fn json(value: Value) -> Self {
        Self {
            value,
            meta: None,
            contexts: Vec::new(),
        }
    }

    /// Builder: attach `meta`.
    pub fn with_meta(mut self, meta: Value) -> Self {
        self.meta = Some(meta);
        self
    }
}

/// The default renderer: a string value is one text block, anything else its compact JSON.
pub fn render_default(output: &ToolOutput) -> Vec<ContentBlock> {
    match &output.value {
        Value::String(s) => vec![ContentBlock::text(s.clone())],
        other => vec![ContentBlock::text(
            serde_json::to_string(other).unwrap_or_default(),
        )],
    }
}

/// A tool: a name, a description, a JSON Schema for its arguments and an async body.
///
/// The pipeline validates arguments against [`Tool::parameters`] before calling
/// [`Tool::execute`], so a body may deserialize them with confidence in their shape (it still
/// checks value constraints the schema subset cannot express).
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls (`^[a-zA-Z0-9_-]{1,64}$`).
    fn name(&self) -> &str;

    /// The description sent to the model. Keep it stable: it is part of the cached prefix.
    fn description(&self) -> &str;

    /// The JSON Schema of the arguments, in the supported subset (see [`crate::schema`]).
    fn parameters(&self) -> &Value;

    /// Run the body. Must honour `ctx.cancel_token()` and return promptly once it fires.
    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;

    /// Render a successful output to content blocks. Default: [`render_default`].
    fn render(&self, output: &ToolOutput) -> Vec<ContentBlock> {
        render_default(output)
    }

    /// The tool's own time budget; enforced by the timeout-policy plugin when mounted.
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Whether this call may run in parallel. Anything but an explicit `ParallelSafe`
    /// (including a panic here) makes the call exclusive.
    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::Exclusive
    }

    /// Whether [`Tool::parameters`] is a foreign schema sent verbatim (an MCP server's
    /// `inputSchema`): the registry then checks only that the root is an object schema, and
    /// the pipeline skips argument validation, leaving it to the tool's owner (the MCP
    /// server validates its own arguments). Default `false`: the supported subset applies.
    fn foreign_schema(&self) -> bool {
        false
    }

    /// Whether a call only reads: the workspace (files, images), the session's own state (its
    /// todo list, its goal), or asks the user. The `untrusted` approval policy never asks
    /// before such a call. Default `false`: anything that may write, run a process, reach the
    /// network or start an agent is asked about. Per tool, not per call: a tool whose calls
    /// may do either says `false`.
    fn read_only(&self) -> bool {
        false
    }

    /// How a call of this tool looks to a person (its card in a front end, its ACP tool
    /// call): the kind, a title, the subject (command, path, URL, pattern), a diff, an
    /// output summary once it ended. Derived from `call` only (the logged arguments and
    /// result), so a resumed session shows the same. Must be cheap and must not fail: a
    /// malformed call gets what can be shown. Default: [`generic_display`].
    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        generic_display(call)
    }
}

type BodyFn =
    dyn Fn(ToolContext, Value) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync;
type DisplayFn = dyn Fn(&DisplayInput<'_>) -> ToolDisplay + Send + Sync;

/// A [`Tool`] made of closures: handy for small tools and tests.
pub struct FnTool {
    name: String,
    description: String,
    parameters: Value,
    body: Arc<BodyFn>,
    timeout: Option<Duration>,
    parallel_safe: bool,
    display: Option<Arc<DisplayFn>>,
}

impl fmt::Debug for FnTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool").field("name", &self.name).finish()
    }
}

impl FnTool {
    /// A tool named `name` whose body is `body`.
    pub fn new<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        body: F,
    ) -> Self
    where
        F: Fn(ToolContext, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
            body: Arc::new(move |ctx, args| Box::pin(body(ctx, args))),
            timeout: None,
            parallel_safe: false,
            display: None,
        }
    }

    /// Builder: describe calls with `display` (default: [`generic_display`]).
    pub fn with_display(
        mut self,
        display: impl Fn(&DisplayInput<'_>) -> ToolDisplay + Send + Sync + 'static,
    ) -> Self {
        self.display = Some(Arc::new(display));
        self
    }

    /// Builder: declare a time budget.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Builder: every call of this tool is parallel-safe.
    pub fn parallel_safe(mut self) -> Self {
        self.parallel_safe = true;
        self
    }
}

impl Tool for FnTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> &Value {
        &self.parameters
    }
    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        (self.body)(ctx, args)
    }
    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        match &self.display {
            Some(display) => display(call),
            None => generic_display(call),
        }
    }
    fn concurrency(&self, _args: &Value) -> Concurrency {
        if self.parallel_safe {
            Concurrency::ParallelSafe
        } else {
            Concurrency::Exclusive
        }
    }
}

/// The outcome of one tool call, as committed to the log.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult {
    /// The provider's call id.
    pub call_id: String,
    /// The tool name as called.
    pub name: String,
    /// Model-visible content (`Error: <message>` for failures).
    pub content: Vec<ContentBlock>,
    /// `isError` of the tool message.
    pub is_error: bool,
    /// `tool/result.error` (only when `is_error`).
    pub error: Option<ToolError>,
    /// The tool's JSON value (absent for failures and blocked results).
    pub value: Option<Value>,
    /// `tool/result.meta`.
    pub meta: Option<Value>,
    /// Context for the next step, in order: tool-deferred, execute-wrapper, post-execute.
    pub contexts: Vec<String>,
}

impl ToolResult {
    /// A failure result: `Error: <message>`, `isError: true`, `error = err`.
    pub fn failure(call_id: impl Into<String>, name: impl Into<String>, err: ToolError) -> Self {
        Self {
            call_id: call_id.into(),
            name: name.into(),
            content: vec![ContentBlock::text(err.model_text())],
            is_error: true,
            error: Some(err),
            value: None,
            meta: None,
            contexts: Vec::new(),
        }
    }

    /// The concatenated text of the content blocks.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect()
    }

    /// The error code, if this is a failure with one.
    pub fn code(&self) -> Option<&ToolErrorCode> {
        self.error.as_ref().map(|e| &e.code)
    }
}
