//! A server over the test harness, and an SSE reader.

use std::net::SocketAddr;
use std::sync::Arc;

use dsh_approval::{ApprovalConfig, ApprovalPlugin, ApprovalPolicy};
use dsh_host::{Host, HostOptions};
use dsh_protocol::{Client, Event, EventMsg};
use dsh_serve::sse::{SseMessage, SseParser};
use dsh_serve::{Bound, ServeConfig, TokenStore};
use dsh_test_harness::{Script, TestHarness, within};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// A running server.
pub struct Server {
    pub h: TestHarness,
    pub host: Host,
    pub client: Arc<dyn Client>,
    pub addr: SocketAddr,
    pub http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Options of a test server.
#[derive(Default)]
pub struct Opts {
    pub tokens: Option<Arc<TokenStore>>,
    pub max_body: Option<usize>,
}

impl Server {
    pub async fn start(scripts: Vec<Script>, policy: ApprovalPolicy) -> Server {
        Self::start_with(scripts, policy, Opts::default()).await
    }

    pub async fn start_with(scripts: Vec<Script>, policy: ApprovalPolicy, opts: Opts) -> Server {
        let h = TestHarness::builder()
            .plugin::<ApprovalPlugin>(ApprovalConfig {
                policy: Some(policy),
                ..Default::default()
            })
            .tool(crate::common::Touch::new())
            .scripts(scripts)
            .on_disk()
            .build()
            .await;
        let host = Host::new(
            h.root(),
            HostOptions {
                defaults: h.options(),
                answer_approvals: true,
            },
        )
        .unwrap();
        let client = host.client();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut config = ServeConfig::new(Bound::Tcp(addr));
        config.tokens = opts.tokens;
        if let Some(m) = opts.max_body {
            config.max_body = m;
        }
        let (stop, stopped) = oneshot::channel::<()>();
        let c = client.clone();
        let task = tokio::spawn(async move {
            dsh_serve::serve(listener, c, config, async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        Server {
            h,
            host,
            client,
            addr,
            http: http_client(),
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Creates a session in the harness's directory; its id.
    pub async fn create(&self, extra: Value) -> String {
        let mut body = json!({"cwd": self.h.dir().display().to_string()});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = self
            .http
            .post(self.url("/v1/sessions"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{:?}", r.text().await);
        let v: Value = r.json().await.unwrap();
        v["id"].as_str().unwrap().to_owned()
    }

    /// Sends an op; its status and body.
    pub async fn op(&self, id: &str, op: Value) -> (u16, Value) {
        let r = self
            .http
            .post(self.url(&format!("/v1/sessions/{id}/ops")))
            .json(&op)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Opens an event stream.
    pub async fn events(&self, id: &str, after: Option<u64>, last_id: Option<&str>) -> Sse {
        let query = after.map(|a| format!("after={a}")).unwrap_or_default();
        self.events_query(id, &query, last_id).await
    }

    /// Opens an event stream with a query string (`tailTurns=1`, `before=9`, ...).
    pub async fn events_query(&self, id: &str, query: &str, last_id: Option<&str>) -> Sse {
        let mut url = self.url(&format!("/v1/sessions/{id}/events"));
        if !query.is_empty() {
            url.push_str(&format!("?{query}"));
        }
        let mut req = self.http.get(url);
        if let Some(l) = last_id {
            req = req.header("last-event-id", l);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(
            r.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        Sse {
            body: r.bytes_stream().boxed(),
            parser: SseParser::new(1 << 24),
            ready: Default::default(),
            raw: Vec::new(),
        }
    }

    pub async fn stop(mut self) {
        self.host.shutdown().await;
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            within("the server stops", t).await.unwrap();
        }
        self.h.dispose().await;
    }
}

/// A plain reqwest client (the process's rustls provider installed first).
pub fn http_client() -> reqwest::Client {
    dsh_tls::install_crypto_provider();
    reqwest::Client::new()
}

/// One SSE event as received: the message and the Event it carries.
#[derive(Clone, Debug)]
pub struct Received {
    pub msg: SseMessage,
    pub event: Event,
}

/// An SSE reader over a real HTTP response.
pub struct Sse {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    parser: SseParser,
    ready: std::collections::VecDeque<SseMessage>,
    /// Every byte received.
    pub raw: Vec<u8>,
}

impl Sse {
    pub async fn next(&mut self) -> Option<Received> {
        loop {
            if let Some(msg) = self.ready.pop_front() {
                let event: Event = serde_json::from_str(&msg.data).unwrap();
                // `event:` is the type tag of the data.
                let v: Value = serde_json::from_str(&msg.data).unwrap();
                assert_eq!(msg.event.as_deref(), v["type"].as_str());
                return Some(Received { msg, event });
            }
            let bytes = within("no SSE bytes", self.body.next()).await?.unwrap();
            self.raw.extend_from_slice(&bytes);
            self.ready.extend(self.parser.push(&bytes).unwrap());
        }
    }

    /// Events until one matches `done` (inclusive).
    pub async fn until(&mut self, done: impl Fn(&EventMsg) -> bool) -> Vec<Received> {
        let mut out = Vec::new();
        loop {
            let r = self.next().await.expect("the stream ended");
            let stop = done(&r.event.msg);
            out.push(r);
            if stop {
                return out;
            }
        }
    }
}

/// The committed events of a list, as (seq, JSON).
pub fn committed(events: &[Received]) -> Vec<(u64, String)> {
    committed_events(&events.iter().map(|r| r.event.clone()).collect::<Vec<_>>())
}

pub fn committed_events(events: &[Event]) -> Vec<(u64, String)> {
    events
        .iter()
        .filter(|e| !e.is_live())
        .map(|e| (e.seq, serde_json::to_string(&e.msg).unwrap()))
        .collect()
}

pub fn is_turn_end(m: &EventMsg) -> bool {
    matches!(m, EventMsg::TurnEnded { .. })
}

pub fn is_approval(m: &EventMsg) -> bool {
    matches!(m, EventMsg::ApprovalRequested(_))
}

pub fn is_snapshot(m: &EventMsg) -> bool {
    matches!(m, EventMsg::Snapshot(_))
}

/// A tool only these tests know: it "touches" a path.
pub struct Touch {
    schema: Value,
}

impl Touch {
    pub fn new() -> Self {
        Touch {
            schema: json!({"type": "object", "properties": {"path": {"type": "string"}},
                           "required": ["path"]}),
        }
    }
}

impl dsh_tools::Tool for Touch {
    fn name(&self) -> &str {
        "touch"
    }
    fn description(&self) -> &str {
        "Touch a path."
    }
    fn parameters(&self) -> &Value {
        &self.schema
    }
    fn execute<'a>(
        &'a self,
        _ctx: dsh_tools::ToolContext,
        args: Value,
    ) -> futures::future::BoxFuture<'a, Result<dsh_tools::ToolOutput, dsh_tools::ToolError>> {
        Box::pin(async move {
            let path = args["path"].as_str().unwrap_or_default().to_owned();
            Ok(dsh_tools::ToolOutput::text(format!("touched {path}")))
        })
    }
}

/// The scripts of a turn with one `touch` call, then an answer.
pub fn tool_turn() -> Vec<Script> {
    vec![
        Script::Chunks(dsh_test_harness::calls(&[(
            "c1",
            "touch",
            r#"{"path":"a"}"#,
        )])),
        Script::Chunks(dsh_test_harness::text("done")),
    ]
}
