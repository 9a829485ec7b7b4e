#![allow(clippy::print_stderr)] // a test program: stderr is its log
//! MCP servers for dsh's tests, built on rmcp's server side.
//!
//! One program, shaped by its arguments (see [`main_with_args`]):
//!
//! ```text
//! mcp_test_server [stdio | http] [--delay-ms N] [--hang-startup] [--garbage] [--no-resources]
//! ```
//!
//! - `stdio` (default): JSON-RPC on stdin/stdout; `http`: streamable HTTP on 127.0.0.1 at an
//!   ephemeral port, printed as one line on stdout once listening.
//! - `--delay-ms N`: a slow server, silent for N ms before it serves (stderr says so).
//! - `--hang-startup`: reads its input and never answers (a hung server).
//! - `--garbage`: writes non-JSON lines on stdout and exits (a broken server).
//! - `--no-resources`: does not declare the `resources` capability.
//!
//! Tools: `echo {text}` (text), `add {a,b}` (structured content only), `fail` (`isError`),
//! `links` (a resource link and an image), `sleep {ms}` (answers after `ms`), `crash` (the
//! process exits mid-call), `env {names}` (the named variables, `null` when unset), `pid`,
//! `cancelled` (how many `notifications/cancelled` arrived), `add_tool {name}` (adds a tool
//! `name` that echoes, sends `notifications/tools/list_changed` and answers once `tools/list`
//! was served again, at most 5 s later), `get.thing` and a
//! tool with a 70-character name (name shortening), `wait_lists {count}` (answers once
//! `tools/list` was served `count` times), `image` (a 1x1 PNG image block),
//! `write_file {path, text}` (writes a file; a failure is an `isError` result).
//!
//! Resources: `mem://greeting` (text), `mem://logo.png` (a PNG blob), the template
//! `mem://notes/{name}` (any name reads as text); another URI is a `-32002`-style error.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;

/// The long tool name (70 characters) whose model name gets the hash.
pub const LONG_TOOL: &str =
    "a_tool_with_a_name_that_is_much_longer_than_any_model_would_like_to_see";

#[derive(Clone, Default)]
struct State {
    cancelled: Arc<AtomicU64>,
    extra: Arc<Mutex<Vec<String>>>,
    lists: Arc<AtomicU64>,
    listed: Arc<tokio::sync::Notify>,
}

/// A 1x1 transparent PNG, base64 (the `image` tool and `mem://logo.png`).
pub const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

#[derive(Clone, Default)]
struct TestServer {
    state: State,
    no_resources: bool,
}

fn schema(props: Value, required: &[&str]) -> Arc<Map<String, Value>> {
    let v = json!({"type": "object", "properties": props, "required": required});
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

fn tool(name: &str, description: &str, schema: Arc<Map<String, Value>>) -> Tool {
    Tool::new(name.to_owned(), description.to_owned(), schema)
}

fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

fn text(t: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(t.into())])
}

impl TestServer {
    /// Returns once `tools/list` was served at least `n` times.
    async fn listed(&self, n: u64) {
        loop {
            let notified = self.state.listed.notified();
            if self.state.lists.load(Ordering::SeqCst) >= n {
                return;
            }
            notified.await;
        }
    }

    async fn tools(&self) -> Vec<Tool> {
        let none = || schema(json!({}), &[]);
        let mut tools = vec![
            tool(
                "echo",
                "Echo the text back.",
                schema(json!({"text": {"type": "string"}}), &["text"]),
            ),
            tool(
                "add",
                "Add two numbers (structured result).",
                schema(
                    json!({"a": {"type": "number", "minimum": 0}, "b": {"type": "number"}}),
                    &["a", "b"],
                ),
            ),
            tool("fail", "Always fails.", none()),
            tool("links", "A resource link and an image.", none()),
            tool(
                "sleep",
                "Answer after ms milliseconds.",
                schema(json!({"ms": {"type": "integer"}}), &["ms"]),
            ),
            tool("crash", "Exit the server mid-call.", none()),
            tool(
                "env",
                "The named environment variables.",
                schema(
                    json!({"names": {"type": "array", "items": {"type": "string"}}}),
                    &["names"],
                ),
            ),
            tool("pid", "The server's process id.", none()),
            tool("cancelled", "How many cancellations arrived.", none()),
            tool(
                "add_tool",
                "Add a tool and announce it.",
                schema(json!({"name": {"type": "string"}}), &["name"]),
            ),
            tool("get.thing", "A name with a dot.", none()),
            tool(LONG_TOOL, "A very long name.", none()),
            tool(
                "wait_lists",
                "Answer once tools/list was served count times.",
                schema(json!({"count": {"type": "integer"}}), &["count"]),
            ),
            tool("image", "A 1x1 PNG image.", none()),
            tool(
                "write_file",
                "Write text to a file.",
                schema(
                    json!({"path": {"type": "string"}, "text": {"type": "string"}}),
                    &["path", "text"],
                ),
            ),
        ];
        for name in self.state.extra.lock().await.iter() {
            tools.push(tool(name, "An added tool.", none()));
        }
        tools
    }

    async fn call(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let args = req.arguments.unwrap_or_default();
        let str_arg = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        Ok(match req.name.as_ref() {
            "echo" => text(str_arg("text")),
            "add" => {
                let n = |k: &str| args.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                let mut r = CallToolResult::structured(json!({"sum": n("a") + n("b")}));
                r.content.clear();
                r
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("it failed on purpose")]),
            "links" => {
                let v = json!({"content": [
                    {"type": "resource_link", "name": "readme", "uri": "file:///readme.md"},
                    {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
                ]});
                serde_json::from_value(v)
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
            }
            "sleep" => {
                let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                text(format!("slept {ms} ms"))
            }
            "crash" => std::process::exit(3),
            "env" => {
                let names: Vec<String> = args
                    .get("names")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                let mut out = Map::new();
                for n in names {
                    let v = std::env::var(&n).map(Value::String).unwrap_or(Value::Null);
                    out.insert(n, v);
                }
                text(Value::Object(out).to_string())
            }
            "pid" => text(std::process::id().to_string()),
            "cancelled" => text(self.state.cancelled.load(Ordering::SeqCst).to_string()),
            "add_tool" => {
                // The list is re-read after the announcement, and this answer comes after that
                // (at most 5 s later): a client sees the announcement before the answer.
                let before = self.state.lists.load(Ordering::SeqCst);
                self.state.extra.lock().await.push(str_arg("name"));
                let _ = ctx.peer.notify_tool_list_changed().await;
                let _ = tokio::time::timeout(Duration::from_secs(5), self.listed(before + 1)).await;
                text("added")
            }
            "get.thing" => text("thing"),
            "wait_lists" => {
                let want = args.get("count").and_then(Value::as_u64).unwrap_or(1);
                self.listed(want).await;
                text(format!("tools/list served {want} times"))
            }
            "write_file" => {
                let path = str_arg("path");
                match std::fs::write(&path, str_arg("text")) {
                    Ok(()) => text(format!("wrote {path}")),
                    Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                        "cannot write {path}: {e}"
                    ))]),
                }
            }
            "image" => {
                let v = json!({"content": [
                    {"type": "text", "text": "a pixel:"},
                    {"type": "image", "data": PNG_1X1, "mimeType": "image/png"}
                ]});
                serde_json::from_value(v)
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
            }
            LONG_TOOL => text("long"),
            other if self.state.extra.lock().await.iter().any(|n| n == other) => {
                text(format!("{other} called"))
            }
            other => {
                return Err(ErrorData::invalid_params(format!("no tool {other}"), None));
            }
        })
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed();
        ServerConfig::new(if self.no_resources {
            caps.build()
        } else {
            caps.enable_resources().build()
        })
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.tools().await;
        self.state.lists.fetch_add(1, Ordering::SeqCst);
        self.state.listed.notify_waiters();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        from_json(json!({"resources": [
            {"uri": "mem://greeting", "name": "greeting", "description": "A greeting.", "mimeType": "text/plain"},
            {"uri": "mem://logo.png", "name": "logo", "mimeType": "image/png"}
        ]}))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        from_json(json!({"resourceTemplates": [
            {"uriTemplate": "mem://notes/{name}", "name": "note", "description": "A note by name."}
        ]}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let contents = if uri == "mem://greeting" {
            json!([{"uri": uri, "mimeType": "text/plain", "text": "Hello from a resource."}])
        } else if uri == "mem://logo.png" {
            json!([{"uri": uri, "mimeType": "image/png", "blob": PNG_1X1}])
        } else if let Some(name) = uri.strip_prefix("mem://notes/") {
            json!([{"uri": uri, "mimeType": "text/plain", "text": format!("note {name}")}])
        } else {
            return Err(ErrorData::resource_not_found(
                format!("no resource {uri}"),
                None,
            ));
        };
        let result: ReadResourceResult = from_json(json!({ "contents": contents }))?;
        Ok(ReadResourceResponse::Complete(result))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context)
            .await
            .map(CallToolResponse::Complete)
    }

    async fn on_cancelled(
        &self,
        _notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.state.cancelled.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs the server the arguments describe (see the crate docs); returns the exit code.
pub fn main_with_args(args: Vec<String>) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            return 1;
        }
    };
    rt.block_on(run(args))
}

async fn run(args: Vec<String>) -> i32 {
    let mut delay = 0u64;
    let mut hang = false;
    let mut garbage = false;
    let mut no_resources = false;
    let mut http: Option<()> = None;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "stdio" => {}
            "http" => http = Some(()),
            "--delay-ms" => delay = it.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            "--hang-startup" => hang = true,
            "--garbage" => garbage = true,
            "--no-resources" => no_resources = true,
            other => {
                eprintln!("unknown argument {other:?}");
                return 2;
            }
        }
    }
    eprintln!("mcp test server starting (stderr line)");
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    if garbage {
        use tokio::io::AsyncWriteExt;
        let mut out = tokio::io::stdout();
        let _ = out
            .write_all(b"this is not json\n{\"jsonrpc\": broken\n")
            .await;
        let _ = out.flush().await;
        return 0;
    }
    if hang {
        use tokio::io::AsyncReadExt;
        let mut sink = Vec::new();
        let _ = tokio::io::stdin().read_to_end(&mut sink).await;
        std::future::pending::<()>().await;
    }
    match http {
        None => match (TestServer {
            no_resources,
            ..TestServer::default()
        })
        .serve(rmcp::transport::stdio())
        .await
        {
            Ok(running) => {
                let _ = running.waiting().await;
                0
            }
            Err(e) => {
                eprintln!("serve: {e}");
                1
            }
        },
        Some(()) => serve_http(no_resources).await,
    }
}

async fn serve_http(no_resources: bool) -> i32 {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let state = State::default();
    let service = StreamableHttpService::new(
        move || {
            Ok(TestServer {
                state: state.clone(),
                no_resources,
            })
        },
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("bind: {e}");
            return 1;
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    {
        use tokio::io::AsyncWriteExt;
        let mut out = tokio::io::stdout();
        if out.write_all(format!("{port}\n").as_bytes()).await.is_err()
            || out.flush().await.is_err()
        {
            eprintln!("cannot announce the port");
            return 1;
        }
    }
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let service = service.clone();
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let svc = hyper_util::service::TowerToHyperService::new(service);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, svc)
                .await;
        });
    }
}
