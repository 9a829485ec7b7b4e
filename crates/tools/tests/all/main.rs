//! Integration tests of dsh-tools, in one binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod pipeline;
mod registry;
