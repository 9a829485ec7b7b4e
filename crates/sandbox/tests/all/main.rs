//! Integration tests of dsh-sandbox: the fenced write against real files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fence;
