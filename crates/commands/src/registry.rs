//! The standard registry and its plugin.

use std::sync::Arc;

use dsh_agent::Agent;
use dsh_kernel::{BoxError, Ctx, EmptyConfig, Plugin, ScopeKey};
use dsh_protocol::CommandInfo;
use parking_lot::RwLock;

use crate::{
    CommandCall, CommandError, CommandFuture, CommandHandler, CommandProvider, CommandSpec,
    Commands, CommandsError, valid_name,
};

struct Fixed {
    id: u64,
    scope: Option<ScopeKey>,
    owner: String,
    spec: CommandSpec,
    handler: Arc<dyn CommandHandler>,
}

struct Provided {
    id: u64,
    scope: Option<ScopeKey>,
    provider: Arc<dyn CommandProvider>,
}

#[derive(Default)]
struct Entries {
    next: u64,
    fixed: Vec<Fixed>,
    providers: Vec<Provided>,
}

/// The standard [`Commands`] implementation.
#[derive(Clone, Default)]
pub struct CommandsRegistry {
    entries: Arc<RwLock<Entries>>,
}

impl std::fmt::Debug for CommandsRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = self.entries.read();
        f.debug_struct("CommandsRegistry")
            .field("fixed", &e.fixed.len())
            .field("providers", &e.providers.len())
            .finish()
    }
}

fn visible(scope: &Option<ScopeKey>, agent: &Arc<dyn Agent>) -> bool {
    match scope {
        None => true,
        Some(s) => agent.ctx().scope_key().as_ref() == Some(s),
    }
}

impl Commands for CommandsRegistry {
    fn register(
        &self,
        ctx: &Ctx,
        spec: CommandSpec,
        handler: Arc<dyn CommandHandler>,
    ) -> Result<(), CommandsError> {
        if !valid_name(&spec.name) {
            return Err(CommandsError::InvalidName(spec.name));
        }
        let scope = ctx.scope_key();
        let id = {
            let mut e = self.entries.write();
            if let Some(existing) = e
                .fixed
                .iter()
                .find(|f| f.scope == scope && f.spec.name == spec.name)
            {
                return Err(CommandsError::Duplicate {
                    name: spec.name,
                    owner: existing.owner.clone(),
                });
            }
            e.next += 1;
            let id = e.next;
            e.fixed.push(Fixed {
                id,
                scope,
                owner: ctx.owner_name().to_owned(),
                spec,
                handler,
            });
            id
        };
        let entries = Arc::downgrade(&self.entries);
        ctx.on_dispose(move || {
            if let Some(e) = entries.upgrade() {
                e.write().fixed.retain(|f| f.id != id);
            }
        })?;
        Ok(())
    }

    fn provide(&self, ctx: &Ctx, provider: Arc<dyn CommandProvider>) -> Result<(), CommandsError> {
        let scope = ctx.scope_key();
        let id = {
            let mut e = self.entries.write();
            e.next += 1;
            let id = e.next;
            e.providers.push(Provided {
                id,
                scope,
                provider,
            });
            id
        };
        let entries = Arc::downgrade(&self.entries);
        ctx.on_dispose(move || {
            if let Some(e) = entries.upgrade() {
                e.write().providers.retain(|p| p.id != id);
            }
        })?;
        Ok(())
    }

    fn list(&self, agent: &Arc<dyn Agent>) -> Vec<CommandInfo> {
        let (fixed, providers): (Vec<CommandInfo>, Vec<Arc<dyn CommandProvider>>) = {
            let e = self.entries.read();
            (
                e.fixed
                    .iter()
                    .filter(|f| visible(&f.scope, agent))
                    .map(|f| f.spec.info())
                    .collect(),
                e.providers
                    .iter()
                    .filter(|p| visible(&p.scope, agent))
                    .map(|p| p.provider.clone())
                    .collect(),
            )
        };
        let mut out = fixed;
        for p in providers {
            for spec in p.commands(agent) {
                if !out.iter().any(|c| c.name == spec.name) {
                    out.push(spec.info());
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    fn run(&self, name: &str, call: CommandCall) -> CommandFuture {
        let (handler, providers) = {
            let e = self.entries.read();
            // A scoped registration shadows a global one of the same name.
            let mut fixed: Vec<&Fixed> = e
                .fixed
                .iter()
                .filter(|f| f.spec.name == name && visible(&f.scope, &call.agent))
                .collect();
            fixed.sort_by_key(|f| f.scope.is_none());
            (
                fixed.first().map(|f| f.handler.clone()),
                e.providers
                    .iter()
                    .filter(|p| visible(&p.scope, &call.agent))
                    .map(|p| p.provider.clone())
                    .collect::<Vec<_>>(),
            )
        };
        if let Some(h) = handler {
            return h.run(call);
        }
        for p in providers {
            if let Some(fut) = p.run(name, call.clone()) {
                return fut;
            }
        }
        let name = name.to_owned();
        Box::pin(async move { Err(CommandError::Unknown(name)) })
    }
}

/// Provides the `commands` service.
#[derive(Debug)]
pub struct CommandsPlugin;

impl Plugin for CommandsPlugin {
    const NAME: &'static str = "commands";
    type Config = EmptyConfig;

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let registry: Arc<dyn Commands> = Arc::new(CommandsRegistry::default());
        ctx.provide::<dyn Commands>(registry)?;
        Ok(())
    }
}
