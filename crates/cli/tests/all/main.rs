//! End-to-end tests of the `dsh` binary against the testkit's DeepSeek-shaped server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod approval;
mod basics;
mod compaction;
mod exec;
mod failures;
mod mcp;
mod mcp_interop;
mod resume;
mod sandbox;
mod storage;
mod tui;
mod wire;
