//! End-to-end tests of the `dsh` binary against the testkit's DeepSeek-shaped server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod basics;
mod exec;
mod failures;
mod resume;
mod storage;
mod tui;
mod wire;
