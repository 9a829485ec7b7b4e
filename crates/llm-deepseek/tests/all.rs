//! Integration tests of `dsh-llm-deepseek` (one binary).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod http;
mod plugin;
mod request;
mod secrets;
mod translate;
