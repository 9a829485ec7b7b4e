//! Integration tests of the local executor: real bash processes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod executor;
mod hostile;
mod lifecycle;
mod plugin;
