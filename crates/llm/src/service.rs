//! The `Llm` kernel service: provider routes, call preparation, and streaming through the
//! `llm/stream` hook with the bound adapter at the end of the chain.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use dsh_kernel::{BoxError, Ctx, EmptyConfig, Hook, Plugin, Registration, Service};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use crate::adapter::{
    ChunkStream, LlmAdapter, LlmRequest, ModelInfo, ReasoningEffort, SystemPromptUpdate, ToolSpec,
    ToolUpdate,
};
use crate::chunk::{LlmFailure, codes};
use crate::message::Message;

/// Registration failures of the [`Llm`] service.
#[derive(Debug, Error)]
pub enum LlmError {
    /// The route already has an adapter.
    #[error("provider route `{route}` is already registered by `{owner}`")]
    DuplicateRoute {
        /// The route.
        route: String,
        /// Plugin that registered it first.
        owner: String,
    },
    /// A route name that is empty.
    #[error("provider route must be a non-empty string")]
    EmptyRoute,
    /// The kernel refused to record the registration (e.g. the caller's fiber is unloading).
    #[error(transparent)]
    Kernel(#[from] dsh_kernel::KernelError),
}

/// What the caller asks for; `None` fields are materialised from the adapter's defaults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallSettings {
    /// Provider route (required).
    pub provider: String,
    /// Model id; default: the adapter's default model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Effort; default: the model's default effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<ReasoningEffort>,
    /// Output cap; default: the model's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Temperature (no default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Stop sequences (no default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Purpose of the call (e.g. `session-title`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
}

/// Which fields of a [`PreparedCall`] came from defaults rather than the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Defaulted {
    /// The model was the adapter's default.
    pub model: bool,
    /// The effort was the model's default.
    pub effort: bool,
    /// `max_tokens` was the model's default.
    pub max_tokens: bool,
}

/// A call bound to one route with every default materialised.
#[derive(Clone, Debug, PartialEq)]
pub struct PreparedCall {
    /// Provider route.
    pub provider: String,
    /// The resolved model.
    pub model: ModelInfo,
    /// Effort (when the model has efforts), validated against the route's list.
    pub effort: Option<ReasoningEffort>,
    /// Output cap.
    pub max_tokens: u64,
    /// Temperature.
    pub temperature: Option<f64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Purpose.
    pub purpose: Option<String>,
    /// Which of the above were defaults.
    pub defaulted: Defaulted,
    /// The route's system-prompt update capability (from [`ModelInfo`]); `None` = none.
    pub system_prompt_update: Option<SystemPromptUpdate>,
    /// The route's tool update capability (from [`ModelInfo`]); `None` = none.
    pub tool_update: Option<ToolUpdate>,
}

impl PreparedCall {
    /// A call of `model` on `provider` with the model's defaults (effort, output cap and
    /// capabilities) and nothing else set: what `prepare_call` gives for empty settings.
    pub fn with_defaults(provider: impl Into<String>, model: ModelInfo) -> Self {
        PreparedCall {
            provider: provider.into(),
            effort: model.default_effort.clone(),
            max_tokens: model.default_max_tokens,
            temperature: None,
            stop: Vec::new(),
            purpose: None,
            defaulted: Defaulted {
                model: false,
                effort: model.default_effort.is_some(),
                max_tokens: true,
            },
            system_prompt_update: model.system_prompt_update,
            tool_update: model.tool_update,
            model,
        }
    }

    /// The request for one attempt of this call.
    pub fn request(
        &self,
        messages: Vec<Arc<Message>>,
        tools: Vec<ToolSpec>,
        cancel: CancellationToken,
    ) -> LlmRequest {
        LlmRequest {
            call: self.clone(),
            messages,
            tools,
            cancel,
        }
    }
}

/// The `llm/stream` hook: around-middleware over one attempt. The bound adapter is the terminal;
/// listeners may observe, rewrite the request, wrap the stream or short-circuit (tests, replay).
pub struct LlmStream;

impl Hook for LlmStream {
    const NAME: &'static str = "llm/stream";
    type Input = LlmRequest;
    type Output = Result<ChunkStream, LlmFailure>;
}

/// The LLM service (kernel name `llm`).
pub trait Llm: Send + Sync + 'static {
    /// Registers `adapter` for `route`, owned by `ctx`'s fiber (removed when it unloads, or when
    /// the returned registration is disposed). A route that is taken is an error.
    fn register(
        &self,
        ctx: &Ctx,
        route: &str,
        adapter: Arc<dyn LlmAdapter>,
    ) -> Result<Registration, LlmError>;

    /// The registered routes, sorted.
    fn routes(&self) -> Vec<String>;

    /// The adapter of a route.
    fn adapter(&self, route: &str) -> Option<Arc<dyn LlmAdapter>>;

    /// Who registered a route (the owning plugin's name), for listings.
    fn route_owner(&self, route: &str) -> Option<String> {
        let _ = route;
        None
    }

    /// Binds one adapter and materialises its defaults. Fails before any I/O with `NO_ADAPTER`
    /// for an unknown route and `UNSUPPORTED_REASONING_EFFORT` for an effort the model lacks.
    fn prepare_call(&self, settings: &CallSettings) -> Result<PreparedCall, LlmFailure>;

    /// The prices of `model` on route `provider` (`None`: no such route or model, or no
    /// prices): what front ends price usage with.
    fn pricing(&self, provider: &str, model: &str) -> Option<crate::ModelPricing> {
        self.prepare_call(&CallSettings {
            provider: provider.to_owned(),
            model: Some(model.to_owned()),
            ..Default::default()
        })
        .ok()?
        .model
        .pricing
    }

    /// Streams one attempt through `llm/stream` (dispatched in `ctx`'s scope) with the route's
    /// adapter at the end of the chain; `NO_ADAPTER` when the route has none at that point.
    fn stream(
        &self,
        ctx: &Ctx,
        request: LlmRequest,
    ) -> BoxFuture<'static, Result<ChunkStream, LlmFailure>>;
}

impl Service for dyn Llm {
    const NAME: &'static str = "llm";
}

struct Route {
    id: u64,
    owner: String,
    adapter: Arc<dyn LlmAdapter>,
}

#[derive(Default)]
struct Routes {
    next_id: u64,
    map: HashMap<String, Route>,
}

/// The standard [`Llm`] implementation: a route table.
#[derive(Default, Clone)]
pub struct LlmRouter {
    routes: Arc<Mutex<Routes>>,
}

fn no_adapter(route: &str) -> LlmFailure {
    LlmFailure::new(
        codes::NO_ADAPTER,
        format!("no LLM adapter is registered for provider `{route}`"),
    )
}

/// [`no_adapter`] naming the routes that are registered, so a typo is one look away.
fn no_adapter_among(route: &str, known: &[String]) -> LlmFailure {
    let mut f = no_adapter(route);
    if known.is_empty() {
        f.message.push_str(" (no provider routes are registered)");
    } else {
        f.message
            .push_str(&format!(" (known routes: {})", known.join(", ")));
    }
    f
}

impl LlmRouter {
    /// An empty route table.
    pub fn new() -> Self {
        Self::default()
    }

    fn remove(routes: &Weak<Mutex<Routes>>, route: &str, id: u64) {
        if let Some(routes) = routes.upgrade() {
            let mut r = routes.lock();
            if r.map.get(route).is_some_and(|e| e.id == id) {
                r.map.remove(route);
            }
        }
    }
}

impl Llm for LlmRouter {
    fn register(
        &self,
        ctx: &Ctx,
        route: &str,
        adapter: Arc<dyn LlmAdapter>,
    ) -> Result<Registration, LlmError> {
        if route.is_empty() {
            return Err(LlmError::EmptyRoute);
        }
        let id = {
            let mut r = self.routes.lock();
            if let Some(existing) = r.map.get(route) {
                return Err(LlmError::DuplicateRoute {
                    route: route.to_owned(),
                    owner: existing.owner.clone(),
                });
            }
            r.next_id += 1;
            let id = r.next_id;
            r.map.insert(
                route.to_owned(),
                Route {
                    id,
                    owner: ctx.owner_name().to_owned(),
                    adapter,
                },
            );
            id
        };
        let weak = Arc::downgrade(&self.routes);
        let name = route.to_owned();
        match ctx.on_dispose(move || Self::remove(&weak, &name, id)) {
            Ok(reg) => Ok(reg),
            Err(e) => {
                Self::remove(&Arc::downgrade(&self.routes), route, id);
                Err(e.into())
            }
        }
    }

    fn routes(&self) -> Vec<String> {
        let mut v: Vec<String> = self.routes.lock().map.keys().cloned().collect();
        v.sort();
        v
    }

    fn adapter(&self, route: &str) -> Option<Arc<dyn LlmAdapter>> {
        self.routes.lock().map.get(route).map(|r| r.adapter.clone())
    }

    fn route_owner(&self, route: &str) -> Option<String> {
        self.routes.lock().map.get(route).map(|r| r.owner.clone())
    }

    fn prepare_call(&self, settings: &CallSettings) -> Result<PreparedCall, LlmFailure> {
        let adapter = self
            .adapter(&settings.provider)
            .ok_or_else(|| no_adapter_among(&settings.provider, &self.routes()))?;
        let mut defaulted = Defaulted::default();
        let model_id = match &settings.model {
            Some(m) if !m.is_empty() => m.clone(),
            _ => {
                defaulted.model = true;
                adapter.default_model()
            }
        };
        let model = adapter.resolve_model(&model_id);
        let effort = match &settings.effort {
            Some(e) => {
                if !model.reasoning_efforts.iter().any(|x| x == e) {
                    return Err(LlmFailure::new(
                        codes::UNSUPPORTED_REASONING_EFFORT,
                        format!(
                            "reasoning effort `{e}` is not supported by `{}` on `{}` (supported: {})",
                            model.id,
                            settings.provider,
                            if model.reasoning_efforts.is_empty() {
                                "none".to_owned()
                            } else {
                                model
                                    .reasoning_efforts
                                    .iter()
                                    .map(ReasoningEffort::as_str)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            }
                        ),
                    ));
                }
                Some(e.clone())
            }
            None => {
                defaulted.effort = model.default_effort.is_some();
                model.default_effort.clone()
            }
        };
        let max_tokens = match settings.max_tokens {
            Some(m) => m,
            None => {
                defaulted.max_tokens = true;
                model.default_max_tokens
            }
        };
        Ok(PreparedCall {
            provider: settings.provider.clone(),
            system_prompt_update: model.system_prompt_update,
            tool_update: model.tool_update,
            model,
            effort,
            max_tokens,
            temperature: settings.temperature,
            stop: settings.stop.clone(),
            purpose: settings.purpose.clone(),
            defaulted,
        })
    }

    fn stream(
        &self,
        ctx: &Ctx,
        request: LlmRequest,
    ) -> BoxFuture<'static, Result<ChunkStream, LlmFailure>> {
        let routes = self.routes.clone();
        ctx.call::<LlmStream, _, _>(request, move |request: LlmRequest| async move {
            let adapter = routes
                .lock()
                .map
                .get(&request.call.provider)
                .map(|r| r.adapter.clone());
            match adapter {
                Some(a) => a.stream(request).await,
                None => Err(no_adapter(&request.call.provider)),
            }
        })
    }
}

/// Plugin `llm`: provides the [`Llm`] service (an empty [`LlmRouter`]). Adapter plugins depend
/// on it and register their routes.
pub struct LlmPlugin;

impl Plugin for LlmPlugin {
    const NAME: &'static str = "llm";
    type Config = EmptyConfig;

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        ctx.provide::<dyn Llm>(Arc::new(LlmRouter::new()) as Arc<dyn Llm>)?;
        Ok(())
    }
}
