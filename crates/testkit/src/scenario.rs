//! Scenario files: a list of scripted responses in JSON or YAML, for `dsh-mock-llm`, manual runs
//! and benchmarks. The format is documented in the crate README ("Scenario files").

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;

use crate::deepseek;
use crate::reply::{Reply, Split, Step};
use crate::server::MockServer;
use crate::sse::{Completion, Usage, UsagePlacement};

/// Why a scenario could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid JSON/YAML for the scenario schema.
    #[error("invalid scenario {path}: {message}")]
    Parse {
        /// The scenario file (or `<inline>`).
        path: PathBuf,
        /// What the parser said, with line and column where known.
        message: String,
    },
    /// A response entry is inconsistent.
    #[error("response #{index}: {source}")]
    Invalid {
        /// 0-based position in `responses`.
        index: usize,
        /// What is wrong.
        source: ResponseError,
    },
}

/// Why one response entry of a scenario cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ResponseError {
    /// Not exactly one of the response kinds.
    #[error("give exactly one of `completion`, `error`, `sseFile`, `raw`")]
    NotOneKind,
    /// `split` on an `error` response.
    #[error("`split` applies to `completion` and `sseFile` only")]
    SplitOnError,
    /// `split` on a `raw` response.
    #[error("`split` applies to `completion` and `sseFile` only; use `chunks` steps in `raw`")]
    SplitOnRaw,
    /// An `error` with `kind` and also `status` or `message`.
    #[error(
        "`kind` errors use the captured status and body; drop `status`/`message` or drop `kind`"
    )]
    KindWithStatus,
    /// An `error` with neither `kind` nor `status`.
    #[error("an `error` needs `kind` or `status`")]
    NoKindOrStatus,
    /// A status outside 100..=999.
    #[error("invalid HTTP status {0}")]
    InvalidStatus(u16),
    /// A header whose value is not a string.
    #[error("header `{0}` must be a string")]
    HeaderNotString(String),
    /// A `chunks` step without exactly one of `text` and `file`.
    #[error("`chunks` needs exactly one of `text`, `file`")]
    ChunksSource,
    /// A referenced file cannot be read.
    #[error("cannot read {path}: {source}")]
    ReadFile {
        /// The resolved path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Text format of a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JSON.
    Json,
    /// YAML (also accepts most JSON).
    Yaml,
}

/// A loaded scenario: replies in order, plus server options.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Serve the responses in a loop instead of once each.
    pub repeat: bool,
    /// Answer chat requests without `authorization: Bearer <key>` with DeepSeek's 401.
    pub require_api_key: Option<String>,
    /// Reject requests DeepSeek would reject (see [`MockServer::validate_requests`]).
    pub validate_requests: bool,
    /// The replies in order.
    pub replies: Vec<Reply>,
}

impl Scenario {
    /// Loads a scenario file; `.json` is parsed as JSON, anything else as YAML. Relative file
    /// references inside are resolved against the scenario's directory.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: path.to_owned(),
            source,
        })?;
        let format = match path.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("json") => Format::Json,
            _ => Format::Yaml,
        };
        let base = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, format, base).map_err(|err| match err {
            ScenarioError::Parse { message, .. } => ScenarioError::Parse {
                path: path.to_owned(),
                message,
            },
            other => other,
        })
    }

    /// Parses scenario text; `base_dir` resolves relative `file` references.
    pub fn parse(text: &str, format: Format, base_dir: &Path) -> Result<Self, ScenarioError> {
        let parse_error = |message: String| ScenarioError::Parse {
            path: PathBuf::from("<inline>"),
            message,
        };
        // Both formats go through a JSON value so enums read the same way in YAML and JSON
        // (`{every: 16}`, `keepAlive`), and errors name the path (`responses[0].split`).
        let value: serde_json::Value = match format {
            Format::Json => serde_json::from_str(text).map_err(|e| e.to_string()),
            Format::Yaml => yaml_serde::from_str(text).map_err(|e| e.to_string()),
        }
        .map_err(parse_error)?;
        let spec: ScenarioSpec = serde_path_to_error::deserialize(value)
            .map_err(|err| parse_error(format!("{}: {}", err.path(), err.inner())))?;
        let mut replies = Vec::new();
        for (index, response) in spec.responses.into_iter().enumerate() {
            let times = response.times.unwrap_or(1);
            let reply = response
                .into_reply(base_dir)
                .map_err(|source| ScenarioError::Invalid { index, source })?;
            for _ in 0..times {
                replies.push(reply.clone());
            }
        }
        Ok(Self {
            repeat: spec.repeat,
            require_api_key: spec.require_api_key,
            validate_requests: spec.validate_requests,
            replies,
        })
    }

    /// Configures `server` with this scenario (queues the replies, sets the options).
    pub fn apply(&self, server: &MockServer) {
        server.push_all(self.replies.iter().cloned());
        server.set_repeat(self.repeat);
        server.validate_requests(self.validate_requests);
        if let Some(key) = &self.require_api_key {
            server.require_api_key(key.clone());
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScenarioSpec {
    #[serde(default)]
    repeat: bool,
    #[serde(default)]
    require_api_key: Option<String>,
    #[serde(default)]
    validate_requests: bool,
    responses: Vec<ResponseSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ResponseSpec {
    completion: Option<CompletionSpec>,
    error: Option<ErrorSpec>,
    sse_file: Option<String>,
    raw: Option<RawSpec>,
    split: Option<SplitSpec>,
    write_delay_ms: Option<u64>,
    delay_head_ms: Option<u64>,
    terminator_delay_ms: Option<u64>,
    times: Option<usize>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
enum SplitSpec {
    Whole,
    PerEvent,
    Every(usize),
    Sizes(Vec<usize>),
    Random {
        #[serde(default)]
        seed: u64,
        max: usize,
    },
}

impl SplitSpec {
    fn to_split(&self) -> Split {
        match self {
            SplitSpec::Whole => Split::Whole,
            SplitSpec::PerEvent => Split::PerEvent,
            SplitSpec::Every(n) => Split::Every(*n),
            SplitSpec::Sizes(sizes) => Split::Sizes(sizes.clone()),
            SplitSpec::Random { seed, max } => Split::Random {
                seed: *seed,
                max: *max,
            },
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CompletionSpec {
    thinking: Option<bool>,
    #[serde(default)]
    keep_alives: usize,
    reasoning: Option<String>,
    text: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallSpec>,
    usage: Option<UsageSpec>,
    finish: Option<String>,
    #[serde(default)]
    chars_per_delta: usize,
    #[serde(default)]
    no_done: bool,
    usage_placement: Option<PlacementSpec>,
    model: Option<String>,
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ToolCallSpec {
    name: String,
    arguments: String,
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct UsageSpec {
    prompt_tokens: u64,
    completion_tokens: u64,
    #[serde(default)]
    cache_hit_tokens: u64,
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
enum PlacementSpec {
    FinishChunk,
    TrailingEmptyChoices,
    TrailingNullChoices,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ErrorSpec {
    kind: Option<ErrorKind>,
    status: Option<u16>,
    message: Option<String>,
    #[serde(rename = "type")]
    error_type: Option<String>,
    code: Option<String>,
    retry_after: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase")]
enum ErrorKind {
    Unauthorized,
    InsufficientBalance,
    RateLimited,
    ContextExceeded,
    ReasoningNotPassedBack,
    ServerError,
    Overloaded,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSpec {
    #[serde(default = "default_status")]
    status: u16,
    #[serde(default)]
    headers: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    content_length: bool,
    #[serde(default)]
    sse_headers: bool,
    #[serde(default)]
    steps: Vec<StepSpec>,
}

fn default_status() -> u16 {
    200
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
enum StepSpec {
    /// One write of this UTF-8 text.
    Bytes(String),
    /// A file's bytes, one write (or split).
    File(String),
    /// Text or file content split into writes.
    Chunks {
        text: Option<String>,
        file: Option<String>,
        split: SplitSpec,
    },
    SleepMs(u64),
    KeepAlive,
    KeepAliveEveryMs(u64),
    Reset,
    Stall,
}

fn read_file(base: &Path, file: &str) -> Result<Bytes, ResponseError> {
    let path = base.join(file);
    std::fs::read(&path)
        .map(Bytes::from)
        .map_err(|source| ResponseError::ReadFile { path, source })
}

impl ResponseSpec {
    fn into_reply(self, base: &Path) -> Result<Reply, ResponseError> {
        let given = [
            self.completion.is_some(),
            self.error.is_some(),
            self.sse_file.is_some(),
            self.raw.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if given != 1 {
            return Err(ResponseError::NotOneKind);
        }
        let split = self.split.as_ref().map(SplitSpec::to_split);
        let mut reply = if let Some(spec) = self.completion {
            let bytes = spec.into_completion().to_bytes();
            Reply::sse().split(bytes, split.as_ref().unwrap_or(&Split::Whole))
        } else if let Some(file) = &self.sse_file {
            let bytes = read_file(base, file)?;
            Reply::sse().split(bytes, split.as_ref().unwrap_or(&Split::Whole))
        } else if let Some(err) = self.error {
            if split.is_some() {
                return Err(ResponseError::SplitOnError);
            }
            err.into_reply()?
        } else if let Some(raw) = self.raw {
            if split.is_some() {
                return Err(ResponseError::SplitOnRaw);
            }
            raw.into_reply(base)?
        } else {
            return Err(ResponseError::NotOneKind);
        };
        if let Some(ms) = self.write_delay_ms.filter(|ms| *ms > 0) {
            reply = interleave_delay(reply, Duration::from_millis(ms));
        }
        if let Some(ms) = self.delay_head_ms.filter(|ms| *ms > 0) {
            reply = reply.delay_head(Duration::from_millis(ms));
        }
        if let Some(ms) = self.terminator_delay_ms.filter(|ms| *ms > 0) {
            reply = reply.terminator_after(Duration::from_millis(ms));
        }
        Ok(reply)
    }
}

/// Inserts a pause before every write after the first.
fn interleave_delay(mut reply: Reply, delay: Duration) -> Reply {
    let mut steps = Vec::with_capacity(reply.body.len() * 2);
    let mut first = true;
    for step in std::mem::take(&mut reply.body) {
        if matches!(step, Step::Bytes(_)) {
            if !first {
                steps.push(Step::Sleep(delay));
            }
            first = false;
        }
        steps.push(step);
    }
    reply.body = steps;
    reply
}

impl CompletionSpec {
    fn into_completion(self) -> Completion {
        let mut c = Completion::new()
            .keep_alives(self.keep_alives)
            .chars_per_delta(self.chars_per_delta);
        if let Some(thinking) = self.thinking {
            c = c.thinking(thinking);
        }
        if let Some(model) = self.model {
            c = c.model(model);
        }
        if let Some(id) = self.id {
            c = c.id(id);
        }
        if let Some(reasoning) = &self.reasoning {
            c = c.reasoning(reasoning);
        }
        if let Some(text) = &self.text {
            c = c.text(text);
        }
        for call in &self.tool_calls {
            c = match &call.id {
                Some(id) => c.tool_call_with_id(id, &call.name, &call.arguments),
                None => c.tool_call(&call.name, &call.arguments),
            };
        }
        if let Some(u) = self.usage {
            let mut usage =
                Usage::new(u.prompt_tokens, u.completion_tokens).cache_hit(u.cache_hit_tokens);
            if let Some(r) = u.reasoning_tokens {
                usage = usage.reasoning(r);
            }
            c = c.usage(usage);
        }
        if let Some(finish) = &self.finish {
            c = c.finish(finish);
        }
        if self.no_done {
            c = c.no_done();
        }
        if let Some(p) = self.usage_placement {
            c = c.usage_placement(match p {
                PlacementSpec::FinishChunk => UsagePlacement::FinishChunk,
                PlacementSpec::TrailingEmptyChoices => UsagePlacement::TrailingEmptyChoices,
                PlacementSpec::TrailingNullChoices => UsagePlacement::TrailingNullChoices,
            });
        }
        c
    }
}

impl ErrorSpec {
    fn into_reply(self) -> Result<Reply, ResponseError> {
        let reply = match self.kind {
            Some(kind) => {
                if self.status.is_some() || self.message.is_some() {
                    return Err(ResponseError::KindWithStatus);
                }
                match kind {
                    ErrorKind::Unauthorized => deepseek::unauthorized(),
                    ErrorKind::InsufficientBalance => deepseek::insufficient_balance(),
                    ErrorKind::RateLimited => deepseek::rate_limited(None),
                    ErrorKind::ContextExceeded => deepseek::context_exceeded(),
                    ErrorKind::ReasoningNotPassedBack => deepseek::reasoning_not_passed_back(),
                    ErrorKind::ServerError => deepseek::server_error(),
                    ErrorKind::Overloaded => deepseek::overloaded(),
                }
            }
            None => {
                let Some(status) = self.status else {
                    return Err(ResponseError::NoKindOrStatus);
                };
                if !(100..=999).contains(&status) {
                    return Err(ResponseError::InvalidStatus(status));
                }
                deepseek::error_reply(
                    status,
                    self.message.as_deref().unwrap_or("error"),
                    self.error_type
                        .as_deref()
                        .unwrap_or("invalid_request_error"),
                    self.code.as_deref().unwrap_or("invalid_request_error"),
                )
            }
        };
        Ok(match self.retry_after {
            Some(value) => reply.header("retry-after", value),
            None => reply,
        })
    }
}

impl RawSpec {
    fn into_reply(self, base: &Path) -> Result<Reply, ResponseError> {
        if !(100..=999).contains(&self.status) {
            return Err(ResponseError::InvalidStatus(self.status));
        }
        let mut reply = if self.sse_headers {
            Reply::sse()
        } else {
            Reply::status(self.status)
        };
        reply.status = self.status;
        for (name, value) in self.headers {
            let serde_json::Value::String(value) = value else {
                return Err(ResponseError::HeaderNotString(name));
            };
            reply = reply.header(name, value);
        }
        if self.content_length {
            reply = reply.content_length();
        }
        for step in self.steps {
            reply = match step {
                StepSpec::Bytes(text) => reply.bytes(text),
                StepSpec::File(file) => reply.bytes(read_file(base, &file)?),
                StepSpec::Chunks { text, file, split } => {
                    let bytes = match (text, file) {
                        (Some(text), None) => Bytes::from(text),
                        (None, Some(file)) => read_file(base, &file)?,
                        _ => return Err(ResponseError::ChunksSource),
                    };
                    reply.split(bytes, &split.to_split())
                }
                StepSpec::SleepMs(ms) => reply.sleep(Duration::from_millis(ms)),
                StepSpec::KeepAlive => reply.keep_alive(),
                StepSpec::KeepAliveEveryMs(ms) => {
                    reply.keep_alive_every(Duration::from_millis(ms.max(1)))
                }
                StepSpec::Reset => reply.reset(),
                StepSpec::Stall => reply.stall(),
            };
        }
        Ok(reply)
    }
}
