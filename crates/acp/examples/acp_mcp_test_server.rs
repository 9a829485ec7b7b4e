//! The in-repo MCP test server (see `dsh-mcp-testserver`), built with this crate's tests so
//! the end-to-end tests can configure it as a client's stdio server of the real `dsh acp`.

fn main() {
    std::process::exit(dsh_mcp_testserver::main_with_args(
        std::env::args().skip(1).collect(),
    ));
}
