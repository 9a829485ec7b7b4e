//! dsh-host's tests: a client that knows only `dsh-protocol` drives real sessions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod catalog;
mod client;
mod commands;
mod compose;
mod interrupt;
mod log;
mod plugins;
mod read_only;
mod workdir;
