//! dsh-tui's tests: snapshots of every widget and state on a `TestBackend` (`widgets`,
//! `prompts_cards`), and end to end the real `dsh` binary in a pseudo-terminal (`e2e`, `flows`)
//! and two UIs attached to one `dsh serve` session in tmux (`attach`). The end-to-end modules
//! run the `dsh` that `cargo build -p dsh-cli` (or `cargo test --workspace`) built, or
//! `$DSH_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod attach;
mod e2e;
mod flows;
mod prompts_cards;
mod pty;
mod rewind;
mod support;
mod widgets;
mod workflow;
