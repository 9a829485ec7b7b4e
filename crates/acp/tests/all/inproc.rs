//! An ACP server over a host of the test harness, and a raw-frame client for it.

use std::sync::Arc;
use std::time::Duration;

use dsh_host::{Host, HostOptions};
use dsh_test_harness::TestHarness;
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(30);

/// A running `dsh_acp::serve` over `harness`'s kernel and the client end of its transport.
pub struct Acp {
    to_agent: mpsc::UnboundedSender<std::io::Result<String>>,
    from_agent: mpsc::UnboundedReceiver<String>,
    server: tokio::task::JoinHandle<()>,
    pub host: Host,
}

impl Acp {
    /// Serves ACP over a new host of `harness` (sessions use the scripted route).
    pub fn start(harness: &TestHarness) -> Self {
        let host = Host::new(
            harness.root(),
            HostOptions {
                defaults: harness.options(),
                answer_approvals: true,
            },
        )
        .unwrap();
        let (to_agent, incoming) = mpsc::unbounded::<std::io::Result<String>>();
        let (outgoing, from_agent) = mpsc::unbounded::<String>();
        let sink = outgoing.sink_map_err(std::io::Error::other);
        let transport = agent_client_protocol::Lines::new(sink, incoming);
        let options = dsh_acp::AcpOptions {
            version: "test".into(),
            client_terminal: false,
            client_fs: false,
        };
        let server = tokio::spawn({
            let client = host.client();
            async move {
                dsh_acp::serve(client, Arc::new(dsh_acp::NoSetup), options, transport)
                    .await
                    .unwrap();
            }
        });
        Acp {
            to_agent,
            from_agent,
            server,
            host,
        }
    }

    pub fn send(&self, frame: Value) {
        self.to_agent.unbounded_send(Ok(frame.to_string())).unwrap();
    }

    /// The next frame from the server.
    pub async fn frame(&mut self) -> Value {
        let line = tokio::time::timeout(BOUND, self.from_agent.next())
            .await
            .expect("no frame from the ACP server in time")
            .expect("the ACP server closed its output");
        serde_json::from_str(&line).unwrap()
    }

    /// Frames up to and including the response to `id`.
    pub async fn until_response(&mut self, id: u64) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let f = self.frame().await;
            let done = f.get("method").is_none() && f["id"] == id;
            out.push(f);
            if done {
                return out;
            }
        }
    }

    pub async fn request(&mut self, id: u64, method: &str, params: Value) -> Vec<Value> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.until_response(id).await
    }

    /// `initialize` (no client capabilities), then a new session in `cwd`; its id.
    pub async fn open(&mut self, cwd: &std::path::Path) -> String {
        let r = self
            .request(
                0,
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": {}}),
            )
            .await;
        assert_eq!(r.last().unwrap()["result"]["protocolVersion"], 1, "{r:#?}");
        let r = self
            .request(
                1,
                "session/new",
                json!({"cwd": cwd.display().to_string(), "mcpServers": []}),
            )
            .await;
        r.last().unwrap()["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{r:#?}"))
            .to_owned()
    }

    /// Disconnects and waits until the server closed its sessions.
    pub async fn close(self) {
        drop(self.to_agent);
        tokio::time::timeout(BOUND, self.server)
            .await
            .expect("the server did not stop")
            .unwrap();
        self.host.shutdown().await;
    }
}

/// The `session/update` payloads among `frames`.
pub fn updates(frames: &[Value]) -> Vec<&Value> {
    frames
        .iter()
        .filter(|f| f["method"] == "session/update")
        .map(|f| &f["params"]["update"])
        .collect()
}
