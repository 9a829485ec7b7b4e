//! Integration tests of dsh-sandbox-local: the real `bwrap` and the real Landlock launcher
//! around the real local shell executor.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod confine;
mod support;
mod warm;
