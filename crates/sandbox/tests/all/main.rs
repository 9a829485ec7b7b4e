//! Integration tests of dsh-sandbox: the fenced write against real files.

mod fence;
