//! Integration tests of `dsh-llm` (one binary).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod assembler;
mod enums;
mod framer;
mod service;
mod vocabulary;
