//! Integration tests of dsh-tools, in one binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod display;
mod pipeline;
mod registry;
