//! The resources bridge (upstream's later `packages/mcp/mcp-resources`): the tools
//! `list_mcp_resources`, `list_mcp_resource_templates` and `read_mcp_resource`, declared only
//! while at least one connected server offers resources.
//!
//! The plugin `mcp-resources` ([`McpResourcesPlugin`]) provides the kernel service
//! [`McpResources`]; each `mcp-client` row offers its server to it once connected with the
//! `resources` capability, and withdraws it when the server is given up or unloaded. The
//! three tools are registered when the first server is offered and withdrawn with the last,
//! so a session whose servers offer no resources never sees them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin, Registration, Service};
use dsh_llm::ImageRef;
use dsh_tools::{
    Concurrency, DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolKind, ToolOutput,
    Tools,
};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use rmcp::RoleClient;
use rmcp::model::{PaginatedRequestParams, ReadResourceRequestParams, ResourceContents};
use rmcp::service::Peer;
use serde_json::{Map, Value, json};

use crate::images::{ImageSink, SinkRefusal};
use crate::server::Server;
use crate::tool::{CALL_FAILED, SERVER_UNAVAILABLE, unavailable_message};

/// `list_mcp_resources`.
pub const LIST_RESOURCES: &str = "list_mcp_resources";
/// `list_mcp_resource_templates`.
pub const LIST_TEMPLATES: &str = "list_mcp_resource_templates";
/// `read_mcp_resource`.
pub const READ_RESOURCE: &str = "read_mcp_resource";

/// Code of a `server` argument naming no server that offers resources.
pub const UNKNOWN_SERVER: dsh_tools::ToolErrorCode =
    dsh_tools::ToolErrorCode::tool_defined("MCP_UNKNOWN_SERVER");

/// The kernel service `mcp-resources`: the servers whose resources the bridge tools reach.
pub trait McpResources: Send + Sync + 'static {
    /// `server` is connected and offers resources (idempotent; a newer `Arc` of the same
    /// name replaces the older).
    fn offer(&self, server: Arc<Server>);
    /// The server named `name` no longer offers resources (given up, unloaded).
    fn withdraw(&self, name: &str);
    /// The names of the servers offered now, sorted.
    fn servers(&self) -> Vec<String>;
}

impl Service for dyn McpResources {
    const NAME: &'static str = "mcp-resources";
}

/// The `mcp-resources` plugin (no config): provides [`McpResources`] and declares the bridge
/// tools while a server offers resources.
#[derive(Debug)]
pub struct McpResourcesPlugin;

impl Plugin for McpResourcesPlugin {
    const NAME: &'static str = "mcp-resources";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let tools = ctx.dep::<dyn Tools>()?;
        let hub = Arc::new(Hub {
            ctx: ctx.clone(),
            tools,
            servers: Arc::new(Mutex::new(BTreeMap::new())),
            regs: Mutex::new(Vec::new()),
        });
        ctx.provide::<dyn McpResources>(hub as Arc<dyn McpResources>)?;
        Ok(())
    }
}

type Servers = Arc<Mutex<BTreeMap<String, Arc<Server>>>>;

struct Hub {
    ctx: Ctx,
    tools: Arc<dyn Tools>,
    servers: Servers,
    regs: Mutex<Vec<Registration>>,
}

impl McpResources for Hub {
    fn offer(&self, server: Arc<Server>) {
        self.servers.lock().insert(server.name().to_owned(), server);
        let mut regs = self.regs.lock();
        if !regs.is_empty() {
            return;
        }
        for kind in [Kind::List, Kind::Templates, Kind::Read] {
            let tool = BridgeTool::new(kind, self.servers.clone(), self.ctx.clone());
            match self.tools.register_removable(&self.ctx, Arc::new(tool)) {
                Ok(r) => regs.push(r),
                Err(e) => {
                    tracing::warn!(tool = kind.name(), error = %e, "cannot declare the MCP resources tool");
                }
            }
        }
    }

    fn withdraw(&self, name: &str) {
        let empty = {
            let mut servers = self.servers.lock();
            servers.remove(name);
            servers.is_empty()
        };
        if empty {
            for r in self.regs.lock().drain(..) {
                r.dispose();
            }
        }
    }

    fn servers(&self) -> Vec<String> {
        self.servers.lock().keys().cloned().collect()
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    List,
    Templates,
    Read,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::List => LIST_RESOURCES,
            Kind::Templates => LIST_TEMPLATES,
            Kind::Read => READ_RESOURCE,
        }
    }

    fn description(self) -> &'static str {
        match self {
            Kind::List => {
                "Lists the resources that connected MCP servers provide (files, database schemas, \
                 application data) with their server, uri, name, description and mimeType. \
                 Without `server`, the first page of every server; with `server`, that server's \
                 page at `cursor` (pass the returned nextCursor to continue). Read one with \
                 read_mcp_resource."
            }
            Kind::Templates => {
                "Lists the parameterized resource templates (uriTemplate) that connected MCP \
                 servers provide. Without `server`, the first page of every server; with \
                 `server`, that server's page at `cursor`. Fill a template in and read the \
                 resulting uri with read_mcp_resource."
            }
            Kind::Read => {
                "Reads one resource of an MCP server by its uri (from list_mcp_resources or a \
                 filled-in template) and returns its contents."
            }
        }
    }

    fn schema(self) -> Value {
        let server = json!({"type": "string", "description": "The MCP server name."});
        match self {
            Kind::List | Kind::Templates => json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "Only this MCP server (required with cursor)."},
                    "cursor": {"type": "string", "description": "The nextCursor of a previous call for the same server."}
                }
            }),
            Kind::Read => json!({
                "type": "object",
                "properties": {
                    "server": server,
                    "uri": {"type": "string", "description": "The resource uri."}
                },
                "required": ["server", "uri"]
            }),
        }
    }
}

/// The bridge tools' arguments (each tool's schema names the ones it takes and checked their
/// shape).
#[derive(Default, serde::Deserialize)]
struct ResourceArgs {
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    uri: Option<String>,
}

/// One of the three bridge tools.
struct BridgeTool {
    kind: Kind,
    schema: Value,
    servers: Servers,
    /// The plugin's context: the `attachments`, `agents` and `llm` services for images.
    ctx: Ctx,
}

impl BridgeTool {
    fn new(kind: Kind, servers: Servers, ctx: Ctx) -> Self {
        Self {
            kind,
            schema: kind.schema(),
            servers,
            ctx,
        }
    }

    fn server(&self, name: &str) -> Result<Arc<Server>, ToolError> {
        let servers = self.servers.lock();
        servers.get(name).cloned().ok_or_else(|| {
            let known: Vec<&str> = servers.keys().map(String::as_str).collect();
            ToolError::new(
                UNKNOWN_SERVER,
                format!(
                    "no MCP server \"{name}\" offers resources; servers with resources: {}",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            )
        })
    }

    fn all(&self) -> Vec<Arc<Server>> {
        self.servers.lock().values().cloned().collect()
    }

    async fn call(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let ResourceArgs {
            server,
            cursor,
            uri,
        } = serde_json::from_value(args)
            .map_err(|e| ToolError::invalid_args(format!("invalid arguments: {e}")))?;
        let work = async {
            match self.kind {
                Kind::List | Kind::Templates => self.list(server, cursor).await,
                Kind::Read => {
                    let (Some(server), Some(uri)) = (server, uri) else {
                        return Err(ToolError::invalid_args(
                            "invalid arguments: `server` and `uri` are required strings",
                        ));
                    };
                    self.read(&server, uri, ctx.session_id()).await
                }
            }
        };
        tokio::select! {
            r = work => r,
            _ = ctx.cancel_token().cancelled() => Err(ToolError::aborted()),
        }
    }

    async fn list(
        &self,
        server: Option<String>,
        cursor: Option<String>,
    ) -> Result<ToolOutput, ToolError> {
        let key = match self.kind {
            Kind::Templates => "resourceTemplates",
            _ => "resources",
        };
        let Some(name) = server else {
            if cursor.is_some() {
                return Err(ToolError::invalid_args(
                    "invalid arguments: `cursor` needs `server` (cursors are per server)",
                ));
            }
            // Every server's first page; a failing server is reported, not fatal.
            let mut items = Vec::new();
            let mut errors = Map::new();
            let mut more = Vec::new();
            for s in self.all() {
                match self.page(&s, None).await {
                    Ok((page, next)) => {
                        items.extend(page);
                        if next.is_some() {
                            more.push(Value::String(s.name().to_owned()));
                        }
                    }
                    Err(e) => {
                        errors.insert(s.name().to_owned(), Value::String(e.message));
                    }
                }
            }
            let mut out = Map::new();
            out.insert(key.to_owned(), Value::Array(items));
            if !more.is_empty() {
                out.insert("serversWithMorePages".to_owned(), Value::Array(more));
            }
            if !errors.is_empty() {
                out.insert("errors".to_owned(), Value::Object(errors));
            }
            return Ok(ToolOutput::text(Value::Object(out).to_string()));
        };
        let s = self.server(&name)?;
        let (items, next) = self.page(&s, cursor).await?;
        let mut out = Map::new();
        out.insert(key.to_owned(), Value::Array(items));
        if let Some(next) = next {
            out.insert("nextCursor".to_owned(), Value::String(next));
        }
        Ok(ToolOutput::text(Value::Object(out).to_string()))
    }

    /// One page of `server`'s resources or templates, each tagged with `server`.
    async fn page(
        &self,
        server: &Arc<Server>,
        cursor: Option<String>,
    ) -> Result<(Vec<Value>, Option<String>), ToolError> {
        let peer = peer(server)?;
        let params = Some(PaginatedRequestParams::default().with_cursor(cursor));
        let timeout = server.config().call_timeout();
        let what = self.kind.name();
        let (items, next) = match self.kind {
            Kind::Templates => {
                let r =
                    bounded(server, what, timeout, peer.list_resource_templates(params)).await?;
                (to_values(&r.resource_templates), r.next_cursor)
            }
            _ => {
                let r = bounded(server, what, timeout, peer.list_resources(params)).await?;
                (to_values(&r.resources), r.next_cursor)
            }
        };
        let tagged = items
            .into_iter()
            .map(|v| {
                let mut m = Map::new();
                m.insert("server".to_owned(), Value::String(server.name().to_owned()));
                if let Value::Object(o) = v {
                    m.extend(o);
                }
                Value::Object(m)
            })
            .collect();
        Ok((tagged, next))
    }

    async fn read(
        &self,
        name: &str,
        uri: String,
        session_id: &str,
    ) -> Result<ToolOutput, ToolError> {
        let s = self.server(name)?;
        let peer = peer(&s)?;
        let timeout = s.config().call_timeout();
        let params = ReadResourceRequestParams::new(uri.clone());
        let result = bounded(&s, READ_RESOURCE, timeout, peer.read_resource(params)).await?;
        let sink = ImageSink::for_call(Some(&self.ctx), session_id);
        let (text, images) = render_contents_with(&uri, &result.contents, &sink);
        let meta = json!({"server": name, "uri": uri});
        if images.is_empty() {
            return Ok(ToolOutput::text(text).with_meta(meta));
        }
        Ok(ToolOutput::json(json!({"text": text, "images": images})).with_meta(meta))
    }
}

/// The model-visible text of a resource's contents: one text content as itself; several each
/// under a `[resource <uri>]` line; binary contents as a bracketed diagnostic.
pub fn render_contents(uri: &str, contents: &[ResourceContents]) -> String {
    render_contents_with(uri, contents, &ImageSink::refusing(SinkRefusal::NoStore)).0
}

/// [`render_contents`], with the image contents `images` admits as images (their text is
/// `[image <uri> (<type>) attached]`; the images follow the text as image blocks).
pub fn render_contents_with(
    uri: &str,
    contents: &[ResourceContents],
    images: &ImageSink,
) -> (String, Vec<ImageRef>) {
    let sent = std::cell::RefCell::new(Vec::new());
    let one = |c: &ResourceContents| match c {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        ResourceContents::BlobResourceContents {
            uri,
            mime_type: Some(mime),
            blob,
            ..
        } if mime.starts_with("image/") => match images.admit(mime, blob) {
            Ok(r) => {
                sent.borrow_mut().push(r);
                format!("[image {uri} ({mime}) attached]")
            }
            Err(why) => format!(
                "[binary resource ({mime}, {} bytes base64) not shown: {why}]",
                blob.len()
            ),
        },
        ResourceContents::BlobResourceContents {
            mime_type, blob, ..
        } => format!(
            "[binary resource ({}, {} bytes base64) not shown]",
            mime_type.as_deref().unwrap_or("unknown type"),
            blob.len()
        ),
        _ => "[resource content of an unknown kind not shown]".to_owned(),
    };
    let text = match contents {
        [] => format!("(resource {uri} has no contents)"),
        [c] => one(c),
        many => many
            .iter()
            .map(|c| {
                let u = match c {
                    ResourceContents::TextResourceContents { uri, .. }
                    | ResourceContents::BlobResourceContents { uri, .. } => uri.as_str(),
                    _ => uri,
                };
                format!("[resource {u}]\n{}", one(c))
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    (text, sent.into_inner())
}

fn to_values<T: serde::Serialize>(items: &[T]) -> Vec<Value> {
    items
        .iter()
        .filter_map(|i| serde_json::to_value(i).ok())
        .collect()
}

fn peer(server: &Server) -> Result<Peer<RoleClient>, ToolError> {
    server.peer().map_err(|(status, last)| {
        ToolError::new(
            SERVER_UNAVAILABLE,
            unavailable_message(server.name(), &status, last),
        )
    })
}

/// `fut` within the server's call budget; dropping it on expiry cancels it on the server.
async fn bounded<T>(
    server: &Server,
    what: &str,
    timeout: Duration,
    fut: impl std::future::Future<Output = Result<T, rmcp::service::ServiceError>>,
) -> Result<T, ToolError> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(match e {
            rmcp::service::ServiceError::McpError(err) => ToolError::new(
                CALL_FAILED,
                format!(
                    "MCP server \"{}\" refused {what}: {}",
                    server.name(),
                    err.message
                ),
            ),
            other => ToolError::new(
                CALL_FAILED,
                format!("{what} on MCP server \"{}\" failed: {other}", server.name()),
            ),
        }),
        Err(_) => Err(ToolError::timeout(timeout.as_millis())),
    }
}

impl Tool for BridgeTool {
    fn name(&self) -> &str {
        self.kind.name()
    }

    /// Kind `read` for reading a resource, `mcp` for the listings; the uri (or the server) as
    /// the subject and the head of the result.
    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        let args: ResourceArgs = call.parse().unwrap_or_default();
        let kind = match self.kind {
            Kind::Read => ToolKind::Read,
            Kind::List | Kind::Templates => ToolKind::Mcp,
        };
        let mut d = ToolDisplay::new(kind, self.kind.name());
        d.subject = match (args.server, args.uri) {
            (Some(s), Some(u)) => Some(format!("{s}: {u}")),
            (s, u) => u.or(s),
        };
        if let Some(r) = call.succeeded() {
            d = d.with_output(dsh_tools::display::output_head(r.text, 3));
        }
        d
    }

    fn description(&self) -> &str {
        self.kind.description()
    }

    fn parameters(&self) -> &Value {
        &self.schema
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.call(ctx, args))
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }

    /// The text, then the images a read stored.
    fn render(&self, output: &ToolOutput) -> Vec<dsh_llm::ContentBlock> {
        crate::tool::render_output(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_render_text_blobs_and_several() {
        let text = ResourceContents::text("hello", "mem://a");
        let blob = ResourceContents::blob("AAAA", "mem://b");
        assert_eq!(
            render_contents("mem://a", std::slice::from_ref(&text)),
            "hello"
        );
        assert_eq!(
            render_contents("mem://x", &[text, blob]),
            "[resource mem://a]\nhello\n[resource mem://b]\n[binary resource (unknown type, 4 bytes base64) not shown]"
        );
        assert_eq!(
            render_contents("mem://x", &[]),
            "(resource mem://x has no contents)"
        );
    }
}
