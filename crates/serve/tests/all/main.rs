//! dsh-serve's tests: a real server on 127.0.0.1:0 over the in-process host of a scripted
//! kernel, driven by real HTTP clients (reqwest, the RemoteClient).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;
mod files;
mod openapi;
mod refusals;
mod remote;
mod streams;
mod tail;
