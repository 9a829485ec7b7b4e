//! Integration tests of dsh-system-prompt (one binary).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod assemble;
mod common;
mod runtime_context;
