//! `web_fetch` and `web_search` through the real tools pipeline against a local HTTP server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;

use dsh_kernel::{Kernel, PluginRegistry};
use dsh_tool_web::{FetchConfig, SearchConfig, WebToolsConfig, WebToolsPlugin};
use dsh_tools::{ToolRequest, ToolResult, Tools, ToolsPlugin};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod policy;

/// One canned answer: status line, headers, body.
#[derive(Clone)]
struct Page {
    status: &'static str,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn page(status: &'static str, ct: &str, body: impl Into<Vec<u8>>) -> Page {
    Page {
        status,
        headers: vec![("Content-Type".into(), ct.into())],
        body: body.into(),
    }
}

fn redirect(to: &str) -> Page {
    Page {
        status: "302 Found",
        headers: vec![("Location".into(), to.into())],
        body: Vec::new(),
    }
}

/// A minimal HTTP/1.1 server: one request per connection, answers by path (query ignored),
/// records each request head.
struct Server {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

async fn serve(routes: Vec<(&str, Page)>) -> Server {
    let routes: Arc<HashMap<String, Page>> = Arc::new(
        routes
            .into_iter()
            .map(|(p, pg)| (p.to_owned(), pg))
            .collect(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let h = heads.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let routes = routes.clone();
            let h = h.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let path = path.split('?').next().unwrap_or("/").to_owned();
                h.lock().push(head);
                let pg = routes
                    .get(&path)
                    .cloned()
                    .unwrap_or_else(|| page("404 Not Found", "text/plain", "nope"));
                let mut out = format!("HTTP/1.1 {}\r\n", pg.status);
                for (k, v) in &pg.headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str(&format!(
                    "Content-Length: {}\r\nConnection: close\r\n\r\n",
                    pg.body.len()
                ));
                let _ = sock.write_all(out.as_bytes()).await;
                let _ = sock.write_all(&pg.body).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Server { port, heads }
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

struct Env {
    _kernel: Kernel,
    tools: Arc<dyn Tools>,
}

async fn env(config: WebToolsConfig) -> Env {
    let kernel = Kernel::new(PluginRegistry::new());
    let fibers = vec![
        kernel
            .mount_plugin::<ToolsPlugin>(Default::default())
            .unwrap(),
        kernel.mount_plugin::<WebToolsPlugin>(config).unwrap(),
    ];
    for f in &fibers {
        f.ready().await.unwrap();
    }
    let tools = kernel.root().get::<dyn Tools>().unwrap();
    Env {
        _kernel: kernel,
        tools,
    }
}

fn private() -> WebToolsConfig {
    WebToolsConfig {
        fetch: FetchConfig {
            allow_private_network: true,
            ..Default::default()
        },
        search: None,
    }
}

impl Env {
    async fn call(&self, name: &str, args: serde_json::Value) -> ToolResult {
        self.tools
            .execute(ToolRequest::new(
                "c",
                name,
                args.to_string(),
                "s",
                std::env::temp_dir(),
            ))
            .await
    }

    async fn fetch(&self, url: &str) -> ToolResult {
        self.call("web_fetch", serde_json::json!({ "url": url }))
            .await
    }
}

fn code(r: &ToolResult) -> String {
    r.code().map(|c| c.to_string()).unwrap_or_default()
}

const HTML: &str = "<!doctype html><html><head><title>T</title><script>var x=1;</script></head>\
<body><h1>Hello</h1><p>A <em>small</em> page with a <a href=\"https://example.org/\">link</a>.</p>\
<ul><li>one</li><li>two</li></ul></body></html>";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_is_refused_by_default_and_nothing_is_sent() {
    let s = serve(vec![("/page", page("200 OK", "text/html", HTML))]).await;
    let e = env(WebToolsConfig::default()).await;
    let r = e.fetch(&s.url("/page")).await;
    assert!(r.is_error);
    assert_eq!(code(&r), "WEB_FETCH_REFUSED");
    assert!(
        r.text()
            .contains("refused: 127.0.0.1 is a loopback address")
            && r.text().contains("allowPrivateNetwork"),
        "{}",
        r.text()
    );
    let r = e.fetch(&format!("http://localhost:{}/page", s.port)).await;
    assert_eq!(code(&r), "WEB_FETCH_REFUSED", "{}", r.text());
    let r = e.fetch(&format!("http://[::1]:{}/page", s.port)).await;
    assert_eq!(code(&r), "WEB_FETCH_REFUSED", "{}", r.text());
    let r = e.fetch("http://169.254.169.254/latest/meta-data/").await;
    assert!(r.text().contains("link-local"), "{}", r.text());
    assert!(s.heads.lock().is_empty(), "no request reached the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_becomes_markdown_when_the_private_network_is_allowed() {
    let s = serve(vec![
        ("/page", page("200 OK", "text/html; charset=utf-8", HTML)),
        ("/moved", redirect("/page")),
        (
            "/data.json",
            page("200 OK", "application/json", r#"{"a":1}"#),
        ),
    ])
    .await;
    let e = env(private()).await;
    let r = e.fetch(&s.url("/moved")).await;
    assert!(!r.is_error, "{}", r.text());
    assert_eq!(
        r.text(),
        format!(
            "URL: {}\nContent-Type: text/html; charset=utf-8\n\n# Hello\n\nA *small* page with a [link](https://example.org/).\n\n*   one\n*   two",
            s.url("/page")
        )
    );
    assert_eq!(r.meta.as_ref().unwrap()["redirects"], 1);
    let r = e.fetch(&s.url("/data.json")).await;
    assert!(r.text().ends_with("\n\n{\"a\":1}"), "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_loops_long_chains_binary_and_errors_are_refused() {
    let s = serve(vec![
        ("/a", redirect("/b")),
        ("/b", redirect("/a")),
        ("/r1", redirect("/r2")),
        ("/r2", redirect("/r3")),
        ("/r3", redirect("/r4")),
        ("/r4", page("200 OK", "text/plain", "end")),
        (
            "/img",
            page("200 OK", "image/png", b"\x89PNG\r\n\x1a\n\0\0".to_vec()),
        ),
        ("/sniff", page("200 OK", "", b"ab\0cd".to_vec())),
        ("/big", page("200 OK", "text/plain", "x".repeat(100))),
        ("/ftp", redirect("ftp://example.org/")),
    ])
    .await;
    let e = env(WebToolsConfig {
        fetch: FetchConfig {
            allow_private_network: true,
            max_redirects: 2,
            max_bytes: 10,
            ..Default::default()
        },
        search: None,
    })
    .await;
    let r = e.fetch(&s.url("/a")).await;
    assert_eq!(code(&r), "WEB_FETCH_REFUSED");
    assert!(r.text().contains("redirect loop"), "{}", r.text());
    let r = e.fetch(&s.url("/r1")).await;
    assert!(
        r.text().contains("too many redirects (more than 2)"),
        "{}",
        r.text()
    );
    let r = e.fetch(&s.url("/img")).await;
    assert_eq!(code(&r), "WEB_FETCH_BINARY");
    assert!(
        r.text().contains("binary content (image/png)"),
        "{}",
        r.text()
    );
    let r = e.fetch(&s.url("/missing")).await;
    assert_eq!(code(&r), "WEB_FETCH_HTTP");
    assert!(r.text().contains("HTTP 404 Not Found"), "{}", r.text());
    let r = e.fetch(&s.url("/big")).await;
    assert!(
        r.text()
            .ends_with("xxxxxxxxxx\n\n(The body was cut at 10 bytes.)"),
        "{}",
        r.text()
    );
    let r = e.fetch(&s.url("/ftp")).await;
    assert_eq!(code(&r), "WEB_FETCH_INVALID_URL");
    assert!(r.text().contains("only http and https"), "{}", r.text());
    for bad in [
        "not a url",
        "file:///etc/passwd",
        "http://user:pw@example.org/",
    ] {
        let r = e.fetch(bad).await;
        assert_eq!(code(&r), "WEB_FETCH_INVALID_URL", "{bad}: {}", r.text());
    }
    let r = e.call("web_fetch", serde_json::json!({})).await;
    assert_eq!(code(&r), "INVALID_ARGS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_search_is_declared_only_when_configured_and_merges_results() {
    let e = env(WebToolsConfig::default()).await;
    let names: Vec<String> = e.tools.schemas(None).into_iter().map(|s| s.name).collect();
    assert_eq!(names, vec!["web_fetch"]);
    let e = env(WebToolsConfig {
        fetch: FetchConfig::default(),
        search: Some(SearchConfig {
            endpoint: "http://127.0.0.1:9/search".into(),
            api_key_env: "DSH_TEST_SURELY_UNSET_KEY".into(),
            results_per_query: 5,
            timeout_ms: 5000,
        }),
    })
    .await;
    assert_eq!(e.tools.schemas(None).len(), 1, "no key: not declared");

    let answer = r#"{"web":{"results":[
        {"title":"Rust","url":"https://www.rust-lang.org/","description":"A language"},
        {"title":"Docs","url":"https://doc.rust-lang.org/","description":"The docs"}]}}"#;
    let s = serve(vec![
        ("/search", page("200 OK", "application/json", answer)),
        (
            "/denied",
            page("401 Unauthorized", "application/json", "{}"),
        ),
    ])
    .await;
    // The key comes from the environment: HOME is always set in a test process.
    let key = std::env::var("HOME").unwrap();
    let config = |path: &str| WebToolsConfig {
        fetch: FetchConfig::default(),
        search: Some(SearchConfig {
            endpoint: s.url(path),
            api_key_env: "HOME".into(),
            results_per_query: 3,
            timeout_ms: 5000,
        }),
    };
    let e = env(config("/search")).await;
    let r = e
        .call(
            "web_search",
            serde_json::json!({"queries": ["rust", "rust docs"]}),
        )
        .await;
    assert!(!r.is_error, "{}", r.text());
    assert_eq!(
        r.text(),
        "1. Rust\n   https://www.rust-lang.org/\n   A language\n2. Docs\n   https://doc.rust-lang.org/\n   The docs"
    );
    let heads = s.heads.lock().clone();
    assert_eq!(heads.len(), 2);
    assert!(
        heads
            .iter()
            .any(|h| h.contains("q=rust+docs") && h.contains("count=3")),
        "{heads:?}"
    );
    assert!(
        heads
            .iter()
            .all(|h| h.to_ascii_lowercase().contains(&format!(
                "x-subscription-token: {}",
                key.to_ascii_lowercase()
            ))),
        "{heads:?}"
    );
    for bad in [
        serde_json::json!({"queries": []}),
        serde_json::json!({"queries": ["a", "b", "c", "d", "e"]}),
        serde_json::json!({"queries": [" "]}),
    ] {
        let r = e.call("web_search", bad.clone()).await;
        assert_eq!(code(&r), "INVALID_ARGS", "{bad}");
    }
    let e = env(config("/denied")).await;
    let r = e
        .call("web_search", serde_json::json!({"queries": ["x"]}))
        .await;
    assert_eq!(code(&r), "WEB_SEARCH_FAILED");
    assert!(r.text().contains("HTTP 401"), "{}", r.text());
    assert!(!r.text().contains(&key), "the key never shows");
}
