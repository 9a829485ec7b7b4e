//! `dsh-commands`: slash commands as a seam.
//!
//! Plugins register commands through `ctx` ([`Commands::register`] for a fixed command,
//! [`Commands::provide`] for a set that depends on the session, such as the custom commands of
//! its project); each registration is an effect of the caller's fiber and dies with it. Front
//! ends never hard-code a command: they list a session's commands (completion, `/help`) and run
//! them by name through the protocol (`Op::RunCommand`), which the host maps to
//! [`Commands::run`].

mod registry;

use std::sync::Arc;

use dsh_agent::Agent;
use dsh_kernel::{Ctx, KernelError, Service};
use dsh_protocol::{CommandInfo, CommandOutcome, CommandSource};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

pub use registry::{CommandsPlugin, CommandsRegistry};

/// A command's name, description and argument hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandSpec {
    /// The name without the slash (`compact`, `a:b`).
    pub name: String,
    /// One line for completion and `/help`.
    pub description: String,
    /// What the arguments look like, if it takes any.
    pub argument_hint: Option<String>,
    /// Who provides it.
    pub source: CommandSource,
}

impl CommandSpec {
    /// A plugin command.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        CommandSpec {
            name: name.into(),
            description: description.into(),
            argument_hint: None,
            source: CommandSource::Plugin,
        }
    }

    /// With an argument hint.
    pub fn with_argument_hint(mut self, hint: impl Into<String>) -> Self {
        self.argument_hint = Some(hint.into());
        self
    }

    /// With a source other than `plugin`.
    pub fn with_source(mut self, source: CommandSource) -> Self {
        self.source = source;
        self
    }

    /// The protocol's description of it.
    pub fn info(&self) -> CommandInfo {
        CommandInfo {
            name: self.name.clone(),
            description: self.description.clone(),
            argument_hint: self.argument_hint.clone(),
            source: self.source,
        }
    }
}

/// One run of a command.
#[derive(Clone)]
pub struct CommandCall {
    /// The session it runs in.
    pub agent: Arc<dyn Agent>,
    /// The rest of the line after the name (trimmed).
    pub args: String,
    /// Cancelled when the caller gives up.
    pub cancel: CancellationToken,
}

impl std::fmt::Debug for CommandCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandCall")
            .field("agent", &self.agent.id())
            .field("args", &self.args)
            .finish_non_exhaustive()
    }
}

/// Why a command did not run to completion.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// No command has this name in the session.
    #[error("no command `/{0}` in this session")]
    Unknown(String),
    /// The arguments are wrong; the message says how to call it.
    #[error("{0}")]
    Usage(String),
    /// It ran and failed.
    #[error("{0}")]
    Failed(String),
}

/// Why a registration was refused.
#[derive(Debug, thiserror::Error)]
pub enum CommandsError {
    /// A command name must be 1–64 characters of letters, digits, `-`, `_`, `:` and `.`.
    #[error("invalid command name `{0}`")]
    InvalidName(String),
    /// The name is taken in this scope.
    #[error("command `/{name}` is already registered by {owner}")]
    Duplicate {
        /// The name.
        name: String,
        /// The plugin that has it.
        owner: String,
    },
    /// The kernel refused the effect (the fiber is unloading).
    #[error(transparent)]
    Kernel(#[from] KernelError),
}

/// What a command does.
pub type CommandFuture = BoxFuture<'static, Result<CommandOutcome, CommandError>>;

/// Runs one fixed command.
pub trait CommandHandler: Send + Sync + 'static {
    /// Runs it.
    fn run(&self, call: CommandCall) -> CommandFuture;
}

impl<F> CommandHandler for F
where
    F: Fn(CommandCall) -> CommandFuture + Send + Sync + 'static,
{
    fn run(&self, call: CommandCall) -> CommandFuture {
        self(call)
    }
}

/// A set of commands that depends on the session (its project's custom commands, its skills).
pub trait CommandProvider: Send + Sync + 'static {
    /// The commands this provider offers to `agent`'s session.
    fn commands(&self, agent: &Arc<dyn Agent>) -> Vec<CommandSpec>;

    /// Runs `name` when this provider offers it to the call's session (`None` otherwise).
    fn run(&self, name: &str, call: CommandCall) -> Option<CommandFuture>;
}

/// The command registry (kernel service `commands`).
pub trait Commands: Send + Sync + 'static {
    /// Registers a fixed command, visible in `ctx`'s scope (everywhere when global), until
    /// `ctx`'s fiber unloads.
    fn register(
        &self,
        ctx: &Ctx,
        spec: CommandSpec,
        handler: Arc<dyn CommandHandler>,
    ) -> Result<(), CommandsError>;

    /// Registers a provider of session-dependent commands, until `ctx`'s fiber unloads.
    fn provide(&self, ctx: &Ctx, provider: Arc<dyn CommandProvider>) -> Result<(), CommandsError>;

    /// The commands of `agent`'s session, by name (a fixed command wins a name over a
    /// provider's; among providers, the first registered).
    fn list(&self, agent: &Arc<dyn Agent>) -> Vec<CommandInfo>;

    /// Runs `name` in the call's session.
    fn run(&self, name: &str, call: CommandCall) -> CommandFuture;
}

impl Service for dyn Commands {
    const NAME: &'static str = "commands";
}

/// Whether `name` is a valid command name.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
}

/// Splits a typed line `/name args` into the name and the trimmed arguments (`None` when the
/// line is not a command).
pub fn parse_line(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start().strip_prefix('/')?;
    let (name, args) = match rest.find(char::is_whitespace) {
        Some(i) => (&rest[..i], rest[i..].trim()),
        None => (rest.trim_end(), ""),
    };
    valid_name(name).then_some((name, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_line_splits_into_name_and_trimmed_arguments() {
        assert_eq!(parse_line("/compact"), Some(("compact", "")));
        assert_eq!(
            parse_line("  /model  deepseek-v4-pro "),
            Some(("model", "deepseek-v4-pro"))
        );
        assert_eq!(parse_line("/a:b x\ny"), Some(("a:b", "x\ny")));
        assert_eq!(parse_line("no slash"), None);
        assert_eq!(parse_line("/"), None);
        assert_eq!(parse_line("/bad$name"), None);
        assert_eq!(parse_line("/path/to/file"), None);
    }

    #[test]
    fn names_are_short_and_plain() {
        assert!(valid_name("skill-name_2.x:y"));
        assert!(!valid_name(""));
        assert!(!valid_name(&"a".repeat(65)));
        assert!(!valid_name("a b"));
    }
}
