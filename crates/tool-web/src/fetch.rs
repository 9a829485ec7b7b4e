//! `web_fetch {url}`: one HTTP(S) page as text, HTML converted to markdown.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use dsh_tools::{
    Concurrency, DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolErrorCode, ToolKind,
    ToolOutput,
};
use futures::future::BoxFuture;
use reqwest::{StatusCode, Url};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::guard::{GuardedResolver, check_host};
use crate::network::NetworkPolicy;

/// The URL is not an absolute http(s) URL.
pub const WEB_FETCH_INVALID_URL: ToolErrorCode =
    ToolErrorCode::tool_defined("WEB_FETCH_INVALID_URL");
/// The address is not public (SSRF guard), or a redirect went where it may not.
pub const WEB_FETCH_REFUSED: ToolErrorCode = ToolErrorCode::tool_defined("WEB_FETCH_REFUSED");
/// The server answered with an error status.
pub const WEB_FETCH_HTTP: ToolErrorCode = ToolErrorCode::tool_defined("WEB_FETCH_HTTP");
/// The content is binary (images, archives, PDFs…).
pub const WEB_FETCH_BINARY: ToolErrorCode = ToolErrorCode::tool_defined("WEB_FETCH_BINARY");
/// The connection or the transfer failed, or took too long.
pub const WEB_FETCH_FAILED: ToolErrorCode = ToolErrorCode::tool_defined("WEB_FETCH_FAILED");

const DESCRIPTION: &str = "Fetch an http(s) URL as text (HTML as markdown); public addresses only.";

/// Limits and policy of `web_fetch`.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FetchConfig {
    /// Register `web_fetch` (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Let the tool reach loopback, private and link-local addresses (default false: such
    /// URLs, and names resolving to such addresses, are refused).
    #[serde(default)]
    pub allow_private_network: bool,
    /// Redirects followed, each re-checked (default 5).
    #[serde(default = "default_redirects")]
    pub max_redirects: u32,
    /// Body bytes read; the rest is cut with a note (default 5 MiB).
    #[serde(default = "default_bytes")]
    pub max_bytes: u64,
    /// Characters returned after conversion; the rest is cut with a note (default 100000).
    #[serde(default = "default_chars")]
    pub max_chars: usize,
    /// Budget of the whole fetch, redirects included (default 30000 ms).
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
}

fn yes() -> bool {
    true
}
fn default_redirects() -> u32 {
    5
}
fn default_bytes() -> u64 {
    5 * 1024 * 1024
}
fn default_chars() -> usize {
    100_000
}
fn default_timeout() -> u64 {
    30_000
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            allow_private_network: false,
            max_redirects: default_redirects(),
            max_bytes: default_bytes(),
            max_chars: default_chars(),
            timeout_ms: default_timeout(),
        }
    }
}

/// A client builder with the process's one TLS configuration ([`dsh_tls::client_config`]):
/// building the client reads no certificate; the first TLS handshake of any client loads the
/// system's roots, once for the process.
pub(crate) fn client_builder() -> reqwest::ClientBuilder {
    dsh_tls::install_crypto_provider();
    let builder = reqwest::Client::builder();
    match dsh_tls::client_config() {
        Some(tls) => builder.tls_backend_preconfigured(tls),
        None => builder,
    }
}

/// The `web_fetch` tool.
pub struct WebFetchTool {
    client: reqwest::Client,
    config: FetchConfig,
    parameters: Value,
    network: NetworkPolicy,
}

impl std::fmt::Debug for WebFetchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebFetchTool")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Binary,
}

fn classify(content_type: Option<&str>, head: &[u8]) -> Kind {
    let mime = content_type
        .and_then(|c| c.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase());
    match mime.as_deref() {
        Some("text/html" | "application/xhtml+xml") => Kind::Html,
        Some(m)
            if m.starts_with("text/")
                || m.ends_with("+json")
                || m.ends_with("+xml")
                || matches!(
                    m,
                    "application/json"
                        | "application/xml"
                        | "application/javascript"
                        | "application/x-javascript"
                        | "application/ecmascript"
                        | "application/x-yaml"
                        | "application/yaml"
                        | "application/toml"
                ) =>
        {
            Kind::Text
        }
        Some(_) => Kind::Binary,
        None => {
            let sample = &head[..head.len().min(1024)];
            if sample.contains(&0) {
                Kind::Binary
            } else {
                let start = String::from_utf8_lossy(sample)
                    .trim_start()
                    .to_ascii_lowercase();
                if start.starts_with("<!doctype html") || start.starts_with("<html") {
                    Kind::Html
                } else {
                    Kind::Text
                }
            }
        }
    }
}

/// `e` and its sources, joined by `: ` (reqwest hides the resolver's message in its chain).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

fn transport_error(url: &Url, e: &reqwest::Error) -> ToolError {
    let text = chain(e);
    if let Some(at) = text.find("refused: ") {
        return ToolError::new(WEB_FETCH_REFUSED, text[at..].to_owned());
    }
    ToolError::new(WEB_FETCH_FAILED, format!("cannot fetch {url}: {text}"))
}

/// The markdown of an HTML page (scripts, styles and other non-content dropped).
pub fn html_to_markdown(html: &str) -> String {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(vec![
            "script", "style", "noscript", "svg", "iframe", "template", "head",
        ])
        .build();
    match converter.convert(html) {
        Ok(md) => md.trim().to_owned(),
        Err(e) => {
            tracing::debug!("html conversion failed, returning the raw page: {e}");
            html.to_owned()
        }
    }
}

impl WebFetchTool {
    /// The tool with `config`'s limits and address policy.
    pub fn new(config: FetchConfig) -> Result<Self, reqwest::Error> {
        let client = client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver {
                allow_private: config.allow_private_network,
            }))
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("dsh/", env!("CARGO_PKG_VERSION"), " (web_fetch)"))
            .build()?;
        Ok(Self {
            client,
            config,
            parameters: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string"}
                },
                "required": ["url"]
            }),
            network: NetworkPolicy::default(),
        })
    }

    /// Builder: refuse calls whose sandbox policy (the `sandbox` service found through `ctx` at
    /// call time) has no network access (the plugin sets this).
    pub fn with_sandbox_lookup(mut self, ctx: dsh_kernel::Ctx) -> Self {
        self.network = NetworkPolicy::from_ctx(ctx);
        self
    }

    fn check_url(&self, url: &Url) -> Result<(), ToolError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ToolError::new(
                WEB_FETCH_INVALID_URL,
                format!(
                    "only http and https URLs are fetched (got {}:)",
                    url.scheme()
                ),
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(ToolError::new(
                WEB_FETCH_INVALID_URL,
                format!("{url} has no host"),
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ToolError::new(
                WEB_FETCH_INVALID_URL,
                "URLs with credentials are not fetched",
            ));
        }
        Ok(())
    }

    async fn fetch(&self, start: Url) -> Result<ToolOutput, ToolError> {
        let mut url = start;
        let mut visited = HashSet::new();
        let mut hops = 0u32;
        let response = loop {
            self.check_url(&url)?;
            let host = url.host_str().unwrap_or_default().to_owned();
            let port = url.port_or_known_default().unwrap_or(80);
            check_host(&host, port, self.config.allow_private_network)
                .await
                .map_err(|m| ToolError::new(WEB_FETCH_REFUSED, m))?;
            visited.insert(url.clone());
            let response = self
                .client
                .get(url.clone())
                .header(
                    reqwest::header::ACCEPT,
                    "text/html, text/markdown, text/plain, application/json;q=0.9, */*;q=0.1",
                )
                .send()
                .await
                .map_err(|e| transport_error(&url, &e))?;
            if !response.status().is_redirection() || response.status() == StatusCode::NOT_MODIFIED
            {
                break response;
            }
            let Some(location) = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
            else {
                return Err(ToolError::new(
                    WEB_FETCH_HTTP,
                    format!("HTTP {} from {url} without a Location", response.status()),
                ));
            };
            let next = url.join(location).map_err(|e| {
                ToolError::new(
                    WEB_FETCH_INVALID_URL,
                    format!("{url} redirects to an invalid URL {location:?}: {e}"),
                )
            })?;
            if visited.contains(&next) {
                return Err(ToolError::new(
                    WEB_FETCH_REFUSED,
                    format!("redirect loop: {url} redirects back to {next}"),
                ));
            }
            hops += 1;
            if hops > self.config.max_redirects {
                return Err(ToolError::new(
                    WEB_FETCH_REFUSED,
                    format!(
                        "too many redirects (more than {}) from {}",
                        self.config.max_redirects,
                        visited.iter().next().map(Url::as_str).unwrap_or_default()
                    ),
                ));
            }
            url = next;
        };
        let status = response.status();
        if !status.is_success() {
            return Err(ToolError::new(
                WEB_FETCH_HTTP,
                format!("HTTP {status} from {url}"),
            ));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(ct) = &content_type
            && classify(Some(ct), &[]) == Kind::Binary
        {
            return Err(binary(&url, ct));
        }
        let mut body: Vec<u8> = Vec::new();
        let mut cut = false;
        let mut response = response;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| transport_error(&url, &e))?
        {
            let room = (self.config.max_bytes as usize).saturating_sub(body.len());
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                cut = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        let kind = classify(content_type.as_deref(), &body);
        if kind == Kind::Binary {
            return Err(binary(
                &url,
                content_type.as_deref().unwrap_or("unknown type"),
            ));
        }
        let text = String::from_utf8_lossy(&body);
        let mut out = match kind {
            Kind::Html => html_to_markdown(&text),
            _ => text.into_owned(),
        };
        let mut notes = Vec::new();
        if cut {
            notes.push(format!(
                "(The body was cut at {} bytes.)",
                self.config.max_bytes
            ));
        }
        if out.chars().count() > self.config.max_chars {
            out = out.chars().take(self.config.max_chars).collect();
            notes.push(format!(
                "(The text was cut at {} characters.)",
                self.config.max_chars
            ));
        }
        let mut text = format!(
            "URL: {url}\nContent-Type: {}\n\n{out}",
            content_type.as_deref().unwrap_or("unknown")
        );
        for n in notes {
            text.push_str("\n\n");
            text.push_str(&n);
        }
        Ok(ToolOutput::text(text).with_meta(json!({
            "url": url.as_str(),
            "status": status.as_u16(),
            "redirects": hops,
        })))
    }
}

fn binary(url: &Url, content_type: &str) -> ToolError {
    ToolError::new(
        WEB_FETCH_BINARY,
        format!("refused: {url} is binary content ({content_type}); web_fetch returns text only"),
    )
}

/// The arguments of `web_fetch` (the schema checked their shape).
#[derive(Default, serde::Deserialize)]
struct FetchArgs {
    #[serde(default)]
    url: String,
}

/// The display of a `web_fetch` call: the URL, and once it ended the HTTP status.
pub fn fetch_display(call: &DisplayInput<'_>) -> ToolDisplay {
    let mut d = ToolDisplay::new(ToolKind::Fetch, "web_fetch");
    if let Some(a) = call.parse::<FetchArgs>() {
        d = d.with_subject(a.url.trim());
    }
    if call.succeeded().is_some() {
        d = d.with_output(dsh_tools::OutputSummary {
            headline: call
                .meta_field("status")
                .and_then(Value::as_u64)
                .map(|s| format!("HTTP {s}")),
            ..Default::default()
        });
    }
    d
}

impl Tool for WebFetchTool {
    fn name(&self) -> &str {
        "web_fetch"
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        fetch_display(call)
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            self.network.check(self.name(), &ctx)?;
            let args: FetchArgs = serde_json::from_value(args).unwrap_or_default();
            let raw = args.url.trim();
            let url = Url::parse(raw).map_err(|e| {
                ToolError::new(WEB_FETCH_INVALID_URL, format!("invalid URL {raw:?}: {e}"))
            })?;
            let budget = Duration::from_millis(self.config.timeout_ms);
            tokio::select! {
                r = tokio::time::timeout(budget, self.fetch(url.clone())) => match r {
                    Ok(r) => r,
                    Err(_) => Err(ToolError::new(
                        WEB_FETCH_FAILED,
                        format!("fetching {url} took longer than {} ms", self.config.timeout_ms),
                    )),
                },
                () = ctx.cancel_token().cancelled() => Err(ToolError::aborted()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_classified() {
        assert_eq!(classify(Some("text/html; charset=utf-8"), b""), Kind::Html);
        assert_eq!(classify(Some("application/json"), b""), Kind::Text);
        assert_eq!(classify(Some("application/ld+json"), b""), Kind::Text);
        assert_eq!(classify(Some("image/png"), b""), Kind::Binary);
        assert_eq!(classify(Some("application/pdf"), b""), Kind::Binary);
        assert_eq!(classify(None, b"<!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(classify(None, b"plain"), Kind::Text);
        assert_eq!(classify(None, b"\x89PNG\0\0"), Kind::Binary);
    }

    #[test]
    fn html_becomes_markdown_without_scripts() {
        let md = html_to_markdown(
            "<html><head><title>T</title><style>p{}</style></head><body><h1>Title</h1><p>Some <b>bold</b> and a <a href=\"/x\">link</a>.</p><script>alert(1)</script></body></html>",
        );
        assert_eq!(md, "# Title\n\nSome **bold** and a [link](/x).");
    }
}
