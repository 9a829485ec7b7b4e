//! Integration tests of dsh-sandbox-local: the real `bwrap` and the real Landlock launcher
//! around the real local shell executor.

mod confine;
mod support;
