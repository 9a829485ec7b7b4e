//! The de-facto `mcpServers` JSON (Claude Code's `.mcp.json`, `$DSH_HOME/mcp.json`): reading
//! it into [`McpServerConfig`]s with `${VAR}` / `${VAR:-default}` expansion, and editing it.
//!
//! ```json
//! {"mcpServers": {
//!   "fs":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}"],
//!           "env": {"LOG": "1"}},
//!   "web": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
//! }}
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::{ConfigError, McpServerConfig, TransportKind};
use crate::names::valid_server_name;

/// A file that cannot be read, parsed or written.
#[derive(Debug, thiserror::Error)]
pub enum JsonConfigError {
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not JSON, or not the expected shape.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with where.
        message: String,
    },
}

/// One entry of `mcpServers`, as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct JsonServer {
    /// `stdio` (default when `command` is set), `http` or `streamable-http`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// stdio: the program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: extra environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// stdio: working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// http: the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// http: extra headers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// What is wrong with one `mcpServers` entry (`at` names the field).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// `${` without its `}`.
    #[error("{at}: unterminated \"${{\" in {text:?}")]
    Unterminated {
        /// The field.
        at: String,
        /// Its text.
        text: String,
    },
    /// `${}` or `${:-d}`.
    #[error("{at}: empty variable name in {text:?}")]
    EmptyName {
        /// The field.
        at: String,
        /// Its text.
        text: String,
    },
    /// A variable without a default that is not set.
    #[error(
        "{at}: environment variable {name} is not set (write ${{{name}:-default}} for a default)"
    )]
    Unset {
        /// The field.
        at: String,
        /// The variable.
        name: String,
    },
    /// A server name outside `[A-Za-z0-9_-]{1,32}`.
    #[error("mcpServers.{0}: a server name must match [A-Za-z0-9_-]{{1,32}}")]
    BadName(String),
    /// A `type` other than stdio or http.
    #[error("{at}: transport {kind:?} is not supported (use \"stdio\" or \"http\")")]
    Transport {
        /// The field.
        at: String,
        /// The transport written.
        kind: String,
    },
    /// A stdio server without `command`.
    #[error("{0}: a stdio server needs a command")]
    NoCommand(String),
    /// An http server without `url`.
    #[error("{0}: an http server needs a url")]
    NoUrl(String),
    /// The resulting config is invalid.
    #[error("mcpServers.{name}: {source}")]
    Invalid {
        /// The server.
        name: String,
        /// Why.
        #[source]
        source: ConfigError,
    },
}

/// Expands `${VAR}` and `${VAR:-default}` in `text` with `lookup`; `at` names the field in
/// the error.
pub fn expand(
    text: &str,
    at: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, EntryError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(EntryError::Unterminated {
                at: at.to_owned(),
                text: text.to_owned(),
            });
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if name.is_empty() {
            return Err(EntryError::EmptyName {
                at: at.to_owned(),
                text: text.to_owned(),
            });
        }
        match (lookup(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(EntryError::Unset {
                    at: at.to_owned(),
                    name: name.to_owned(),
                });
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The entries of `mcpServers` in file order (an absent key: none).
fn entries(path: &Path, root: &Value) -> Result<Vec<(String, Value)>, JsonConfigError> {
    let invalid = |message: String| JsonConfigError::Invalid {
        path: path.to_owned(),
        message,
    };
    let Some(obj) = root.as_object() else {
        return Err(invalid("the file must hold a JSON object".into()));
    };
    match obj.get("mcpServers") {
        None => Ok(Vec::new()),
        Some(Value::Object(m)) => Ok(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        Some(_) => Err(invalid("mcpServers must be an object of servers".into())),
    }
}

/// Converts one entry to a plugin config, expanding variables with `lookup`.
pub fn to_config(
    name: &str,
    entry: &JsonServer,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<McpServerConfig, EntryError> {
    if !valid_server_name(name) {
        return Err(EntryError::BadName(name.to_owned()));
    }
    let at = |field: &str| format!("mcpServers.{name}.{field}");
    let kind = match entry.kind.as_deref() {
        None if entry.url.is_some() && entry.command.is_none() => TransportKind::StreamableHttp,
        None | Some("stdio") => TransportKind::Stdio,
        Some("http" | "streamable-http") => TransportKind::StreamableHttp,
        Some(other) => {
            return Err(EntryError::Transport {
                at: at("type"),
                kind: other.to_owned(),
            });
        }
    };
    let mut config = match kind {
        TransportKind::Stdio => {
            let command = entry
                .command
                .as_deref()
                .ok_or_else(|| EntryError::NoCommand(at("command")))?;
            let command = expand(command, &at("command"), lookup)?;
            let args = entry
                .args
                .iter()
                .enumerate()
                .map(|(i, a)| expand(a, &at(&format!("args[{i}]")), lookup))
                .collect::<Result<Vec<_>, _>>()?;
            McpServerConfig::stdio(name, command, args)
        }
        TransportKind::StreamableHttp => {
            let url = entry
                .url
                .as_deref()
                .ok_or_else(|| EntryError::NoUrl(at("url")))?;
            McpServerConfig::http(name, expand(url, &at("url"), lookup)?)
        }
    };
    for (k, v) in &entry.env {
        config
            .env
            .insert(k.clone(), expand(v, &at(&format!("env.{k}")), lookup)?);
    }
    for (k, v) in &entry.headers {
        config
            .headers
            .insert(k.clone(), expand(v, &at(&format!("headers.{k}")), lookup)?);
    }
    if let Some(cwd) = &entry.cwd {
        config.cwd = Some(PathBuf::from(expand(cwd, &at("cwd"), lookup)?));
    }
    config.validate().map_err(|source| EntryError::Invalid {
        name: name.to_owned(),
        source,
    })?;
    Ok(config)
}

fn read_root(path: &Path) -> Result<Option<Value>, JsonConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(JsonConfigError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| JsonConfigError::Invalid {
            path: path.to_owned(),
            message: format!("not valid JSON: {e}"),
        })
}

/// The servers of the file at `path` (none when it does not exist), variables expanded from
/// the process environment.
pub fn load(path: &Path) -> Result<Vec<McpServerConfig>, JsonConfigError> {
    load_with(path, &|n| std::env::var(n).ok())
}

/// [`load`] with an explicit variable lookup.
pub fn load_with(
    path: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<McpServerConfig>, JsonConfigError> {
    let Some(root) = read_root(path)? else {
        return Ok(Vec::new());
    };
    let invalid = |message: String| JsonConfigError::Invalid {
        path: path.to_owned(),
        message,
    };
    entries(path, &root)?
        .into_iter()
        .map(|(name, v)| {
            let entry: JsonServer = serde_json::from_value(v)
                .map_err(|e| invalid(format!("mcpServers.{name}: {e}")))?;
            to_config(&name, &entry, lookup).map_err(|e| invalid(e.to_string()))
        })
        .collect()
}

/// Adds (or replaces) `name` in the file at `path`, keeping everything else in it.
pub fn add(path: &Path, name: &str, entry: &JsonServer) -> Result<(), JsonConfigError> {
    let invalid = |message: String| JsonConfigError::Invalid {
        path: path.to_owned(),
        message,
    };
    // Checked without expansion: variables are resolved when the file is read.
    to_config(name, entry, &|_| Some(String::new())).map_err(|e| invalid(e.to_string()))?;
    let mut root = read_root(path)?.unwrap_or_else(|| Value::Object(Map::new()));
    entries(path, &root)?;
    let value = serde_json::to_value(entry).map_err(|e| invalid(e.to_string()))?;
    if let Some(obj) = root.as_object_mut() {
        let servers = obj
            .entry("mcpServers")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(m) = servers.as_object_mut() {
            m.insert(name.to_owned(), value);
        }
    }
    write(path, &root)
}

/// Removes `name` from the file at `path`; `false` when it was not there.
pub fn remove(path: &Path, name: &str) -> Result<bool, JsonConfigError> {
    let Some(mut root) = read_root(path)? else {
        return Ok(false);
    };
    entries(path, &root)?;
    let removed = root
        .get_mut("mcpServers")
        .and_then(Value::as_object_mut)
        .and_then(|m| m.shift_remove(name))
        .is_some();
    if removed {
        write(path, &root)?;
    }
    Ok(removed)
}

fn write(path: &Path, root: &Value) -> Result<(), JsonConfigError> {
    let io = |source| JsonConfigError::Io {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut text = serde_json::to_string_pretty(root).map_err(|e| JsonConfigError::Invalid {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    text.push('\n');
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(n: &str) -> Option<String> {
        match n {
            "HOME" => Some("/home/u".into()),
            "TOKEN" => Some("t0k".into()),
            _ => None,
        }
    }

    #[test]
    fn expansion() {
        assert_eq!(expand("${HOME}/x", "a", &vars), Ok("/home/u/x".into()));
        assert_eq!(
            expand("${NOPE:-d}-${TOKEN}", "a", &vars),
            Ok("d-t0k".into())
        );
        assert_eq!(expand("plain $HOME", "a", &vars), Ok("plain $HOME".into()));
        assert_eq!(
            expand("${NOPE}", "mcpServers.x.args[0]", &vars).map_err(|e| e.to_string()),
            Err("mcpServers.x.args[0]: environment variable NOPE is not set (write ${NOPE:-default} for a default)".into())
        );
        assert!(
            expand("${HOME", "a", &vars)
                .unwrap_err()
                .to_string()
                .contains("unterminated")
        );
    }

    #[test]
    fn files_load_add_and_remove() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        assert_eq!(load_with(&path, &vars).unwrap(), Vec::new());
        std::fs::write(
            &path,
            r#"{"other": 1, "mcpServers": {
                "fs": {"command": "srv", "args": ["${HOME}"], "env": {"A": "${TOKEN}"}},
                "web": {"type": "http", "url": "http://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
            }}"#,
        )
        .unwrap();
        let servers = load_with(&path, &vars).unwrap();
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[0].args, ["/home/u"]);
        assert_eq!(servers[0].env["A"], "t0k");
        assert_eq!(servers[1].transport, TransportKind::StreamableHttp);
        assert_eq!(servers[1].headers["Authorization"], "Bearer t0k");

        let entry = JsonServer {
            command: Some("new".into()),
            ..JsonServer::default()
        };
        add(&path, "new", &entry).unwrap();
        assert_eq!(load_with(&path, &vars).unwrap().len(), 3);
        assert!(remove(&path, "fs").unwrap());
        assert!(!remove(&path, "fs").unwrap());
        let root: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(root["other"], 1);
        let names: Vec<&String> = root["mcpServers"].as_object().unwrap().keys().collect();
        assert_eq!(names, ["web", "new"]);
    }

    #[test]
    fn bad_entries_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        std::fs::write(
            &path,
            r#"{"mcpServers": {"s": {"type": "sse", "url": "x"}}}"#,
        )
        .unwrap();
        let e = load_with(&path, &vars).unwrap_err().to_string();
        assert!(
            e.ends_with(r#"mcp.json: mcpServers.s.type: transport "sse" is not supported (use "stdio" or "http")"#),
            "{e}"
        );
        std::fs::write(
            &path,
            r#"{"mcpServers": {"s": {"command": "x", "bogus": 1}}}"#,
        )
        .unwrap();
        let e = load_with(&path, &vars).unwrap_err().to_string();
        assert!(e.contains("mcpServers.s: unknown field `bogus`"), "{e}");
        std::fs::write(&path, "{nope").unwrap();
        assert!(
            load_with(&path, &vars)
                .unwrap_err()
                .to_string()
                .contains("not valid JSON")
        );
        let bad = JsonServer::default();
        assert!(add(&path, "bad name", &bad).is_err());
    }
}
