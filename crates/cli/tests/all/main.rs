//! End-to-end tests of the `dsh` binary against the testkit's DeepSeek-shaped server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod approval;
mod background;
mod basics;
mod catalog;
mod compaction;
mod context;
mod exec;
mod failures;
mod fleet;
mod fleet_faults;
mod goals;
mod hooks;
mod images;
mod mcp;
mod mcp_interop;
mod original;
mod pg;
mod postgres;
mod providers;
mod resume;
mod rewind;
mod sandbox;
mod serve;
mod serve_fleet;
mod serve_policy;
mod storage;
mod store_views;
mod subagent;
mod subagent_continuable;
mod titles;
mod tool_set;
mod web;
mod web_rewind;
mod wire;
mod workflow;
