//! Hook files in both dialects: where they are, their shape, matchers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;
use serde_json::Value;

use dsh_context_api::ProjectPaths;

/// Which harness's conventions a file follows (payload details, plain-stdout handling).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Claude Code: `.claude/settings*.json`, dsh's own `hooks.json` files.
    ClaudeCode,
    /// Codex: `.codex/hooks.json`.
    Codex,
}

impl Dialect {
    /// `claude-code` / `codex` (handler ids `<dialect>:<Event>:<n>`).
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::ClaudeCode => "claude-code",
            Dialect::Codex => "codex",
        }
    }

    /// The `source.kind` of messages this dialect's hooks inject.
    pub fn source_kind(self) -> &'static str {
        match self {
            Dialect::ClaudeCode => "hooks-claude-code",
            Dialect::Codex => "hooks-codex",
        }
    }
}

/// The hook events dsh runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HookEvent {
    /// The first step of an agent in this process (startup or resume).
    SessionStart,
    /// A prompt is about to be sent.
    UserPromptSubmit,
    /// Before a tool call runs.
    PreToolUse,
    /// After a tool call succeeded.
    PostToolUse,
    /// The turn is about to end.
    Stop,
    /// A sub-agent's first step (its context goes into the child).
    SubagentStart,
    /// A sub-agent's turn is about to end (a block gives it one more step, with the Stop
    /// loop guard).
    SubagentStop,
}

impl HookEvent {
    /// Every event, in file order.
    pub const ALL: [HookEvent; 7] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
    ];

    /// The name in hook files and `hook_event_name`.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStop => "SubagentStop",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// Whether `dialect`'s files may use it (Codex has no sub-agent events).
    fn in_dialect(self, dialect: Dialect) -> bool {
        dialect == Dialect::ClaudeCode
            || !matches!(self, HookEvent::SubagentStart | HookEvent::SubagentStop)
    }
}

/// What a group's `matcher` selects.
#[derive(Clone, Debug)]
pub enum Matcher {
    /// Absent, `""` or `*`.
    All,
    /// Claude Code's `Name|Other` form: exact names.
    Names(Vec<String>),
    /// A regular expression, unanchored.
    Regex(Regex),
}

/// Why a hook file is ignored.
#[derive(Clone, Debug, thiserror::Error)]
pub enum HookFileError {
    /// Not JSON.
    #[error("not valid JSON: {0}")]
    Json(#[source] std::sync::Arc<serde_json::Error>),
    /// `hooks` is not an object.
    #[error("`hooks` must be an object of events")]
    HooksNotObject,
    /// An event's groups are not an array.
    #[error("`hooks.{0}` must be an array")]
    GroupsNotArray(String),
    /// A matcher that is not a valid regular expression.
    #[error("invalid matcher regex `{raw}`: {source}")]
    Matcher {
        /// The matcher as written.
        raw: String,
        /// The regex error.
        #[source]
        source: regex::Error,
    },
    /// A command handler without `command`.
    #[error("a `{0}` handler has no `command`")]
    NoCommand(String),
    /// A timeout that is not a positive number of seconds.
    #[error("`timeout` must be a positive number of seconds, not {0}")]
    Timeout(Value),
}

impl Matcher {
    fn parse(raw: Option<&str>, dialect: Dialect) -> Result<Self, HookFileError> {
        let raw = raw.unwrap_or("").trim();
        if raw.is_empty() || raw == "*" {
            return Ok(Matcher::All);
        }
        let plain = raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|');
        if dialect == Dialect::ClaudeCode && plain {
            return Ok(Matcher::Names(raw.split('|').map(str::to_owned).collect()));
        }
        Regex::new(raw)
            .map(Matcher::Regex)
            .map_err(|source| HookFileError::Matcher {
                raw: raw.to_owned(),
                source,
            })
    }

    /// Whether any of `names` (a tool's dsh name and its Claude Code alias, or a source) matches.
    pub fn matches(&self, names: &[&str]) -> bool {
        match self {
            Matcher::All => true,
            Matcher::Names(list) => names.iter().any(|n| list.iter().any(|l| l == n)),
            Matcher::Regex(r) => names.iter().any(|n| r.is_match(n)),
        }
    }
}

/// One command handler.
#[derive(Clone, Debug)]
pub struct Handler {
    /// The shell command (`${CLAUDE_PROJECT_DIR}` already substituted).
    pub command: String,
    /// Its own timeout, if set.
    pub timeout: Option<Duration>,
    /// `<dialect>:<Event>:<n>`.
    pub id: String,
    /// Its group's matcher as written (`None`: matches everything).
    pub matcher: Option<String>,
}

/// A matcher and its handlers for one event.
#[derive(Clone, Debug)]
pub struct HookGroup {
    /// The event.
    pub event: HookEvent,
    /// What it selects.
    pub matcher: Matcher,
    /// Run serially, in order.
    pub handlers: Vec<Handler>,
}

/// One parsed hook file.
#[derive(Clone, Debug)]
pub struct HookFile {
    /// Its path.
    pub path: PathBuf,
    /// Its dialect.
    pub dialect: Dialect,
    /// Its groups in file order.
    pub groups: Vec<HookGroup>,
    /// Entries skipped (non-command handlers, events dsh does not run, `async`).
    pub skipped: Vec<String>,
}

/// Every hook file for one working directory.
#[derive(Clone, Debug, Default)]
pub struct HookSet {
    /// Files in run order.
    pub files: Vec<HookFile>,
    /// Files that could not be used, and why.
    pub problems: Vec<(PathBuf, HookFileError)>,
}

impl HookSet {
    /// The handlers of `event` matching `names`, in run order, with their dialect.
    pub fn handlers(&self, event: HookEvent, names: &[&str]) -> Vec<(Dialect, &Handler)> {
        let mut out = Vec::new();
        for f in &self.files {
            for g in f.groups.iter().filter(|g| g.event == event) {
                if event == HookEvent::UserPromptSubmit
                    || event == HookEvent::Stop
                    || g.matcher.matches(names)
                {
                    out.extend(g.handlers.iter().map(|h| (f.dialect, h)));
                }
            }
        }
        out
    }
}

/// The hook files, in run order: `~/.claude/settings.json`, `<root>/.claude/settings.json`,
/// `<root>/.claude/settings.local.json`, `~/.codex/hooks.json`, `<root>/.codex/hooks.json`,
/// `$DSH_HOME/hooks.json`, `<root>/.dsh/hooks.json`, then `extra` (dsh's own dialect = Claude
/// Code's).
pub fn locations(paths: &ProjectPaths, extra: &[PathBuf]) -> Vec<(PathBuf, Dialect)> {
    let mut out = Vec::new();
    let root = &paths.root;
    if let Some(h) = &paths.user_home {
        out.push((h.join(".claude/settings.json"), Dialect::ClaudeCode));
    }
    out.push((root.join(".claude/settings.json"), Dialect::ClaudeCode));
    out.push((
        root.join(".claude/settings.local.json"),
        Dialect::ClaudeCode,
    ));
    if let Some(h) = &paths.user_home {
        out.push((h.join(".codex/hooks.json"), Dialect::Codex));
    }
    out.push((root.join(".codex/hooks.json"), Dialect::Codex));
    out.push((paths.dsh_home.join("hooks.json"), Dialect::ClaudeCode));
    out.push((root.join(".dsh/hooks.json"), Dialect::ClaudeCode));
    for e in extra {
        let p = if e.is_absolute() {
            e.clone()
        } else {
            root.join(e)
        };
        out.push((p, Dialect::ClaudeCode));
    }
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// Loads every file of [`locations`] that exists. A file that cannot be parsed (bad JSON, an
/// invalid regex) contributes no hooks and is reported.
pub fn load(paths: &ProjectPaths, extra: &[PathBuf]) -> HookSet {
    let mut set = HookSet::default();
    for (path, dialect) in locations(paths, extra) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        match parse_file(&path, &text, dialect, &paths.root) {
            Ok(Some(f)) => set.files.push(f),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(file = %path.display(), "hook file ignored: {e}");
                set.problems.push((path, e));
            }
        }
    }
    set
}

fn timeout_of(h: &Value) -> Result<Option<Duration>, HookFileError> {
    let v = h.get("timeout").or_else(|| h.get("timeoutSec"));
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(s) if s > 0.0 && s.is_finite() => Ok(Some(Duration::from_secs_f64(s))),
            _ => Err(HookFileError::Timeout(v.clone())),
        },
    }
}

/// Parses one file. `Ok(None)`: a settings file without `hooks`.
pub fn parse_file(
    path: &Path,
    text: &str,
    dialect: Dialect,
    project: &Path,
) -> Result<Option<HookFile>, HookFileError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| HookFileError::Json(std::sync::Arc::new(e)))?;
    let Some(hooks) = value.get("hooks") else {
        return Ok(None);
    };
    let hooks = hooks.as_object().ok_or(HookFileError::HooksNotObject)?;
    let mut file = HookFile {
        path: path.to_path_buf(),
        dialect,
        groups: Vec::new(),
        skipped: Vec::new(),
    };
    let project_dir = project.display().to_string();
    for (name, groups) in hooks {
        let Some(event) = HookEvent::parse(name).filter(|e| e.in_dialect(dialect)) else {
            file.skipped.push(format!("event {name} (not run by dsh)"));
            continue;
        };
        let groups = groups
            .as_array()
            .ok_or_else(|| HookFileError::GroupsNotArray(name.clone()))?;
        let mut n = 0;
        for g in groups {
            let raw_matcher = g
                .get("matcher")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|m| !m.is_empty() && *m != "*")
                .map(str::to_owned);
            let matcher = Matcher::parse(raw_matcher.as_deref(), dialect)?;
            let mut handlers = Vec::new();
            for h in g
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let kind = h.get("type").and_then(Value::as_str).unwrap_or("command");
                if kind != "command" {
                    file.skipped
                        .push(format!("{name}: `{kind}` handler (only commands run)"));
                    continue;
                }
                if h.get("async").and_then(Value::as_bool) == Some(true) {
                    file.skipped.push(format!("{name}: async handler"));
                    continue;
                }
                let Some(cmd) = h.get("command").and_then(Value::as_str) else {
                    return Err(HookFileError::NoCommand(name.clone()));
                };
                n += 1;
                handlers.push(Handler {
                    command: cmd
                        .replace("${CLAUDE_PROJECT_DIR}", &project_dir)
                        .replace("$CLAUDE_PROJECT_DIR", &project_dir),
                    timeout: timeout_of(h)?,
                    id: format!("{}:{name}:{n}", dialect.as_str()),
                    matcher: raw_matcher.clone(),
                });
            }
            file.groups.push(HookGroup {
                event,
                matcher,
                handlers,
            });
        }
    }
    Ok(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matchers_follow_each_dialect() {
        let m = Matcher::parse(Some("Bash|Edit"), Dialect::ClaudeCode).unwrap();
        assert!(m.matches(&["bash", "Bash"]));
        assert!(!m.matches(&["read", "Read"]));
        let r = Matcher::parse(Some("Ba"), Dialect::Codex).unwrap();
        assert!(r.matches(&["Bash"]), "codex: unanchored regex");
        let r = Matcher::parse(Some("^(Read|Grep)$"), Dialect::ClaudeCode).unwrap();
        assert!(r.matches(&["Grep"]));
        assert!(Matcher::parse(Some("("), Dialect::ClaudeCode).is_err());
        assert!(
            Matcher::parse(Some("*"), Dialect::Codex)
                .unwrap()
                .matches(&["x"])
        );
    }

    #[test]
    fn files_parse_with_timeouts_and_skips() {
        let text = r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[
            {"type":"command","command":"${CLAUDE_PROJECT_DIR}/h.sh","timeout":2},
            {"type":"prompt","prompt":"x"}]}],
            "Notification":[{"hooks":[{"type":"command","command":"x"}]}]}}"#;
        let f = parse_file(
            Path::new("s.json"),
            text,
            Dialect::ClaudeCode,
            Path::new("/p"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(f.groups.len(), 1);
        assert_eq!(f.groups[0].handlers[0].command, "/p/h.sh");
        assert_eq!(
            f.groups[0].handlers[0].timeout,
            Some(Duration::from_secs(2))
        );
        assert_eq!(f.groups[0].handlers[0].id, "claude-code:PreToolUse:1");
        assert_eq!(f.skipped.len(), 2);
        assert!(
            parse_file(Path::new("s"), "{}", Dialect::Codex, Path::new("/"))
                .unwrap()
                .is_none()
        );
        let bad = r#"{"hooks":{"Stop":[{"matcher":"(","hooks":[]}]}}"#;
        assert!(parse_file(Path::new("s"), bad, Dialect::Codex, Path::new("/")).is_err());
    }
}
