//! The MCP client against the in-repo test server (`examples/mcp_test_server`), over real
//! processes and real sockets, mounted on a real kernel with the real `tools` service.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;
mod lifecycle;
mod resources;
mod tools;
