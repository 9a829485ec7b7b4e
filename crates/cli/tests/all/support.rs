//! Running the real `dsh` binary with a temporary `DSH_HOME` against a mock server: the shared
//! end-to-end helpers of `dsh_test_harness::e2e` (front-end crates use the same module).

pub use dsh_test_harness::e2e::*;
