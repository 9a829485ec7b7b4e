//! Integration tests of dsh-sdk-server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod framing;
