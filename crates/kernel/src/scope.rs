//! Scopes: child effect owners keyed by a name (one per agent).

use std::fmt;
use std::sync::Arc;

use crate::ctx::Ctx;

/// The key of a scope, e.g. an agent id. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScopeKey(Arc<str>);

impl ScopeKey {
    /// A key from any string.
    pub fn new(key: impl Into<Arc<str>>) -> Self {
        Self(key.into())
    }

    /// The key as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ScopeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for ScopeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for ScopeKey {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<String> for ScopeKey {
    fn from(s: String) -> Self {
        Self::new(s)
    }
}

/// A child scope created by [`Ctx::scope`]. Whatever is registered through [`Scope::ctx`] is owned
/// by the scope and undone by [`Scope::dispose`] (or when the creating fiber unloads). Listeners
/// registered through it only see dispatches made in this scope (plus nothing else), while
/// dispatches made through it reach global listeners and this scope's listeners.
pub struct Scope {
    pub(crate) ctx: Ctx,
}

impl Scope {
    /// The scope's context: registrations through it belong to the scope.
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// The scope's key.
    pub fn key(&self) -> &ScopeKey {
        // A scope ctx always carries its key; fall back to an empty key defensively.
        self.ctx.scope_ref().unwrap_or(&EMPTY_KEY)
    }

    /// Undoes everything registered through the scope, newest first, and awaits it.
    pub async fn dispose(&self) {
        self.ctx.fiber.clone().dispose_self().await;
    }
}

static EMPTY_KEY: std::sync::LazyLock<ScopeKey> = std::sync::LazyLock::new(|| ScopeKey::new(""));

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope").field("key", self.key()).finish()
    }
}
