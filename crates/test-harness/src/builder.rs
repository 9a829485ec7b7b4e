//! [`TestHarnessBuilder`]: what the kernel mounts, in which order, and what it starts with.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::AgentsPlugin;
use dsh_agent_loop::{AgentLoopConfig, AgentLoopPlugin};
use dsh_kernel::{
    Composer, Composition, EmptyConfig, FiberHandle, Kernel, KernelError, Layer, Plugin,
    PluginRegistry,
};
use dsh_llm::service::LlmPlugin;
use dsh_session::SessionsPlugin;
use dsh_session_jsonl::{JsonlConfig, JsonlPlugin};
use dsh_testkit::scripted::{Script, ScriptedAdapter, ScriptedRoute, ScriptedRouteConfig};
use dsh_tools::{Tool, Tools, ToolsConfig, ToolsPlugin};
use serde_json::Value;

use crate::{ROUTE, TestHarness, must};

type Mount = Box<dyn FnOnce(&Kernel) -> Result<FiberHandle, KernelError> + Send>;

/// Where sessions are kept.
#[derive(Clone, Debug, Default)]
enum Store {
    /// In memory only (the sessions service alone).
    #[default]
    Memory,
    /// JSONL on disk, under `<harness dir>/sessions`.
    Harness,
    /// JSONL on disk, under this root.
    At(PathBuf),
}

/// Builds a [`TestHarness`]. The kernel always mounts, in this order: the scripted route
/// (`mock`), `llm`, `agents`, the JSONL store when asked for, `sessions`, `tools`,
/// `agent-loop`; then the plugins added with [`plugin`](Self::plugin) and
/// [`plugin_json`](Self::plugin_json), in the order they were added. Every fiber is ready
/// before [`build`](Self::build) returns, and the tools added with [`tool`](Self::tool) are
/// registered after that.
pub struct TestHarnessBuilder {
    registry: PluginRegistry,
    plugins: Vec<(&'static str, Mount)>,
    patches: Vec<String>,
    loop_config: AgentLoopConfig,
    tools_config: ToolsConfig,
    tools: Vec<Arc<dyn Tool>>,
    llm: Arc<ScriptedAdapter>,
    store: Store,
}

impl std::fmt::Debug for TestHarnessBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestHarnessBuilder")
            .field("plugins", &self.plugins.len())
            .field("tools", &self.tools.len())
            .field("llm", &self.llm)
            .field("store", &self.store)
            .finish()
    }
}

impl Default for TestHarnessBuilder {
    fn default() -> Self {
        Self {
            registry: PluginRegistry::new(),
            plugins: Vec::new(),
            patches: Vec::new(),
            loop_config: AgentLoopConfig::default(),
            tools_config: ToolsConfig::default(),
            tools: Vec::new(),
            llm: Arc::new(ScriptedAdapter::default()),
            store: Store::Memory,
        }
    }
}

impl TestHarnessBuilder {
    /// Mounts plugin `P` with a typed config, after the core.
    pub fn plugin<P: Plugin>(mut self, config: P::Config) -> Self {
        self.plugins.push((
            P::NAME,
            Box::new(move |k: &Kernel| k.mount_plugin::<P>(config)),
        ));
        self
    }

    /// Registers plugin `P` and mounts it by name with a JSON config (as a composition does:
    /// the config goes through `P`'s schema and its unknown-field check).
    pub fn plugin_json<P: Plugin>(mut self, config: Value) -> Self {
        self.registry.register::<P>();
        self.plugins.push((
            P::NAME,
            Box::new(move |k: &Kernel| k.mount(P::NAME, config)),
        ));
        self
    }

    /// A composition layer in the YAML of `dsh.yaml` (`plugins: [{id, name, config, disabled}]`),
    /// as the binary layers its files: the layers compose in the order they were added (a later
    /// row with the same id replaces or disables an earlier one) and are mounted after the
    /// plugins added with [`plugin`](Self::plugin). The plugins they name must be registered
    /// ([`register`](Self::register)).
    pub fn config_patch(mut self, yaml: &str) -> Self {
        self.patches.push(yaml.to_owned());
        self
    }

    /// Registers plugin `P` without mounting it (for [`config_patch`](Self::config_patch), or
    /// for tests that mount it by name later).
    pub fn register<P: Plugin>(mut self) -> Self {
        self.registry.register::<P>();
        self
    }

    /// The agent loop's config (default: `AgentLoopConfig::default()`).
    pub fn loop_config(mut self, config: AgentLoopConfig) -> Self {
        self.loop_config = config;
        self
    }

    /// The tools service's config (default: `ToolsConfig::default()`).
    pub fn tools_config(mut self, config: ToolsConfig) -> Self {
        self.tools_config = config;
        self
    }

    /// A tool registered on the tools service once the kernel is ready.
    pub fn tool(mut self, tool: impl Tool) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Queues one scripted model attempt (more can be pushed later on [`TestHarness::llm`]).
    pub fn script(self, script: Script) -> Self {
        self.llm.push(script);
        self
    }

    /// Queues scripted model attempts, in order.
    pub fn scripts(self, scripts: impl IntoIterator<Item = Script>) -> Self {
        for s in scripts {
            self.llm.push(s);
        }
        self
    }

    /// Uses this scripted model (e.g. one shared by two harnesses, or with capabilities set).
    pub fn llm(mut self, llm: Arc<ScriptedAdapter>) -> Self {
        self.llm = llm;
        self
    }

    /// Keeps sessions as JSONL under `<harness dir>/sessions` ([`TestHarness::store_root`]).
    pub fn on_disk(mut self) -> Self {
        self.store = Store::Harness;
        self
    }

    /// Keeps sessions as JSONL under `root` (e.g. to resume them from a second harness).
    pub fn on_disk_at(mut self, root: impl Into<PathBuf>) -> Self {
        self.store = Store::At(root.into());
        self
    }

    /// Mounts everything and waits until every fiber is ready.
    ///
    /// # Panics
    /// When a plugin fails to mount or to become ready, or a tool cannot be registered: the
    /// message names the step.
    pub async fn build(self) -> TestHarness {
        let dir = must(tempfile::tempdir(), "the harness directory");
        let cwd = must(dir.path().canonicalize(), "the harness directory");
        let store_root = match self.store {
            Store::Memory => None,
            Store::Harness => Some(cwd.join("sessions")),
            Store::At(root) => Some(root),
        };
        let kernel = Kernel::new(self.registry);
        let mut fibers = vec![
            must(
                kernel.mount_plugin::<ScriptedRoute>(ScriptedRouteConfig {
                    route: Some(ROUTE.into()),
                    adapter: Some(self.llm.clone()),
                }),
                "mount scripted-route",
            ),
            must(
                kernel.mount_plugin::<LlmPlugin>(EmptyConfig {}),
                "mount llm",
            ),
            must(
                kernel.mount_plugin::<AgentsPlugin>(EmptyConfig {}),
                "mount agents",
            ),
        ];
        if let Some(root) = &store_root {
            fibers.push(must(
                kernel.mount_plugin::<JsonlPlugin>(JsonlConfig {
                    root: Some(root.clone()),
                    ..Default::default()
                }),
                "mount session-jsonl",
            ));
        }
        fibers.push(must(
            kernel.mount_plugin::<SessionsPlugin>(EmptyConfig {}),
            "mount sessions",
        ));
        fibers.push(must(
            kernel.mount_plugin::<ToolsPlugin>(self.tools_config),
            "mount tools",
        ));
        fibers.push(must(
            kernel.mount_plugin::<AgentLoopPlugin>(self.loop_config),
            "mount agent-loop",
        ));
        for (name, mount) in self.plugins {
            fibers.push(must(mount(&kernel), &format!("mount plugin `{name}`")));
        }
        if !self.patches.is_empty() {
            let layers: Vec<Layer> = self
                .patches
                .iter()
                .enumerate()
                .map(|(i, yaml)| must(Layer::parse(format!("patch {i}"), yaml), "config patch"))
                .collect();
            let composition = must(
                Composition::compose(&layers, kernel.registry()),
                "config patch",
            );
            let mut composer = Composer::new(kernel.root());
            must(composer.apply(&composition).await, "apply the config patch");
            for id in composer.ids() {
                fibers.extend(composer.fiber(id).cloned());
            }
        }
        for f in &fibers {
            must(f.ready().await, &format!("plugin `{}` not ready", f.name()));
        }
        let root = kernel.root();
        if !self.tools.is_empty() {
            let Some(tools) = root.get::<dyn Tools>() else {
                panic!("no tools service");
            };
            for tool in self.tools {
                let name = tool.name().to_owned();
                must(
                    tools.register(&root, tool),
                    &format!("register tool `{name}`"),
                );
            }
        }
        TestHarness {
            kernel,
            llm: self.llm,
            fibers,
            cwd,
            store_root,
            _dir: dir,
        }
    }
}
