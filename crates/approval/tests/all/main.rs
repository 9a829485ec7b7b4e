//! Integration tests of dsh-approval: rules against hostile command lines, the rules file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod rules;
