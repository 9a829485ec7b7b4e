//! The in-repo MCP test server (see `dsh-mcp-testserver`), built with this crate's tests so
//! they can spawn it from `target/<profile>/examples/`.

fn main() {
    std::process::exit(dsh_mcp_testserver::main_with_args(
        std::env::args().skip(1).collect(),
    ));
}
