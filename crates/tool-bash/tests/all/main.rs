//! Integration tests of the `bash` tool: the real pipeline (`dsh-tools`), the real local shell
//! (`dsh-bash-local`), real processes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod results;
mod validation;
