//! Integration tests of dsh-testkit, driven by a real HTTP client (reqwest) over 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

#[path = "all/common.rs"]
mod common;
#[path = "all/errors.rs"]
mod errors;
#[path = "all/scenario.rs"]
mod scenario;
#[path = "all/server.rs"]
mod server;
#[path = "all/sse.rs"]
mod sse;
#[path = "all/validate.rs"]
mod validate;
