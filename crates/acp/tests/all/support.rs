//! Running the real `dsh` binary with a temporary `DSH_HOME` against a mock server: the shared
//! end-to-end helpers of `dsh_test_harness::e2e` (the binary must be built: `cargo build -p
//! dsh-cli`, or `cargo test --workspace`).

pub use dsh_test_harness::e2e::*;
