//! End-to-end tests of the `dsh` binary against the testkit's DeepSeek-shaped server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod approval;
mod basics;
mod compaction;
mod context;
mod exec;
mod failures;
mod hooks;
mod original;
mod providers;
mod resume;
mod sandbox;
mod storage;
mod subagent;
mod titles;
mod tui;
mod wire;
