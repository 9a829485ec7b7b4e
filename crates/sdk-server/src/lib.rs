//! `dsh-sdk-server`: the original harness's SDK runtime protocol as a dsh front end, so the
//! published Python SDK (`deepseek-harness-sdk`) drives `dsh --profile sdk` unchanged.
//!
//! - [`frame`]: newline-delimited JSON-RPC 2.0 framing with a bounded line length.
//! - [`protocol`]: the methods' typed parameters and results.
//! - [`serve`]: the server over any async reader/writer (the binary hands it stdio): methods on
//!   the `Agents` service, every session event as `session.event`, agent status as
//!   `session.status`.
//! - [`SdkServerPlugin`] (`sdk-jsonrpc-server`): the composition row that makes a profile an
//!   SDK profile and configures the server.

pub mod aliases;
pub mod frame;
mod output;
mod plugin;
pub mod protocol;
mod server;

pub use plugin::{SdkServer, SdkServerConfig, SdkServerPlugin};
pub use server::{SdkServerError, ServeEnd, serve};
