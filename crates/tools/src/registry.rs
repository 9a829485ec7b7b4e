//! The registry of tools, guards and per-scope restrictions, and the schema view sent to the model.

use std::collections::BTreeSet;
use std::sync::Arc;

use dsh_kernel::ScopeKey;
use dsh_llm::ToolSpec;
use parking_lot::RwLock;

use crate::def::Tool;
use crate::vocab::{Guard, ToolRequest};

/// Why a registration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    /// The tool name is not `^[a-zA-Z0-9_-]{1,64}$`.
    #[error("invalid tool name {0:?}: use 1 to 64 characters from [a-zA-Z0-9_-]")]
    InvalidName(String),
    /// The parameter schema is outside the supported subset.
    #[error("tool \"{name}\" has an invalid parameter schema: {source}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// What is wrong, and where.
        #[source]
        source: crate::schema::SchemaError,
    },
    /// A tool of that name already exists in the same scope.
    #[error("tool \"{name}\" is already registered {where_} by `{owner}`")]
    Duplicate {
        /// The tool.
        name: String,
        /// `globally` or `in scope <key>`.
        where_: String,
        /// The plugin that registered it first.
        owner: String,
    },
    /// The kernel refused the effect (e.g. the registering fiber is unloading).
    #[error(transparent)]
    Kernel(#[from] dsh_kernel::KernelError),
}

/// A per-scope restriction of the visible tools: an optional allow-list and a deny-list.
/// Several restrictions combine: a tool is visible only if every one admits it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// When set, only these names are visible.
    pub allow: Option<BTreeSet<String>>,
    /// These names are never visible.
    pub deny: BTreeSet<String>,
}

impl ToolFilter {
    /// Only the given tools.
    pub fn allow<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Self {
            allow: Some(names.into_iter().map(Into::into).collect()),
            deny: BTreeSet::new(),
        }
    }

    /// Everything but the given tools.
    pub fn deny<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Self {
            allow: None,
            deny: names.into_iter().map(Into::into).collect(),
        }
    }

    fn admits(&self, name: &str) -> bool {
        !self.deny.contains(name) && self.allow.as_ref().is_none_or(|a| a.contains(name))
    }
}

pub(crate) struct ToolEntry {
    pub(crate) id: u64,
    pub(crate) scope: Option<ScopeKey>,
    pub(crate) owner: String,
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) schema: ToolSpec,
}

pub(crate) struct GuardEntry {
    pub(crate) id: u64,
    pub(crate) scope: Option<ScopeKey>,
    pub(crate) guard: Arc<dyn Guard>,
}

pub(crate) struct FilterEntry {
    pub(crate) id: u64,
    pub(crate) scope: Option<ScopeKey>,
    pub(crate) filter: ToolFilter,
}

/// The shared state behind the `Tools` service.
#[derive(Default)]
pub(crate) struct Registry {
    pub(crate) tools: RwLock<Vec<ToolEntry>>,
    pub(crate) guards: RwLock<Vec<GuardEntry>>,
    pub(crate) filters: RwLock<Vec<FilterEntry>>,
    pub(crate) order: Vec<String>,
    /// Inline byte cap of all-text results (0: off).
    pub(crate) max_inline_bytes: usize,
    /// The private scratch directory for requests that name none (created on first use,
    /// removed when the registry is dropped; `None` inside when it could not be created).
    pub(crate) private_scratch: std::sync::OnceLock<Option<tempfile::TempDir>>,
}

/// `^[a-zA-Z0-9_-]{1,64}$`
pub fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn applies(entry_scope: &Option<ScopeKey>, scope: Option<&ScopeKey>) -> bool {
    match entry_scope {
        None => true,
        Some(s) => Some(s) == scope,
    }
}

impl Registry {
    pub(crate) fn new(order: Vec<String>, max_inline_bytes: usize) -> Self {
        Self {
            order,
            max_inline_bytes,
            ..Self::default()
        }
    }

    /// The scratch directory of `req`: its own, else `<private dir>/<session id>`.
    pub(crate) fn scratch_dir(&self, req: &ToolRequest) -> Option<std::path::PathBuf> {
        if let Some(dir) = &req.scratch_dir {
            return Some(dir.clone());
        }
        let private = self.private_scratch.get_or_init(|| {
            match tempfile::Builder::new()
                .prefix("dsh-tools-scratch-")
                .tempdir()
            {
                Ok(dir) => Some(dir),
                Err(error) => {
                    tracing::warn!(%error, "no private scratch directory; spill files disabled");
                    None
                }
            }
        });
        let session = crate::def::file_safe(&req.session_id);
        private.as_ref().map(|d| {
            d.path().join(if session.is_empty() {
                "default"
            } else {
                &session
            })
        })
    }

    pub(crate) fn admitted(&self, scope: Option<&ScopeKey>, name: &str) -> bool {
        self.filters
            .read()
            .iter()
            .filter(|f| applies(&f.scope, scope))
            .all(|f| f.filter.admits(name))
    }

    /// The tool `name` as the scope sees it: its own registration shadows a global one.
    pub(crate) fn resolve(&self, scope: Option<&ScopeKey>, name: &str) -> Option<Arc<dyn Tool>> {
        if !self.admitted(scope, name) {
            return None;
        }
        let tools = self.tools.read();
        let scoped = scope.and_then(|s| {
            tools
                .iter()
                .find(|t| t.scope.as_ref() == Some(s) && t.schema.name == name)
        });
        scoped
            .or_else(|| {
                tools
                    .iter()
                    .find(|t| t.scope.is_none() && t.schema.name == name)
            })
            .map(|t| t.tool.clone())
    }

    pub(crate) fn schemas(&self, scope: Option<&ScopeKey>) -> Vec<ToolSpec> {
        let mut visible: Vec<ToolSpec> = Vec::new();
        {
            let tools = self.tools.read();
            for t in tools.iter().filter(|t| applies(&t.scope, scope)) {
                let shadowed = t.scope.is_none()
                    && scope.is_some()
                    && tools
                        .iter()
                        .any(|o| o.scope.as_ref() == scope && o.schema.name == t.schema.name);
                if !shadowed {
                    visible.push(t.schema.clone());
                }
            }
        }
        visible.retain(|s| self.admitted(scope, &s.name));
        let rank = |name: &str| {
            self.order
                .iter()
                .position(|o| o == name)
                .unwrap_or(usize::MAX)
        };
        visible.sort_by(|a, b| {
            rank(&a.name)
                .cmp(&rank(&b.name))
                .then_with(|| a.name.cmp(&b.name))
        });
        visible
    }

    pub(crate) fn guards(&self, scope: Option<&ScopeKey>) -> Vec<Arc<dyn Guard>> {
        self.guards
            .read()
            .iter()
            .filter(|g| applies(&g.scope, scope))
            .map(|g| g.guard.clone())
            .collect()
    }

    pub(crate) fn remove_tool(&self, id: u64) {
        self.tools.write().retain(|t| t.id != id);
    }

    pub(crate) fn remove_guard(&self, id: u64) {
        self.guards.write().retain(|g| g.id != id);
    }

    pub(crate) fn remove_filter(&self, id: u64) {
        self.filters.write().retain(|f| f.id != id);
    }
}
