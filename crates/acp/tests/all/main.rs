//! dsh-acp's tests. In process: the ACP server over a real host (`dsh-host` over the test
//! harness's kernel with a scripted model), driven with raw ACP frames over an in-memory line
//! transport (`inproc`, `display`). End to end: the real `dsh acp` binary against the testkit's
//! mock model, driven by `acpx` (`acpx`), raw frames (`wire`) and a client on the
//! `agent-client-protocol` crate serving its own files (`client_fs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod acpx;
mod client_fs;
mod display;
mod inproc;
mod mcp;
mod questions;
mod support;
mod wire;
