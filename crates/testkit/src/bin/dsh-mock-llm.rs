//! `dsh-mock-llm`: serves a scenario file (JSON or YAML) as a DeepSeek-shaped mock endpoint.
//!
//! Prints the base URL (one line) on stdout, logs one JSON line per request on stderr (or to
//! `--log FILE`), and runs until interrupted. See the crate README for the scenario format.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use dsh_testkit::MockServer;
use dsh_testkit::scenario::Scenario;

const USAGE: &str = "\
usage: dsh-mock-llm [OPTIONS] <SCENARIO>

Serves SCENARIO (a .json or .yaml file: a list of responses) on http://HOST:PORT/chat/completions
and /v1/chat/completions. Prints the base URL on stdout, then logs one JSON line per request.

options:
  --port N        listen on port N (default: 0, an ephemeral port)
  --host ADDR     listen address (default: 127.0.0.1)
  --log FILE      append request logs to FILE instead of stderr
  --log-bodies    include request bodies in the log lines
  --repeat        serve the responses in a loop (overrides the scenario's `repeat`)
  -h, --help      show this help";

struct Args {
    scenario: PathBuf,
    addr: SocketAddr,
    log: Option<PathBuf>,
    log_bodies: bool,
    repeat: bool,
}

/// A command line that cannot be used.
#[derive(Debug, thiserror::Error)]
enum ArgsError {
    /// An option without its value.
    #[error("{0} needs a value")]
    MissingValue(String),
    /// A value that does not parse.
    #[error("invalid {option} {value:?}")]
    Invalid {
        /// The option.
        option: &'static str,
        /// The value given.
        value: String,
    },
    /// An option this binary does not have.
    #[error("unknown option {0}")]
    Unknown(String),
    /// More than one scenario.
    #[error("only one scenario file may be given")]
    TwoScenarios,
    /// No scenario.
    #[error("missing <SCENARIO>")]
    NoScenario,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, ArgsError> {
    let mut scenario = None;
    let mut host: IpAddr = IpAddr::from([127, 0, 0, 1]);
    let mut port = 0u16;
    let mut log = None;
    let mut log_bodies = false;
    let mut repeat = false;
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| ArgsError::MissingValue(name.to_owned()))
        };
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--port" => {
                let v = value("--port")?;
                port = v.parse().map_err(|_| ArgsError::Invalid {
                    option: "--port",
                    value: v.clone(),
                })?;
            }
            "--host" => {
                let v = value("--host")?;
                host = v.parse().map_err(|_| ArgsError::Invalid {
                    option: "--host",
                    value: v.clone(),
                })?;
            }
            "--log" => log = Some(PathBuf::from(value("--log")?)),
            "--log-bodies" => log_bodies = true,
            "--repeat" => repeat = true,
            other if other.starts_with('-') => return Err(ArgsError::Unknown(other.to_owned())),
            other => {
                if scenario.replace(PathBuf::from(other)).is_some() {
                    return Err(ArgsError::TwoScenarios);
                }
            }
        }
    }
    let scenario = scenario.ok_or(ArgsError::NoScenario)?;
    Ok(Some(Args {
        scenario,
        addr: SocketAddr::new(host, port),
        log,
        log_bodies,
        repeat,
    }))
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "dsh-mock-llm: {message}");
    ExitCode::from(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            let _ = writeln!(std::io::stdout(), "{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(err) => return fail(&format!("{err}\n{USAGE}")),
    };
    let scenario = match Scenario::load(&args.scenario) {
        Ok(scenario) => scenario,
        Err(err) => return fail(&err.to_string()),
    };
    let log: Box<dyn Write + Send> = match &args.log {
        Some(path) => match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(file) => Box::new(file),
            Err(err) => return fail(&format!("cannot open {}: {err}", path.display())),
        },
        None => Box::new(std::io::stderr()),
    };
    let server = match MockServer::bind(args.addr).await {
        Ok(server) => server,
        Err(err) => return fail(&format!("cannot listen on {}: {err}", args.addr)),
    };
    scenario.apply(&server);
    if args.repeat {
        server.set_repeat(true);
    }
    // Log inline, before each response is played: a line exists before the client sees a byte.
    let started = std::time::Instant::now();
    let log = std::sync::Mutex::new(log);
    let log_bodies = args.log_bodies;
    server.on_request(move |req| {
        let mut line = serde_json::json!({
            "index": req.index,
            "atMs": req.arrived_at.duration_since(started).as_secs_f64() * 1000.0,
            "method": req.method,
            "path": req.path,
            "status": req.status,
            "scripted": req.scripted,
            "bodyBytes": req.body.len(),
        });
        if log_bodies {
            line["body"] = serde_json::Value::String(req.body_text());
        }
        let mut log = log.lock().unwrap_or_else(|poison| poison.into_inner());
        let _ = writeln!(log, "{line}").and_then(|()| log.flush());
    });
    {
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{}", server.base_url())
            .and_then(|()| out.flush())
            .is_err()
        {
            return fail("cannot write the base URL to stdout");
        }
    }

    let _ = tokio::signal::ctrl_c().await;
    drop(server);
    ExitCode::SUCCESS
}
