//! `dsh mcp list | add | remove`, and the composition layers made of the `mcpServers` JSON
//! files (`$DSH_HOME/mcp.json`, then `.mcp.json` at the project root: the nearest ancestor of
//! the working directory holding `.git`).

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::Subcommand;
use dsh_kernel::Layer;
use dsh_kernel::Plugin as _;
use dsh_mcp_client::json_config::{self, JsonServer};
use dsh_mcp_client::{McpClientPlugin, McpServerConfig, ServerInfo};

use crate::compose::{compose, registry};
use crate::config_cmd::write_stdout;
use crate::home;
use crate::{ComposeArgs, Failure};

#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// Start every configured MCP server once and print its state, tool count and last error.
    List {
        #[command(flatten)]
        compose: ComposeArgs,
    },
    /// Add a server to $DSH_HOME/mcp.json: `dsh mcp add NAME -- CMD ARGS…` (stdio) or
    /// `dsh mcp add --http NAME URL` (streamable HTTP).
    Add {
        /// A streamable-HTTP server: the one argument after NAME is its URL.
        #[arg(long)]
        http: bool,
        /// An environment variable for a stdio server (repeatable; values may use ${VAR}).
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// A request header for an HTTP server (repeatable).
        #[arg(long = "header", value_name = "NAME: VALUE")]
        header: Vec<String>,
        /// The server name ([A-Za-z0-9_-]{1,32}): its tools are mcp__NAME__<tool>.
        name: String,
        /// The command and its arguments (after `--`), or the URL with --http.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        rest: Vec<String>,
    },
    /// Remove a server from $DSH_HOME/mcp.json.
    Remove {
        /// The server name.
        name: String,
    },
}

/// `$DSH_HOME/mcp.json`, the file `dsh mcp add|remove` edits.
pub(crate) fn user_file() -> PathBuf {
    home::dsh_home().join("mcp.json")
}

/// `.mcp.json` at the root of the project of `dir` (default: the current directory): the
/// nearest ancestor holding `.git`, else `dir` itself (as Claude Code reads it).
fn project_file(dir: Option<&Path>) -> PathBuf {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
    };
    dsh_context::project::project_root(&dir, &[".git".to_owned()]).join(".mcp.json")
}

/// The layer of one JSON file: a row `mcp-<name>` of plugin `mcp-client` per server (none when
/// the file does not exist).
fn file_layer(path: &Path) -> Result<Option<Layer>, Failure> {
    let servers = json_config::load(path).map_err(|e| Failure::usage(anyhow!(e)))?;
    if servers.is_empty() {
        return Ok(None);
    }
    let rows: Vec<serde_json::Value> = servers
        .iter()
        .map(|s| {
            serde_json::json!({
                "id": format!("mcp-{}", s.server_name),
                "name": McpClientPlugin::NAME,
                "group": "mcp",
                "config": s,
            })
        })
        .collect();
    let text = serde_json::json!({ "plugins": rows }).to_string();
    Layer::parse(path.display().to_string(), &text)
        .map(Some)
        .map_err(Failure::usage)
}

/// The layers of the user's and the project's `mcpServers` files, in that order (a project
/// server replaces a user server of the same name).
pub(crate) fn layers(project_dir: Option<&Path>) -> Result<Vec<Layer>, Failure> {
    let mut out = Vec::new();
    for path in [user_file(), project_file(project_dir)] {
        if let Some(layer) = file_layer(&path)? {
            out.push(layer);
        }
    }
    Ok(out)
}

/// With a `sandbox` row mounted, every MCP server row waits for its service before spawning
/// (`sandboxRequired`): rows activate concurrently, and a server must never start unconfined
/// because it was quicker than the sandbox.
pub(crate) fn require_sandbox(composition: &mut dsh_kernel::Composition) {
    if !composition.rows.iter().any(|r| r.row.name == "sandbox") {
        return;
    }
    for r in composition
        .rows
        .iter_mut()
        .filter(|r| r.row.name == McpClientPlugin::NAME)
    {
        if let Some(config) = r.row.config.as_object_mut() {
            config.insert("sandboxRequired".to_owned(), serde_json::Value::Bool(true));
        }
    }
}

pub(crate) fn run(cmd: McpCommand) -> Result<u8, Failure> {
    match cmd {
        McpCommand::List { compose } => list(&compose),
        McpCommand::Add {
            http,
            env,
            header,
            name,
            rest,
        } => add(http, env, header, name, rest),
        McpCommand::Remove { name } => remove(&name),
    }
}

fn list(args: &ComposeArgs) -> Result<u8, Failure> {
    let registry = registry();
    let composition = compose(args, None, &registry)?;
    let mut configs: Vec<(String, McpServerConfig)> = Vec::new();
    for r in &composition.rows {
        if r.row.name != McpClientPlugin::NAME {
            continue;
        }
        let config: McpServerConfig = serde_json::from_value(r.row.config.clone())
            .map_err(|e| Failure::usage(anyhow!("{}: row {}: {e}", r.source, r.row.id)))?;
        configs.push((r.source.clone(), config));
    }
    if configs.is_empty() {
        return write_stdout(
            "No MCP servers configured (add one with `dsh mcp add NAME -- CMD ARGS…`).\n",
        );
    }
    let runtime = crate::runtime()?;
    let infos: Vec<ServerInfo> = runtime.block_on(futures::future::join_all(
        configs
            .iter()
            .map(|(_, c)| dsh_mcp_client::probe(c.clone())),
    ));
    let mut out = String::new();
    for ((source, config), info) in configs.iter().zip(infos) {
        let target = match (&config.command, &config.url) {
            (Some(c), _) => std::iter::once(c.as_str())
                .chain(config.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            (None, Some(u)) => u.clone(),
            (None, None) => String::new(),
        };
        out.push_str(&format!(
            "{}\t{}\t{} tools\t{}\t{}\t(from {})\n",
            info.name,
            info.status.word(),
            info.tools,
            config.transport.as_str(),
            target,
            source
        ));
        if let Some(e) = info.last_error {
            out.push_str(&format!("  last error: {e}\n"));
        }
    }
    write_stdout(&out)
}

fn add(
    http: bool,
    env: Vec<String>,
    header: Vec<String>,
    name: String,
    rest: Vec<String>,
) -> Result<u8, Failure> {
    let mut entry = JsonServer::default();
    if http {
        let [url] = rest.as_slice() else {
            return Err(Failure::usage(anyhow!(
                "dsh mcp add --http NAME URL takes exactly one URL (got {})",
                rest.len()
            )));
        };
        if !env.is_empty() {
            return Err(Failure::usage(anyhow!(
                "--env applies to stdio servers only"
            )));
        }
        entry.kind = Some("http".into());
        entry.url = Some(url.clone());
        for h in header {
            let Some((k, v)) = h.split_once(':') else {
                return Err(Failure::usage(anyhow!(
                    "--header {h:?}: expected \"NAME: VALUE\""
                )));
            };
            entry
                .headers
                .insert(k.trim().to_owned(), v.trim().to_owned());
        }
    } else {
        if !header.is_empty() {
            return Err(Failure::usage(anyhow!(
                "--header applies to --http servers only"
            )));
        }
        let mut it = rest.into_iter();
        entry.command = it.next();
        entry.args = it.collect();
        for e in env {
            let Some((k, v)) = e.split_once('=') else {
                return Err(Failure::usage(anyhow!("--env {e:?}: expected NAME=VALUE")));
            };
            entry.env.insert(k.to_owned(), v.to_owned());
        }
    }
    let path = user_file();
    json_config::add(&path, &name, &entry).map_err(|e| Failure::usage(anyhow!(e)))?;
    write_stdout(&format!("Added MCP server {name} to {}.\n", path.display()))
}

fn remove(name: &str) -> Result<u8, Failure> {
    let path = user_file();
    match json_config::remove(&path, name) {
        Ok(true) => write_stdout(&format!(
            "Removed MCP server {name} from {}.\n",
            path.display()
        )),
        Ok(false) => Err(Failure::usage(anyhow!(
            "no MCP server {name:?} in {}",
            path.display()
        ))),
        Err(e) => Err(Failure::usage(anyhow!(e))),
    }
}
