//! What `initialize` needs from the composition root: a host of sessions for the route the
//! client chose. The root validates the route against the engine (mounted providers, model
//! ids, efforts, token limits) and answers a [`Client`] whose new sessions use it; the server
//! sees nothing but the protocol.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_protocol::Client;

/// The route and directory fixed by `initialize` (already checked for shape by the server:
/// an absolute existing `cwd`, a positive safe-integer `max_tokens`, a non-empty effort).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Init {
    /// The working directory of new sessions.
    pub cwd: PathBuf,
    /// The client's provider name (`deepseek-official` by default; see [`crate::aliases`]).
    pub provider: String,
    /// The client's model name, if any.
    pub model: Option<String>,
    /// The client's reasoning effort, as sent.
    pub reasoning_effort: Option<String>,
    /// The output token limit of each request.
    pub max_tokens: Option<u64>,
}

/// Why `initialize` failed; the message is the client's error text.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConnectError(pub String);

/// Opens the host the server drives, once, at `initialize`.
pub trait Connector: Send + Sync + 'static {
    /// A client whose new sessions use `init`'s route and directory.
    fn connect(&self, init: Init) -> Result<Arc<dyn Client>, ConnectError>;
}
