//! The web tools under the real sandbox service's network policy (`dsh-sandbox-local`'s
//! `sandbox` plugin) and the real approval plugin with a scripted answerer, through the tools
//! pipeline.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_approval::scripted::{ScriptedAnswer, ScriptedDecision};
use dsh_approval::{
    ApprovalConfig, ApprovalPlugin, ApprovalPolicy, Rule, RuleStore, ScriptedAnswererConfig,
    ScriptedAnswererPlugin,
};
use dsh_kernel::{Kernel, PluginRegistry};
use dsh_sandbox::{NetworkAccess, Sandbox, SandboxMode};
use dsh_sandbox_local::{SandboxConfig, SandboxPlugin};
use dsh_tool_web::{
    FetchConfig, SearchConfig, WEB_NETWORK_DISABLED, WebToolsConfig, WebToolsPlugin,
};
use dsh_tools::{ToolContext, ToolRequest, ToolResult, Tools, ToolsPlugin};
use serde_json::json;

use super::{HTML, code, page, serve};

/// What a test mounts besides the tools pipeline and the web tools.
struct Setup {
    mode: SandboxMode,
    network: NetworkAccess,
    /// `Some`: the approval plugin under this policy, with these scripted answers.
    approval: Option<(ApprovalPolicy, Vec<ScriptedAnswer>)>,
    search_endpoint: Option<String>,
}

impl Setup {
    fn new(mode: SandboxMode, network: NetworkAccess) -> Self {
        Self {
            mode,
            network,
            approval: None,
            search_endpoint: None,
        }
    }
}

struct World {
    kernel: Kernel,
    tools: Arc<dyn Tools>,
    rules: PathBuf,
    _home: tempfile::TempDir,
    cwd: PathBuf,
}

async fn world(setup: Setup) -> World {
    let home = tempfile::tempdir().unwrap();
    let rules = home.path().join("permissions.json");
    let kernel = Kernel::new(PluginRegistry::new());
    let mut fibers = vec![
        kernel
            .mount_plugin::<ToolsPlugin>(Default::default())
            .unwrap(),
        kernel
            .mount_plugin::<SandboxPlugin>(SandboxConfig {
                mode: Some(setup.mode),
                network: Some(setup.network),
                // No backend is probed: only the policy is asked for, nothing is confined.
                backends: Some(Vec::new()),
                ..Default::default()
            })
            .unwrap(),
        kernel
            .mount_plugin::<WebToolsPlugin>(WebToolsConfig {
                fetch: FetchConfig {
                    allow_private_network: true,
                    ..Default::default()
                },
                search: setup.search_endpoint.map(|endpoint| SearchConfig {
                    endpoint,
                    // Always set in a test process; the server ignores it.
                    api_key_env: "PATH".into(),
                    results_per_query: 3,
                    timeout_ms: 5000,
                }),
            })
            .unwrap(),
    ];
    if let Some((policy, answers)) = setup.approval {
        fibers.push(
            kernel
                .mount_plugin::<ApprovalPlugin>(ApprovalConfig {
                    policy: Some(policy),
                    rules_file: Some(rules.clone()),
                    answer_timeout_ms: Some(30_000),
                })
                .unwrap(),
        );
        fibers.push(
            kernel
                .mount_plugin::<ScriptedAnswererPlugin>(ScriptedAnswererConfig { answers })
                .unwrap(),
        );
    }
    for f in &fibers {
        f.ready().await.unwrap();
    }
    let tools = kernel.root().get::<dyn Tools>().unwrap();
    World {
        kernel,
        tools,
        rules,
        cwd: home.path().canonicalize().unwrap(),
        _home: home,
    }
}

impl World {
    async fn call(&self, id: &str, name: &str, args: serde_json::Value) -> ToolResult {
        self.tools
            .execute(ToolRequest::new(
                id,
                name,
                args.to_string(),
                "s",
                self.cwd.clone(),
            ))
            .await
    }

    async fn fetch(&self, id: &str, url: &str) -> ToolResult {
        self.call(id, "web_fetch", json!({ "url": url })).await
    }

    fn sandbox(&self) -> Arc<dyn Sandbox> {
        self.kernel.root().get::<dyn Sandbox>().unwrap()
    }
}

fn answer(decision: ScriptedDecision, reason: Option<&str>) -> ScriptedAnswer {
    ScriptedAnswer {
        decision,
        reason: reason.map(str::to_owned),
    }
}

fn assert_network_refusal(r: &ToolResult, tool: &str) {
    assert!(r.is_error, "{}", r.text());
    let text = r.text();
    assert!(
        text.contains(&format!(
            "refused: network access is off in this session's sandbox (mode workspace-write, \
             network off), so {tool} was not run"
        )) && text.contains("`--network on`"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_off_refuses_web_fetch_and_web_search_and_nothing_is_sent() {
    let s = serve(vec![
        ("/page", page("200 OK", "text/html", HTML)),
        (
            "/search",
            page("200 OK", "application/json", r#"{"web":{"results":[]}}"#),
        ),
    ])
    .await;
    let mut setup = Setup::new(SandboxMode::WorkspaceWrite, NetworkAccess::Off);
    setup.search_endpoint = Some(s.url("/search"));
    let w = world(setup).await;
    let r = w.fetch("c1", &s.url("/page")).await;
    assert_network_refusal(&r, "web_fetch");
    assert_eq!(code(&r), "TOOL_DENIED");
    let r = w
        .call("c2", "web_search", json!({"queries": ["rust"]}))
        .await;
    assert_network_refusal(&r, "web_search");
    assert!(s.heads.lock().is_empty(), "no request reached the server");

    // The tool itself refuses too when run outside the pipeline (its own check, its own code).
    let tool = w.tools.lookup(None, "web_fetch").unwrap();
    let err = tool
        .execute(
            ToolContext::new("c3", "s", w.cwd.clone()),
            json!({"url": s.url("/page")}),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, WEB_NETWORK_DISABLED);
    assert!(err.message.contains("`--network on`"), "{}", err.message);
    assert!(s.heads.lock().is_empty(), "no request reached the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_on_full_access_and_a_session_switched_to_full_access_fetch() {
    let s = serve(vec![("/page", page("200 OK", "text/html", HTML))]).await;
    let w = world(Setup::new(SandboxMode::WorkspaceWrite, NetworkAccess::On)).await;
    let r = w.fetch("c1", &s.url("/page")).await;
    assert!(!r.is_error, "{}", r.text());
    assert!(r.text().contains("# Hello"), "{}", r.text());

    // The network setting governs the restricted modes only.
    let w = world(Setup::new(
        SandboxMode::DangerFullAccess,
        NetworkAccess::Off,
    ))
    .await;
    let r = w.fetch("c2", &s.url("/page")).await;
    assert!(!r.is_error, "{}", r.text());

    // The session's own mode counts, not only the configured one.
    let w = world(Setup::new(SandboxMode::WorkspaceWrite, NetworkAccess::Off)).await;
    assert_network_refusal(&w.fetch("c3", &s.url("/page")).await, "web_fetch");
    w.sandbox()
        .set_session_mode("s", SandboxMode::DangerFullAccess);
    let r = w.fetch("c4", &s.url("/page")).await;
    assert!(!r.is_error, "{}", r.text());
    assert_eq!(s.heads.lock().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_untrusted_each_new_host_is_asked_and_a_denial_reason_reaches_the_model() {
    let s = serve(vec![("/page", page("200 OK", "text/html", HTML))]).await;
    let mut setup = Setup::new(SandboxMode::WorkspaceWrite, NetworkAccess::On);
    setup.approval = Some((
        ApprovalPolicy::Untrusted,
        vec![
            answer(ScriptedDecision::Deny, Some("not that site")),
            answer(ScriptedDecision::AllowAlways, None),
        ],
    ));
    let w = world(setup).await;
    let url = s.url("/page");
    let r = w.fetch("c1", &url).await;
    assert_eq!(code(&r), "TOOL_DENIED");
    assert_eq!(
        r.text(),
        "Error: the user rejected tool \"web_fetch\": not that site; it was not run"
    );
    assert!(s.heads.lock().is_empty(), "a denied fetch sends nothing");

    // Allowed always: fetched, and the host is stored as a rule of the project.
    let r = w.fetch("c2", &url).await;
    assert!(!r.is_error, "{}", r.text());
    let rules = RuleStore::new(&w.rules).rules(&w.cwd).unwrap();
    assert_eq!(
        rules,
        vec![Rule::Host {
            tool: "web_fetch".into(),
            host: "127.0.0.1".into()
        }]
    );
    // The same host again: allowed by the rule, nobody is asked (the answers ran out, so a
    // question would be cancelled).
    let r = w
        .fetch("c3", &format!("http://127.0.0.1:{}/page?again", s.port))
        .await;
    assert!(!r.is_error, "{}", r.text());
    // Another host is asked about: cancelled (no answers left), so refused.
    let r = w
        .fetch("c4", &format!("http://localhost:{}/page", s.port))
        .await;
    assert_eq!(code(&r), "TOOL_DENIED");
    assert!(r.text().contains("was cancelled"), "{}", r.text());
    assert_eq!(s.heads.lock().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_network_off_nobody_is_asked() {
    let s = serve(vec![("/page", page("200 OK", "text/html", HTML))]).await;
    let mut setup = Setup::new(SandboxMode::WorkspaceWrite, NetworkAccess::Off);
    setup.approval = Some((
        ApprovalPolicy::Untrusted,
        vec![answer(ScriptedDecision::Deny, Some("asked"))],
    ));
    let w = world(setup).await;
    let r = w.fetch("c1", &s.url("/page")).await;
    assert_network_refusal(&r, "web_fetch");
    // The one scripted answer is still there: the next question (the network allowed now)
    // gets it.
    w.sandbox()
        .set_session_mode("s", SandboxMode::DangerFullAccess);
    let r = w.fetch("c2", &s.url("/page")).await;
    assert!(
        r.text().contains("not run") && r.text().contains("asked"),
        "{}",
        r.text()
    );
    assert!(s.heads.lock().is_empty());
}
