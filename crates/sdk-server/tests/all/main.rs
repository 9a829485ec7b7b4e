//! Integration tests of dsh-sdk-server: the framing, and end to end the real `dsh --profile
//! sdk` binary (found by `dsh_test_harness::e2e::dsh_bin`; build it first with
//! `cargo build -p dsh-cli`) driven over stdio by a test client (`wire`) and by the original
//! harness's published Python SDK (`python`) against the testkit's model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod framing;
mod python;
mod wire;
