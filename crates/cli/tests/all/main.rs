//! End-to-end tests of the `dsh` binary against the testkit's DeepSeek-shaped server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod acp_acpx;
mod acp_fs;
mod acp_wire;
mod approval;
mod basics;
mod compaction;
mod context;
mod exec;
mod failures;
mod hooks;
mod images;
mod mcp;
mod mcp_interop;
mod original;
mod providers;
mod resume;
mod sandbox;
mod sdk_python;
mod sdk_wire;
mod serve;
mod storage;
mod subagent;
mod subagent_continuable;
mod titles;
mod tool_set;
mod tui;
mod tui_flows;
mod wire;
