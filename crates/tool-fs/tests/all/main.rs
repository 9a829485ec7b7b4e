//! Integration tests of dsh-tool-fs, in one binary: real files in temp dirs, through the real
//! Tools pipeline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod backend;
mod common;
mod glob;
mod grep;
mod hostile;
mod policy;
mod read;
mod write_edit;
