//! [`TestHarness`]: the built kernel and the steps suites take on it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_agent::{Agent, AgentOptions, Agents, CreateAgent, ResumeAgent};
use dsh_kernel::{Ctx, FiberHandle, Kernel, Notify, Service};
use dsh_session::SessionEvent;
use dsh_testkit::scripted::{Script, ScriptedAdapter, calls, text};
use dsh_tools::{Tool, Tools};
use tokio::sync::mpsc;

use crate::{Call, ROUTE, TestHarnessBuilder, idle, must, user};

/// A kernel with the scripted model, the agent loop, the tools service and a session store.
pub struct TestHarness {
    /// The kernel (its root context is [`root`](Self::root)).
    pub kernel: Kernel,
    /// The scripted model: queue attempts with `push`, read what it was sent with `requests`,
    /// `messages` and `wait_requests`.
    pub llm: Arc<ScriptedAdapter>,
    pub(crate) fibers: Vec<FiberHandle>,
    pub(crate) cwd: PathBuf,
    pub(crate) store_root: Option<PathBuf>,
    pub(crate) _dir: tempfile::TempDir,
}

impl std::fmt::Debug for TestHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestHarness")
            .field("llm", &self.llm)
            .field("cwd", &self.cwd)
            .field("store_root", &self.store_root)
            .finish()
    }
}

impl TestHarness {
    /// A builder with the core only.
    pub fn builder() -> TestHarnessBuilder {
        TestHarnessBuilder::default()
    }

    /// The kernel's root context.
    pub fn root(&self) -> Ctx {
        self.kernel.root()
    }

    /// Service `S` from the root context (panics when nobody provides it).
    pub fn get<S: Service + ?Sized>(&self) -> Arc<S> {
        match self.root().get::<S>() {
            Some(s) => s,
            None => panic!("no service `{}`", std::any::type_name::<S>()),
        }
    }

    /// The agents service.
    pub fn agents(&self) -> Arc<dyn Agents> {
        self.get::<dyn Agents>()
    }

    /// The tools service.
    pub fn tools(&self) -> Arc<dyn Tools> {
        self.get::<dyn Tools>()
    }

    /// Registers a tool from the root context.
    pub fn register_tool(&self, tool: impl Tool) {
        let name = tool.name().to_owned();
        must(
            self.tools().register(&self.root(), Arc::new(tool)),
            &format!("register tool `{name}`"),
        );
    }

    /// The fiber of the plugin mounted as `name` (e.g. `agent-loop`, for live config updates).
    pub fn fiber(&self, name: &str) -> &FiberHandle {
        match self.fibers.iter().find(|f| f.name() == name) {
            Some(f) => f,
            None => panic!("no fiber `{name}`"),
        }
    }

    /// A fresh directory, removed with the harness: the working directory of
    /// [`options`](Self::options) (canonical, so it compares equal to what tools resolve).
    pub fn dir(&self) -> &Path {
        &self.cwd
    }

    /// The root of the JSONL store (`None`: sessions live in memory only).
    pub fn store_root(&self) -> Option<&Path> {
        self.store_root.as_deref()
    }

    /// The options of [`agent`](Self::agent): the scripted route and [`dir`](Self::dir).
    pub fn options(&self) -> AgentOptions {
        AgentOptions {
            provider: Some(ROUTE.into()),
            cwd: self.cwd.clone(),
            ..Default::default()
        }
    }

    /// A new agent with [`options`](Self::options).
    pub async fn agent(&self) -> Arc<dyn Agent> {
        self.create(CreateAgent {
            options: self.options(),
            ..Default::default()
        })
        .await
    }

    /// A new agent from this spec.
    pub async fn create(&self, spec: CreateAgent) -> Arc<dyn Agent> {
        must(
            self.agents().create(&self.root(), spec).await,
            "create an agent",
        )
    }

    /// Resumes a stored session on the scripted route (its own working directory).
    pub async fn resume(&self, session_id: &str) -> Arc<dyn Agent> {
        let spec = ResumeAgent {
            session_id: session_id.to_owned(),
            options: AgentOptions {
                provider: Some(ROUTE.into()),
                ..Default::default()
            },
            setup: None,
        };
        must(
            self.agents().resume(&self.root(), spec).await,
            "resume an agent",
        )
    }

    /// A channel fed with `f` of every notification `E` (listened to from the root context).
    pub fn on<E: Notify, T: Send + 'static>(
        &self,
        f: impl Fn(&E) -> T + Send + Sync + 'static,
    ) -> mpsc::UnboundedReceiver<T> {
        let (tx, rx) = mpsc::unbounded_channel();
        must(
            self.root().on::<E>(move |e| {
                let _ = tx.send(f(e));
                Ok(())
            }),
            "listen",
        );
        rx
    }

    /// The types of committed session events (every session's), as they are committed.
    pub fn committed_kinds(&self) -> mpsc::UnboundedReceiver<String> {
        self.on::<SessionEvent, _>(|e| e.event.kind().to_owned())
    }

    /// Sends `prompt` as a follow-up and waits (bounded) for the agent to be idle again.
    pub async fn prompt(&self, agent: &Arc<dyn Agent>, prompt: &str) {
        must(agent.followup(user(prompt)), "follow-up");
        idle(agent).await;
    }

    /// One turn the model answers with `answer`: queues it, then [`prompt`](Self::prompt).
    pub async fn reply(&self, agent: &Arc<dyn Agent>, prompt: &str, answer: &str) {
        self.llm.push(Script::Chunks(text(answer)));
        self.prompt(agent, prompt).await;
    }

    /// One turn (prompt "go") of scripted steps, each a list of tool calls, then the text
    /// `last`. Returns the tool results of every step, in order, as the request after it
    /// carried them (each serialised as JSON, as [`ScriptedAdapter::messages`]).
    pub async fn tool_turn(
        &self,
        agent: &Arc<dyn Agent>,
        steps: &[&[Call<'_>]],
        last: &str,
    ) -> Vec<String> {
        let before = self.llm.request_count();
        for s in steps {
            self.llm.push(Script::Chunks(calls(s)));
        }
        self.llm.push(Script::Chunks(text(last)));
        must(agent.followup(user("go")), "follow-up");
        self.llm.wait_requests(before + steps.len() + 1).await;
        idle(agent).await;
        let mut out = Vec::new();
        for (i, s) in steps.iter().enumerate() {
            let msgs = self.llm.messages(before + i + 1);
            out.extend(msgs[msgs.len() - s.len()..].iter().cloned());
        }
        out
    }

    /// Disposes the kernel (every fiber, agents included).
    pub async fn dispose(&self) {
        self.kernel.dispose().await;
    }
}
