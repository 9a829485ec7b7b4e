//! The `llm-retry` plugin on a real kernel, with a real in-memory session.

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::hooks::{AgentRequestError, RequestErrorDecision, RequestErrorInput};
use dsh_agent::{Agent, AgentError, AgentOptions, AgentStatus, CancelCause, Target};
use dsh_kernel::{CancellationToken, Ctx, FiberHandle, Kernel, PluginRegistry};
use dsh_llm::{LlmFailure, Message, codes};
use dsh_llm_retry::LlmRetryPlugin;
use dsh_session::{Event, Session, SessionError, SessionHeader, SessionLog, SessionSink};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Forwards every committed event's type to the test.
struct ChannelSink(mpsc::UnboundedSender<String>);

impl SessionSink for ChannelSink {
    fn event(&self, _: &Arc<str>, event: &Arc<Event>) {
        let _ = self.0.send(event.kind().to_owned());
    }
    fn flush(&self, _: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>> {
        Box::pin(async { Ok(()) })
    }
}

struct FakeAgent {
    session: Arc<Session>,
    ctx: Ctx,
}

impl Agent for FakeAgent {
    fn id(&self) -> &str {
        "agent-1"
    }
    fn options(&self) -> AgentOptions {
        AgentOptions::default()
    }
    fn session(&self) -> Arc<Session> {
        self.session.clone()
    }
    fn status(&self) -> AgentStatus {
        AgentStatus::Running
    }
    fn ctx(&self) -> &Ctx {
        &self.ctx
    }
    fn cancel(&self, _: CancelCause, _: bool) {}
    fn when_idle(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
    fn send(&self, _: Message, _: Target, _: bool) -> Result<String, AgentError> {
        Err(AgentError::Disposed("agent-1".into()))
    }
    fn dispose(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

struct Env {
    kernel: Kernel,
    fiber: FiberHandle,
    agent: Arc<dyn Agent>,
    session: Arc<Session>,
    events: mpsc::UnboundedReceiver<String>,
}

async fn env(config: Value) -> Env {
    let mut reg = PluginRegistry::new();
    reg.register::<LlmRetryPlugin>();
    let kernel = Kernel::new(reg);
    let fiber = kernel.mount("llm-retry", config).unwrap();
    fiber.ready().await.unwrap();
    let (tx, events) = mpsc::unbounded_channel();
    let log = SessionLog::new(SessionHeader::new("agent-1", 0, Some("/tmp".into())));
    let session = Arc::new(Session::new(log, Arc::new(ChannelSink(tx))));
    let agent: Arc<dyn Agent> = Arc::new(FakeAgent {
        session: session.clone(),
        ctx: kernel.root(),
    });
    Env {
        kernel,
        fiber,
        agent,
        session,
        events,
    }
}

fn fast() -> Value {
    json!({"default": {"maxRetries": 2, "initialDelayMs": 1, "maxDelayMs": 20, "jitterRatio": 0}})
}

impl Env {
    fn input(
        &self,
        step: u64,
        failure: LlmFailure,
        cancel: &CancellationToken,
    ) -> RequestErrorInput {
        RequestErrorInput {
            agent: self.agent.clone(),
            turn: 1,
            step,
            attempt: 1,
            provider: "deepseek".into(),
            model: "deepseek-chat".into(),
            failure,
            cancel: cancel.clone(),
        }
    }

    /// Runs the hook with a terminal answering `terminal`; returns (decision, terminal ran).
    async fn call(
        &self,
        input: RequestErrorInput,
        terminal: RequestErrorDecision,
    ) -> (RequestErrorDecision, bool) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let d = self
            .kernel
            .root()
            .call::<AgentRequestError, _, _>(input, move |_| async move {
                let _ = tx.send(());
                terminal
            })
            .await;
        (d, rx.try_recv().is_ok())
    }

    fn logged(&self) -> Vec<(String, Value)> {
        self.session
            .events()
            .iter()
            .map(|e| (e.kind().to_owned(), e.data().clone()))
            .collect()
    }
}

fn server() -> LlmFailure {
    LlmFailure::new(codes::SERVER, "upstream 503").with_status(503)
}

#[tokio::test]
async fn retries_within_budget_recording_each_wait() {
    let e = env(fast()).await;
    let cancel = CancellationToken::new();
    for expected in [1, 2] {
        let (d, terminal) = e
            .call(e.input(1, server(), &cancel), RequestErrorDecision::Fail)
            .await;
        assert_eq!(d, RequestErrorDecision::Retry, "retry {expected}");
        assert!(!terminal);
    }
    // The budget (2) is spent: the failure goes down the chain.
    let (d, terminal) = e
        .call(e.input(1, server(), &cancel), RequestErrorDecision::Fail)
        .await;
    assert_eq!((d, terminal), (RequestErrorDecision::Fail, true));

    let logged = e.logged();
    let kinds: Vec<&str> = logged.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "llm/retry",
            "llm/retry-started",
            "llm/retry",
            "llm/retry-started"
        ]
    );
    let first = &logged[0].1;
    let id = first["retryId"].as_str().unwrap().to_owned();
    assert!(id.starts_with("retry-"));
    let mut expected = json!({
        "retryId": id, "turn": 1, "step": 1, "provider": "deepseek", "mode": "normal",
        "policyKey": "[\"normal\",2,[\"EMPTY_RESPONSE\",\"RATE_LIMIT\",\"SERVER\",\"TIMEOUT\",\"TRANSPORT\"],1,20,0]",
        "retry": 1, "maxRetries": 2, "delayMs": 1,
        "failure": {"message": "upstream 503", "code": "SERVER", "status": 503}
    });
    assert_eq!(
        serde_json::to_string(first).unwrap(),
        serde_json::to_string(&expected).unwrap()
    );
    assert_eq!(
        logged[1].1,
        json!({"retryId": id, "turn": 1, "step": 1, "retry": 1})
    );
    // The second retry doubles the delay and shares the policy key, with its own id.
    expected["retry"] = json!(2);
    expected["delayMs"] = json!(2);
    expected["retryId"] = logged[2].1["retryId"].clone();
    assert_ne!(logged[2].1["retryId"], first["retryId"]);
    assert_eq!(logged[2].1, expected);

    // A new step is a new chain.
    let (d, _) = e
        .call(e.input(2, server(), &cancel), RequestErrorDecision::Fail)
        .await;
    assert_eq!(d, RequestErrorDecision::Retry);
    assert_eq!(e.logged()[4].1["retry"], 1);
    e.kernel.dispose().await;
}

#[tokio::test]
async fn non_retryable_failures_go_down_the_chain_unrecorded() {
    let e = env(fast()).await;
    let cancel = CancellationToken::new();
    for code in [codes::AUTH, codes::CONTEXT_WINDOW_EXCEEDED, codes::ABORTED] {
        let (d, terminal) = e
            .call(
                e.input(1, LlmFailure::new(code.clone(), "no"), &cancel),
                RequestErrorDecision::Fail,
            )
            .await;
        assert_eq!((d, terminal), (RequestErrorDecision::Fail, true), "{code}");
    }
    // A downstream listener (e.g. overflow recovery) still gets its say.
    let (d, terminal) = e
        .call(
            e.input(
                1,
                LlmFailure::new(codes::CONTEXT_WINDOW_EXCEEDED, "long"),
                &cancel,
            ),
            RequestErrorDecision::Retry,
        )
        .await;
    assert_eq!((d, terminal), (RequestErrorDecision::Retry, true));
    assert!(e.logged().is_empty());
    e.kernel.dispose().await;
}

#[tokio::test]
async fn provider_retry_after_is_honoured_or_ends_retrying() {
    let e = env(fast()).await;
    let cancel = CancellationToken::new();
    let limited =
        |ms| LlmFailure::new(codes::RATE_LIMIT, "slow down").with_retry_after_ms(Some(ms));
    let (d, _) = e
        .call(e.input(1, limited(7), &cancel), RequestErrorDecision::Fail)
        .await;
    assert_eq!(d, RequestErrorDecision::Retry);
    assert_eq!(e.logged()[0].1["delayMs"], 7);
    assert_eq!(e.logged()[0].1["failure"]["providerRetryAfterMs"], 7);
    let (d, terminal) = e
        .call(e.input(1, limited(21), &cancel), RequestErrorDecision::Fail)
        .await;
    assert_eq!((d, terminal), (RequestErrorDecision::Fail, true));
    assert_eq!(e.logged().len(), 2);
    e.kernel.dispose().await;
}

#[tokio::test]
async fn cancellation_during_the_wait_wins() {
    let mut e = env(json!({"default": {"initialDelayMs": 60000, "maxDelayMs": 60000}})).await;
    let cancel = CancellationToken::new();
    let input = e.input(1, server(), &cancel);
    let root = e.kernel.root();
    let call = tokio::spawn(async move {
        root.call::<AgentRequestError, _, _>(input, |_| async { RequestErrorDecision::Fail })
            .await
    });
    let first = tokio::time::timeout(Duration::from_secs(10), e.events.recv())
        .await
        .unwrap();
    assert_eq!(first.as_deref(), Some("llm/retry"));
    cancel.cancel();
    let d = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d, RequestErrorDecision::Fail);
    let kinds: Vec<String> = e.logged().into_iter().map(|(k, _)| k).collect();
    assert_eq!(kinds, ["llm/retry"], "no llm/retry-started after a cancel");

    // An already-cancelled turn is not retried at all.
    let (d, terminal) = e
        .call(e.input(1, server(), &cancel), RequestErrorDecision::Fail)
        .await;
    assert_eq!((d, terminal), (RequestErrorDecision::Fail, true));
    assert_eq!(e.logged().len(), 1);
    e.kernel.dispose().await;
}

#[tokio::test]
async fn unloading_the_plugin_drains_pending_waits() {
    let mut e = env(json!({"default": {"initialDelayMs": 60000, "maxDelayMs": 60000}})).await;
    let cancel = CancellationToken::new();
    let input = e.input(1, server(), &cancel);
    let root = e.kernel.root();
    let call = tokio::spawn(async move {
        root.call::<AgentRequestError, _, _>(input, |_| async { RequestErrorDecision::Fail })
            .await
    });
    let first = tokio::time::timeout(Duration::from_secs(10), e.events.recv())
        .await
        .unwrap();
    assert_eq!(first.as_deref(), Some("llm/retry"));
    e.fiber.dispose().await;
    let d = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d, RequestErrorDecision::Fail);
    assert_eq!(e.logged().len(), 1);
    e.kernel.dispose().await;
}

#[tokio::test]
async fn always_mode_lets_downstream_recover_first_then_retries_anything() {
    let e = env(json!({
        "providers": {"deepseek": {"mode": "always", "initialDelayMs": 1, "maxDelayMs": 2}}
    }))
    .await;
    let cancel = CancellationToken::new();
    // Downstream recovers: no retry record.
    let (d, terminal) = e
        .call(
            e.input(
                1,
                LlmFailure::new(codes::CONTEXT_WINDOW_EXCEEDED, "long"),
                &cancel,
            ),
            RequestErrorDecision::Retry,
        )
        .await;
    assert_eq!((d, terminal), (RequestErrorDecision::Retry, true));
    assert!(e.logged().is_empty());
    // Downstream gives up: the policy retries even AUTH, without a budget.
    for n in 1..=7 {
        let (d, terminal) = e
            .call(
                e.input(1, LlmFailure::new(codes::AUTH, "bad key"), &cancel),
                RequestErrorDecision::Fail,
            )
            .await;
        assert_eq!(
            (d, terminal),
            (RequestErrorDecision::Retry, true),
            "retry {n}"
        );
    }
    let logged = e.logged();
    assert_eq!(logged.len(), 14);
    let last = &logged[12].1;
    assert_eq!(last["mode"], "always");
    assert_eq!(last["retry"], 7);
    assert_eq!(last["delayMs"], 2);
    assert!(last.get("maxRetries").is_none());
    e.kernel.dispose().await;
}

#[tokio::test]
async fn per_provider_budgets_and_config_errors() {
    let e = env(json!({
        "default": {"initialDelayMs": 1, "maxDelayMs": 1},
        "providers": {"deepseek": {"maxRetries": 0}}
    }))
    .await;
    let cancel = CancellationToken::new();
    let (d, terminal) = e
        .call(e.input(1, server(), &cancel), RequestErrorDecision::Fail)
        .await;
    assert_eq!((d, terminal), (RequestErrorDecision::Fail, true));
    let mut other = e.input(1, server(), &cancel);
    other.provider = "other".into();
    let (d, _) = e.call(other, RequestErrorDecision::Fail).await;
    assert_eq!(d, RequestErrorDecision::Retry);
    e.kernel.dispose().await;

    let mut reg = PluginRegistry::new();
    reg.register::<LlmRetryPlugin>();
    let kernel = Kernel::new(reg);
    let err = kernel
        .mount("llm-retry", json!({"default": {"maxRetrys": 1}}))
        .unwrap_err();
    assert!(err.to_string().contains("maxRetrys"), "{err}");
    let fiber = kernel
        .mount("llm-retry", json!({"providers": {"x": {"jitterRatio": 2}}}))
        .unwrap();
    let err = fiber.ready().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("providers.x: jitterRatio must be a number in [0, 1], got 2"),
        "{err}"
    );
    kernel.dispose().await;
}
