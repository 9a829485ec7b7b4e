//! The test harness of dsh: one builder for the kernel that plugin suites drive through the real
//! agent loop with a scripted model (in the spirit of codex-rs's `TestCodexBuilder`).
//!
//! ```no_run
//! # async fn demo() {
//! use dsh_test_harness::{Script, TestHarness, text};
//!
//! let h = TestHarness::builder()
//!     // .plugin::<SomePlugin>(SomeConfig::default())
//!     .script(Script::Chunks(text("hello")))
//!     .build()
//!     .await;
//! let agent = h.agent().await;
//! h.prompt(&agent, "hi").await;
//! assert_eq!(h.llm.request_count(), 1);
//! # }
//! ```
//!
//! A test-only composition root: it mounts implementations (the agent loop, the JSONL store)
//! and panics, with a message naming the step, when the setup fails. Use it only as a
//! `[dev-dependency]`.

mod builder;
pub mod e2e;
mod harness;
pub mod postgres;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_llm::Message;
use serde_json::Value;
use tokio::sync::mpsc;

pub use builder::TestHarnessBuilder;
pub use dsh_testkit::scripted::{Script, ScriptedAdapter, calls, calls_with, text};
pub use harness::TestHarness;

/// The route the scripted model is registered under, and the provider of
/// [`TestHarness::options`].
pub const ROUTE: &str = "mock";

/// How long any helper waits for something the test is sure will happen.
pub const BOUND: Duration = Duration::from_secs(10);

/// A scripted tool call: `(id, name, arguments)`.
pub type Call<'a> = (&'a str, &'a str, &'a str);

/// A user message with this text.
pub fn user(text: &str) -> Message {
    Message::user_text("", text)
}

/// `fut`, or a panic naming `what` after [`BOUND`].
pub async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(BOUND, fut).await {
        Ok(out) => out,
        Err(_) => panic!("{what}: not within {BOUND:?}"),
    }
}

/// Waits for the agent to be idle (bounded).
pub async fn idle(agent: &Arc<dyn Agent>) {
    within("agent never went idle", agent.when_idle()).await;
}

/// The next item of a channel made by [`TestHarness::on`] (bounded; panics when closed).
pub async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    match within("no event", rx.recv()).await {
        Some(item) => item,
        None => panic!("the event channel closed"),
    }
}

/// Everything a channel made by [`TestHarness::on`] received so far (without waiting).
pub fn drain<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> Vec<T> {
    let mut out = Vec::new();
    while let Ok(item) = rx.try_recv() {
        out.push(item);
    }
    out
}

/// Event types of the agent's session, in order.
pub fn kinds(agent: &Arc<dyn Agent>) -> Vec<String> {
    agent
        .session()
        .events()
        .iter()
        .map(|e| e.kind().to_owned())
        .collect()
}

/// Data of every event of `kind`, in order.
pub fn data_of(agent: &Arc<dyn Agent>, kind: &str) -> Vec<Value> {
    agent
        .session()
        .events()
        .iter()
        .filter(|e| e.kind() == kind)
        .map(|e| e.data().clone())
        .collect()
}

/// Data of the newest event of `kind` (panics when there is none).
pub fn last_data(agent: &Arc<dyn Agent>, kind: &str) -> Value {
    match data_of(agent, kind).pop() {
        Some(data) => data,
        None => panic!("no `{kind}` event in {:?}", kinds(agent)),
    }
}

/// The value of a setup step, or a panic naming it.
fn must<T, E: std::fmt::Display>(result: Result<T, E>, what: &str) -> T {
    match result {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e}"),
    }
}
