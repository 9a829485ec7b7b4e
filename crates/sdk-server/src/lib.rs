//! `dsh-sdk-server`: the original harness's SDK runtime protocol as a dsh front end, so the
//! published Python SDK (`deepseek-harness-sdk`) drives `dsh --profile sdk` unchanged.
//!
//! - [`frame`]: newline-delimited JSON-RPC 2.0 framing with a bounded line length.
//! - [`protocol`]: the methods' typed parameters and results.
//! - [`serve`]: the server over any async reader/writer (the binary hands it stdio) and a
//!   [`Connector`] (the composition root's: at `initialize` it answers an
//!   `Arc<dyn dsh_protocol::Client>` for the client's route). Methods are protocol ops; each
//!   session's raw log records are `session.event`, its live state `session.status`, its
//!   sub-agents `subagent.started`/`finished`.
//! - [`SdkServerConfig`]: the configuration of the `sdk-jsonrpc-server` row (the row's plugin,
//!   which makes a profile an SDK profile, lives in the composition root).

pub mod aliases;
mod connect;
pub mod frame;
mod output;
mod plugin;
pub mod protocol;
mod server;
mod streams;

pub use connect::{ConnectError, Connector, Init};
pub use plugin::{InvalidConfig, SdkServerConfig};
pub use server::{ServeEnd, serve};
