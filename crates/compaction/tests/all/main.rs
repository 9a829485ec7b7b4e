//! Integration tests of dsh-compaction (one binary): the plugins inside the real agent loop
//! with a scripted adapter.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod manual;
