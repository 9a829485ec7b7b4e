//! Allow-always rules, per project, stored in `$DSH_HOME/permissions.json`.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use dsh_shell_parse::{Argv, simple_commands};

/// One stored permission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Rule {
    /// `bash`: every simple command of the line must start with one of the stored prefixes.
    CommandPrefix {
        /// The words the command starts with, e.g. `["cargo", "test"]`.
        prefix: Vec<String>,
    },
    /// A file tool (`write`, `edit`) on a path matching `glob`.
    PathGlob {
        /// The tool.
        tool: String,
        /// An absolute glob, e.g. `/work/proj/src/**`.
        glob: String,
    },
    /// A network tool (`web_fetch`) reaching `host` (a URL's host, lowercase; any scheme
    /// and port).
    Host {
        /// The tool.
        tool: String,
        /// The host name or IP literal, e.g. `docs.rs`.
        host: String,
    },
    /// Every call of a tool that has neither commands, paths nor hosts.
    Tool {
        /// The tool.
        tool: String,
    },
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::CommandPrefix { prefix } => write!(f, "bash: {} ...", prefix.join(" ")),
            Rule::PathGlob { tool, glob } => write!(f, "{tool}: {glob}"),
            Rule::Host { tool, host } => write!(f, "{tool}: host {host}"),
            Rule::Tool { tool } => write!(f, "{tool}: every call"),
        }
    }
}

/// Why the rules file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// Reading or writing it failed.
    #[error("{path}: {source}", path = path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// It is not a rules file; it is left as it is.
    #[error("{path} is not a valid permissions file ({source}); fix or remove it", path = path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: serde_json::Error,
    },
    /// `revoke` of a rule number that does not exist.
    #[error("no rule number {0} in this project (see `dsh permissions list`)")]
    NoSuchRule(usize),
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct RulesFile {
    version: u32,
    projects: BTreeMap<String, Vec<Rule>>,
}

/// The rules file.
#[derive(Clone, Debug)]
pub struct RuleStore {
    path: PathBuf,
}

impl RuleStore {
    /// The store at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// `$DSH_HOME/permissions.json`.
    pub fn in_home(home: &Path) -> Self {
        Self::new(home.join("permissions.json"))
    }

    /// Where the rules live.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn load(&self) -> Result<RulesFile, RulesError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => serde_json::from_str(&text).map_err(|source| RulesError::Invalid {
                path: self.path.clone(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(RulesFile::default()),
            Err(source) => Err(RulesError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }

    fn save(&self, file: &RulesFile) -> Result<(), RulesError> {
        let io = |source| RulesError::Io {
            path: self.path.clone(),
            source,
        };
        let text = serde_json::to_string_pretty(file).map_err(|e| io(std::io::Error::other(e)))?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = self
            .path
            .with_extension(format!("json.tmp-{}", std::process::id()));
        std::fs::write(&tmp, text + "\n").map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)
    }

    /// Every project with rules.
    pub fn projects(&self) -> Result<Vec<(String, Vec<Rule>)>, RulesError> {
        Ok(self.load()?.projects.into_iter().collect())
    }

    /// The rules of `project` (its working directory), in the order they were added.
    pub fn rules(&self, project: &Path) -> Result<Vec<Rule>, RulesError> {
        Ok(self
            .load()?
            .projects
            .remove(&key(project))
            .unwrap_or_default())
    }

    /// Adds `rule` to `project` (once).
    pub fn add(&self, project: &Path, rule: Rule) -> Result<(), RulesError> {
        let mut file = self.load()?;
        file.version = 1;
        let rules = file.projects.entry(key(project)).or_default();
        if !rules.contains(&rule) {
            rules.push(rule);
        }
        self.save(&file)
    }

    /// Removes rule number `index` (1-based, as listed) of `project`.
    pub fn revoke(&self, project: &Path, index: usize) -> Result<Rule, RulesError> {
        let mut file = self.load()?;
        let k = key(project);
        let rules = file
            .projects
            .get_mut(&k)
            .ok_or(RulesError::NoSuchRule(index))?;
        if index == 0 || index > rules.len() {
            return Err(RulesError::NoSuchRule(index));
        }
        let rule = rules.remove(index - 1);
        if rules.is_empty() {
            file.projects.remove(&k);
        }
        self.save(&file)?;
        Ok(rule)
    }
}

fn key(project: &Path) -> String {
    std::fs::canonicalize(project)
        .unwrap_or_else(|_| project.to_path_buf())
        .display()
        .to_string()
}

/// Judges calls against a project's rules.
#[derive(Debug, Default)]
pub struct RuleMatcher {
    prefixes: Vec<Vec<String>>,
    globs: Vec<(String, globset::GlobMatcher)>,
    hosts: Vec<(String, String)>,
    tools: Vec<String>,
}

impl RuleMatcher {
    /// A matcher for `rules` (an invalid glob is skipped with a warning).
    pub fn new(rules: &[Rule]) -> Self {
        let mut m = RuleMatcher::default();
        for rule in rules {
            match rule {
                Rule::CommandPrefix { prefix } if !prefix.is_empty() => {
                    m.prefixes.push(prefix.clone())
                }
                Rule::CommandPrefix { .. } => {}
                Rule::PathGlob { tool, glob } => match globset::GlobBuilder::new(glob)
                    .backslash_escape(true)
                    .build()
                {
                    Ok(g) => m.globs.push((tool.clone(), g.compile_matcher())),
                    Err(error) => tracing::warn!(%glob, %error, "permission rule skipped"),
                },
                Rule::Host { tool, host } => m.hosts.push((tool.clone(), host.clone())),
                Rule::Tool { tool } => m.tools.push(tool.clone()),
            }
        }
        m
    }

    /// Whether the rules allow this call of `tool` with `args` in `cwd`.
    pub fn allows(&self, tool: &str, args: &Value, cwd: &Path) -> bool {
        match subject(tool, args, cwd) {
            Subject::Commands(Ok(commands)) => commands.iter().all(|argv| {
                self.prefixes
                    .iter()
                    .any(|p| argv.len() >= p.len() && argv[..p.len()] == p[..])
            }),
            Subject::Commands(Err(_)) => false,
            Subject::Path(path) => self
                .globs
                .iter()
                .any(|(t, g)| t == tool && g.is_match(&path)),
            Subject::Host(Some(host)) => self.hosts.iter().any(|(t, h)| t == tool && *h == host),
            Subject::Host(None) => false,
            Subject::Tool => self.tools.iter().any(|t| t == tool),
        }
    }
}

/// What a rule of a call would be judged on.
enum Subject {
    Commands(Result<Vec<Argv>, dsh_shell_parse::Unjudgeable>),
    Path(PathBuf),
    /// The host a network tool reaches; `None` when the URL has none (never allowed by a rule).
    Host(Option<String>),
    Tool,
}

fn subject(tool: &str, args: &Value, cwd: &Path) -> Subject {
    match tool {
        "bash" => Subject::Commands(simple_commands(
            args.get("command").and_then(Value::as_str).unwrap_or(""),
        )),
        "write" | "edit" => match args.get("file_path").and_then(Value::as_str) {
            Some(p) => Subject::Path(normalize(&cwd.join(p))),
            None => Subject::Tool,
        },
        t if crate::plugin::NETWORK_TOOLS.contains(&t) => Subject::Host(url_host(args)),
        _ => Subject::Tool,
    }
}

/// The host of a `web_fetch` call's `url` (lowercase), if it parses as a URL with one.
pub fn url_host(args: &Value) -> Option<String> {
    let raw = args.get("url").and_then(Value::as_str)?.trim();
    let url = url::Url::parse(raw).ok()?;
    url.host_str()
        .filter(|h| !h.is_empty())
        .map(str::to_ascii_lowercase)
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The rules an "allow always" answer stores for this call: per simple command its name and,
/// when the next word is a subcommand (not an option or a path), that word; the parent
/// directory (recursively) for a file tool; the URL's host for `web_fetch`; the tool itself
/// otherwise. Empty when the command or URL cannot be judged (the answer then allows this call
/// once).
pub fn rules_for(tool: &str, args: &Value, cwd: &Path) -> Vec<Rule> {
    match subject(tool, args, cwd) {
        Subject::Commands(Ok(commands)) => {
            let mut out: Vec<Rule> = Vec::new();
            for argv in commands {
                let n = if argv.len() >= 2
                    && !argv[1].starts_with('-')
                    && !argv[1].contains('/')
                    && !argv[1].contains('.')
                {
                    2
                } else {
                    1
                };
                let rule = Rule::CommandPrefix {
                    prefix: argv[..n].to_vec(),
                };
                if !out.contains(&rule) {
                    out.push(rule);
                }
            }
            out
        }
        Subject::Commands(Err(_)) => Vec::new(),
        Subject::Path(path) => {
            let dir = path.parent().unwrap_or(Path::new("/"));
            // `globset::escape` leaves `\` alone, which the matcher (backslash escapes on)
            // reads as an escape: a directory named `a\b` stored a glob that did not match it.
            let escaped = globset::escape(&dir.display().to_string()).replace('\\', "\\\\");
            // The root's glob is `/**`, not `//**` (which matches nothing).
            vec![Rule::PathGlob {
                tool: tool.to_owned(),
                glob: format!("{}/**", escaped.trim_end_matches('/')),
            }]
        }
        Subject::Host(Some(host)) => vec![Rule::Host {
            tool: tool.to_owned(),
            host,
        }],
        Subject::Host(None) => Vec::new(),
        Subject::Tool => vec![Rule::Tool {
            tool: tool.to_owned(),
        }],
    }
}
