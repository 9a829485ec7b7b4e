//! The context vocabulary of dsh that plugins other than `dsh-context` read: where a working
//! directory's project context lives ([`ProjectPaths`]: the project root found by its markers,
//! `$DSH_HOME`, the user's home, `$DSH_AGENTS_HOME`). `dsh-hooks` finds its hook files with it
//! without depending on the context loader.

pub mod project;

pub use project::{ProjectPaths, project_root};
