//! Integration tests of the kernel contract.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod compose;
mod config;
mod events;
mod lifecycle;
mod scopes;
