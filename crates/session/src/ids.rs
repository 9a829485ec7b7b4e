//! Id minting: the one place dsh mints message and session ids.

/// A fresh message id: `m-<uuid v7>` (unique within a session, time-ordered).
pub fn message_id() -> String {
    format!("m-{}", uuid::Uuid::now_v7())
}

/// A fresh session id: `session-<uuid v7>` (time-ordered, so ids sort by creation).
pub fn session_id() -> String {
    format!("session-{}", uuid::Uuid::now_v7())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_distinct_and_time_ordered() {
        let (a, b) = (message_id(), message_id());
        assert!(a.starts_with("m-") && a.len() == 38, "{a}");
        assert_ne!(a, b);
        let (s, t) = (session_id(), session_id());
        assert!(s.starts_with("session-") && s < t, "{s} {t}");
    }
}
