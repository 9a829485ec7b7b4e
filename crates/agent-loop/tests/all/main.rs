//! Integration tests of the agent loop.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod cancel;
mod capabilities;
mod config;
mod fixtures;
mod inbox;
mod lifecycle;
mod properties;
mod tools;
