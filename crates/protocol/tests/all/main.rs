//! dsh-protocol's tests: the committed schema, the stable JSON forms.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod forms;
mod schema;
