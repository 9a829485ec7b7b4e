//! Limits shared by executors and consumers (`docs/behaviours.md` §5, §19).

use std::time::Duration;

/// Timeout of a run when the caller does not ask for one: 120 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(120_000);

/// Largest timeout a run may have: 600 s. Larger requests are clamped silently.
pub const MAX_TIMEOUT: Duration = Duration::from_millis(600_000);

/// Time between SIGTERM and SIGKILL when a process group is terminated: 3 s.
pub const KILL_GRACE: Duration = Duration::from_millis(3_000);

/// Bytes of each stream kept in memory (the tail): 64,000.
pub const STREAM_CAPTURE_BYTES: usize = 64_000;

/// Largest spill file per stream: 64 MiB. A longer stream discards its incomplete spill.
pub const SPILL_CAP_BYTES: u64 = 64 * 1024 * 1024;

/// Clamps a requested timeout to `(0, MAX_TIMEOUT]`; zero becomes the default.
pub fn clamp_timeout(requested: Duration) -> Duration {
    if requested.is_zero() {
        DEFAULT_TIMEOUT
    } else {
        requested.min(MAX_TIMEOUT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamps() {
        assert_eq!(clamp_timeout(Duration::ZERO), DEFAULT_TIMEOUT);
        assert_eq!(
            clamp_timeout(Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        assert_eq!(clamp_timeout(Duration::from_secs(100_000)), MAX_TIMEOUT);
    }
}
