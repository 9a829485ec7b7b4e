//! Composition: YAML rows `{id, name, config, disabled, group}` layered in order and mounted by
//! plugin name, with a diff by `id` when the composition changes.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use serde::Deserialize;

use crate::ctx::Ctx;
use crate::error::KernelError;
use crate::fiber::FiberState;
use crate::kernel::FiberHandle;
use crate::plugin::PluginRegistry;

/// One row of a composition file.
#[derive(Clone, Debug, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Row {
    /// Identity of the row across layers and edits; defaults to `name`.
    #[serde(default)]
    pub id: String,
    /// The plugin to mount.
    pub name: String,
    /// The plugin's config (`null` or absent means `{}`).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub config: serde_json::Value,
    /// `true` removes the row (and any earlier row with the same id) from the composition.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    /// Free-form grouping label (shown by `dsh config dump`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LayerFile {
    #[serde(default)]
    plugins: Vec<Row>,
}

/// A parsed layer: where it came from and its rows in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    /// The file path, or a label such as `preset:headless`.
    pub source: String,
    /// Its rows, in file order.
    pub rows: Vec<Row>,
}

/// An error in a composition; it names the file, the row and the field.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    /// The YAML does not parse or does not have the shape of a composition file.
    #[error("{source_name}: {message}")]
    Syntax {
        /// The file.
        source_name: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A row is invalid (unknown plugin, bad config, duplicate id within one file).
    #[error("{source_name}: row `{row}`: {error}")]
    Row {
        /// The file.
        source_name: String,
        /// The row id.
        row: String,
        /// What is wrong.
        error: Box<KernelError>,
    },
    /// The same id twice in one file.
    #[error("{source_name}: duplicate row id `{row}`")]
    DuplicateId {
        /// The file.
        source_name: String,
        /// The id.
        row: String,
    },
}

impl Layer {
    /// Parses a composition file: a mapping with a `plugins:` list of rows.
    pub fn parse(source: impl Into<String>, yaml: &str) -> Result<Self, ComposeError> {
        let source = source.into();
        let file: LayerFile = if yaml.trim().is_empty() {
            LayerFile {
                plugins: Vec::new(),
            }
        } else {
            yaml_serde::from_str(yaml).map_err(|e| ComposeError::Syntax {
                source_name: source.clone(),
                message: e.to_string(),
            })?
        };
        Self::from_file(source, file)
    }

    /// Parses a composition in JSON, the same shape as [`Layer::parse`]'s YAML: for built-in
    /// presets converted at build time (the YAML parse of dsh's default preset was 1.9 M
    /// instructions, a sixth of a one-turn `dsh exec`; the JSON one is 0.18 M).
    pub fn parse_json(source: impl Into<String>, json: &str) -> Result<Self, ComposeError> {
        let source = source.into();
        let file: LayerFile = serde_json::from_str(json).map_err(|e| ComposeError::Syntax {
            source_name: source.clone(),
            message: e.to_string(),
        })?;
        Self::from_file(source, file)
    }

    /// Defaults each row's id to its name and refuses an id used twice.
    fn from_file(source: String, file: LayerFile) -> Result<Self, ComposeError> {
        let mut seen = std::collections::HashSet::new();
        let mut rows = file.plugins;
        for row in &mut rows {
            if row.id.is_empty() {
                row.id = row.name.clone();
            }
            if !seen.insert(row.id.clone()) {
                return Err(ComposeError::DuplicateId {
                    source_name: source,
                    row: row.id.clone(),
                });
            }
        }
        Ok(Self { source, rows })
    }
}

/// One row of the composed tree with the layer it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct ComposedRow {
    /// The row as it stands after all layers.
    pub row: Row,
    /// The layer that last set it.
    pub source: String,
}

/// The composed tree: rows in first-appearance order, later layers replacing by id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Composition {
    /// Enabled rows.
    pub rows: Vec<ComposedRow>,
}

impl Composition {
    /// Applies layers in order. A row with an existing id replaces that row (its whole config);
    /// `disabled: true` removes it. Every enabled row is validated against `registry`.
    pub fn compose(layers: &[Layer], registry: &PluginRegistry) -> Result<Self, ComposeError> {
        let mut rows: Vec<ComposedRow> = Vec::new();
        for layer in layers {
            for row in &layer.rows {
                let pos = rows.iter().position(|r| r.row.id == row.id);
                match (pos, row.disabled) {
                    (Some(i), true) => {
                        rows.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        rows[i] = ComposedRow {
                            row: row.clone(),
                            source: layer.source.clone(),
                        }
                    }
                    (None, false) => rows.push(ComposedRow {
                        row: row.clone(),
                        source: layer.source.clone(),
                    }),
                }
            }
        }
        for r in &rows {
            registry
                .validate(&r.row.name, &r.row.config)
                .map_err(|error| ComposeError::Row {
                    source_name: r.source.clone(),
                    row: r.row.id.clone(),
                    error: Box::new(error),
                })?;
        }
        Ok(Self { rows })
    }
}

/// What one [`Composer::apply`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComposeReport {
    /// Rows mounted for the first time.
    pub mounted: Vec<String>,
    /// Rows whose config (or plugin) changed and were restarted or updated in place.
    pub updated: Vec<String>,
    /// Rows removed.
    pub removed: Vec<String>,
}

/// Keeps the mounted tree in step with a [`Composition`]: rows are diffed by id and only changed
/// rows are touched.
pub struct Composer {
    ctx: Ctx,
    mounted: BTreeMap<String, (Row, FiberHandle)>,
    order: Vec<String>,
}

impl Composer {
    /// A composer that mounts through `ctx` (usually `kernel.root()`).
    pub fn new(ctx: Ctx) -> Self {
        Self {
            ctx,
            mounted: BTreeMap::new(),
            order: Vec::new(),
        }
    }

    /// The handle of a mounted row.
    pub fn fiber(&self, id: &str) -> Option<&FiberHandle> {
        self.mounted.get(id).map(|(_, h)| h)
    }

    /// Every mounted row id in mount order.
    pub fn ids(&self) -> &[String] {
        &self.order
    }

    /// Brings the mounted tree to `composition`. The composition was validated when composed, so
    /// this only fails if the registry changed underneath; rows already handled stay as they are.
    pub async fn apply(&mut self, composition: &Composition) -> Result<ComposeReport, KernelError> {
        let mut report = ComposeReport::default();
        let wanted: BTreeMap<&str, &Row> = composition
            .rows
            .iter()
            .map(|r| (r.row.id.as_str(), &r.row))
            .collect();
        // Remove rows that are gone, newest first.
        for id in self.order.clone().iter().rev() {
            if !wanted.contains_key(id.as_str()) {
                if let Some((_, handle)) = self.mounted.remove(id) {
                    handle.dispose().await;
                }
                self.order.retain(|o| o != id);
                report.removed.push(id.clone());
            }
        }
        for composed in &composition.rows {
            let row = &composed.row;
            match self.mounted.get(&row.id) {
                Some((old, _)) if old == row => {}
                Some((old, handle)) if old.name == row.name => {
                    handle.update_config(row.config.clone()).await?;
                    let handle = handle.clone();
                    self.mounted.insert(row.id.clone(), (row.clone(), handle));
                    report.updated.push(row.id.clone());
                }
                Some(_) => {
                    if let Some((_, handle)) = self.mounted.remove(&row.id) {
                        handle.dispose().await;
                    }
                    let handle = self.ctx.mount(&row.name, row.config.clone())?;
                    self.mounted.insert(row.id.clone(), (row.clone(), handle));
                    report.updated.push(row.id.clone());
                }
                None => {
                    let handle = self.ctx.mount(&row.name, row.config.clone())?;
                    self.mounted.insert(row.id.clone(), (row.clone(), handle));
                    self.order.push(row.id.clone());
                    report.mounted.push(row.id.clone());
                }
            }
        }
        Ok(report)
    }

    /// Waits until every mounted row is active, or waits for a service that no row provides;
    /// fails on the first row that failed (or was disposed).
    ///
    /// A row whose dependency is never provided (say `compact-command` with the `commands` row
    /// disabled) would otherwise wait forever: once nothing is loading or about to start, such
    /// rows are left pending (they start if the service appears later), each named with what it
    /// waits for in a warning, and [`Composer::waiting`] lists them.
    pub async fn ready(&self) -> Result<(), KernelError> {
        loop {
            // Subscribe before looking, so a change between the look and the wait wakes us.
            let mut watches = Vec::with_capacity(self.order.len());
            let mut busy = false;
            let mut nudge = None;
            for id in &self.order {
                let Some((_, h)) = self.mounted.get(id) else {
                    continue;
                };
                watches.push(h.fiber.state.subscribe());
                match h.state() {
                    FiberState::Active => {}
                    FiberState::Failed | FiberState::Disposed => return h.ready().await,
                    FiberState::Loading | FiberState::Unloading => busy = true,
                    FiberState::Pending => {
                        if h.fiber.start_scheduled.load(Ordering::SeqCst) {
                            busy = true;
                        } else if h.missing_dependencies().is_empty() {
                            // Startable but not scheduled: ask the kernel to start it.
                            busy = true;
                            nudge = h.fiber.kernel.upgrade();
                        }
                    }
                }
            }
            if let Some(kernel) = nudge {
                kernel.reconcile();
            }
            if !busy {
                for (id, missing) in self.waiting() {
                    tracing::warn!(
                        row = %id,
                        waits_for = %missing.join(", "),
                        "plugin row not started: no row provides the services it needs"
                    );
                }
                return Ok(());
            }
            let changes = watches.iter_mut().map(|w| Box::pin(w.changed()));
            if futures::future::select_all(changes).await.0.is_err() {
                return Err(KernelError::KernelGone);
            }
        }
    }

    /// The rows pending on services that are not there, with the names of those services.
    pub fn waiting(&self) -> Vec<(String, Vec<&'static str>)> {
        self.order
            .iter()
            .filter_map(|id| {
                let (_, h) = self.mounted.get(id)?;
                let missing = h.missing_dependencies();
                (!missing.is_empty()).then(|| (id.clone(), missing))
            })
            .collect()
    }
}

impl std::fmt::Debug for Composer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Composer")
            .field("rows", &self.order)
            .finish()
    }
}
