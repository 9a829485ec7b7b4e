//! Large events (a megabyte payload: a `write` of a whole file, a long answer) go to the file
//! as they are serialised, in both encodings, and read back byte for byte: the writer never
//! holds a second copy of the line in its batch buffer.

use std::sync::Arc;

use dsh_llm::Message;
use dsh_session::data::UserMessage;
use dsh_session::{CreateOptions, NewEvent, SessionPersistence, Sessions};
use dsh_session_jsonl::Compression;

/// 3 MB of text with characters to escape.
fn big_text() -> String {
    (0..40_000)
        .map(|i| format!("line {i:06}: \"quoted\" \\ slashed, tab\t and é\n"))
        .collect()
}

fn user(id: &str, text: String) -> NewEvent {
    NewEvent::core(UserMessage(Arc::new(Message::user_text(id, text))))
}

#[test]
fn a_large_event_is_written_while_it_is_appended_and_reads_back_exactly() {
    for compression in [Compression::None, Compression::Zstd] {
        let tmp = tempfile::tempdir().unwrap();
        let (backend, sessions) = crate::support::store_with(tmp.path(), compression);
        let s = sessions
            .create(CreateOptions {
                id: Some("big".into()),
                cwd: Some("/w".into()),
                ..Default::default()
            })
            .unwrap();
        s.append(user("u1", "small".into())).unwrap();
        futures::executor::block_on(s.write_through()).unwrap();
        let path = backend.log_path("big").unwrap();
        let before = std::fs::metadata(&path).unwrap().len();

        let big = s.append(user("u2", big_text())).unwrap();
        assert!(big.is_large(), "{compression:?}");
        // Streamed: on disk before any write-through was asked for.
        let after = std::fs::metadata(&path).unwrap().len();
        assert!(
            after > before,
            "{compression:?}: the large line is not in the file yet"
        );

        s.append(user("u3", "after".into())).unwrap();
        futures::executor::block_on(s.flush()).unwrap();
        futures::executor::block_on(sessions.close("big")).unwrap();

        let read = backend.open_read("big").unwrap();
        assert!(!read.torn);
        let lines: Vec<String> = read.events.iter().map(|e| e.to_json_line()).collect();
        assert_eq!(lines.len(), 3, "{compression:?}");
        assert_eq!(lines[1], big.to_json_line(), "{compression:?}");
        let Some(dsh_session::data::CoreEvent::UserMessage(m)) = read.events[1].core() else {
            panic!("not a user message");
        };
        assert_eq!(m.0.text(), big_text());
        assert_eq!(
            read.events[2]
                .core()
                .and_then(|c| c.message())
                .map(|m| m.text()),
            Some("after".to_owned())
        );
        if compression == Compression::None {
            // The plain file is exactly the lines (no gap, no duplicate).
            let text = std::fs::read_to_string(&path).unwrap();
            let body: Vec<&str> = text.lines().skip(1).collect();
            assert_eq!(body, lines.iter().map(String::as_str).collect::<Vec<_>>());
        }
    }
}
