//! Integration tests of dsh-session-jsonl (one binary).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod corrupt;
mod kernel;
mod large;
mod prefetch;
mod prop;
mod spill;
mod store;
mod support;
mod v3;
mod zstd;
