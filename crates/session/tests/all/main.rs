//! Integration tests of dsh-session (one binary).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod append;
mod common;
mod fixtures;
mod hostile;
mod prop;
mod repair;
mod service;
mod typed;
