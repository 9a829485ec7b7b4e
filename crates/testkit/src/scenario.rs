//! Scenario files (later).
