//! Integration tests of dsh-llm-retry (one binary).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_loop;
mod plugin;
mod policy;
