//! Integration tests of dsh-catalog on real SQLite files and real session logs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod concurrent;
mod index;
mod robustness;
mod scan;
mod search;
mod support;
