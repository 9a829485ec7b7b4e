//! Property tests of the SDK server's framing: the line splitter, the frame classifier, and
//! the whole serve loop fed arbitrary byte streams (one response per request id, in order,
//! nothing but JSON frames on the output, a clean end at end of input).

use std::sync::Arc;

use dsh_sdk_server::frame::{Incoming, Line, LineSplitter, parse_line};
use dsh_sdk_server::{ConnectError, Connector, Init, SdkServerConfig, ServeEnd, serve};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

fn split_all(max: usize, bytes: &[u8], cuts: &[usize]) -> (Vec<Line>, Option<Line>) {
    let mut s = LineSplitter::new(max);
    let mut out = Vec::new();
    let mut at = 0;
    for c in cuts {
        let end = (at + c).min(bytes.len());
        s.push(&bytes[at..end], &mut out);
        assert!(s.buffered() <= max);
        at = end;
    }
    s.push(&bytes[at..], &mut out);
    assert!(s.buffered() <= max);
    let tail = s.finish();
    (out, tail)
}

proptest! {
    #[test]
    fn splitting_does_not_depend_on_chunk_boundaries(
        bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'a'), Just(b'{'), any::<u8>()], 0..400),
        cuts in proptest::collection::vec(0usize..50, 0..30),
        max in 1usize..40,
    ) {
        let whole = split_all(max, &bytes, &[]);
        let pieces = split_all(max, &bytes, &cuts);
        prop_assert_eq!(&whole, &pieces);
        // Every complete line is a `\n`-free piece no longer than the limit.
        for l in &whole.0 {
            if let Line::Complete(b) = l {
                prop_assert!(b.len() <= max && !b.contains(&b'\n'));
            }
        }
    }

    #[test]
    fn classification_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_line(&bytes);
    }

    #[test]
    fn a_request_keeps_its_id(id in prop_oneof![
        any::<i64>().prop_map(Value::from),
        "[a-z0-9-]{0,12}".prop_map(Value::from),
    ], method in "[a-z/]{1,20}", crlf in any::<bool>()) {
        let mut line = json!({"jsonrpc":"2.0","id":id,"method":method}).to_string();
        if crlf { line.push('\r'); }
        match parse_line(line.as_bytes()) {
            Incoming::Request { id: got, method: m, params } => {
                prop_assert_eq!(serde_json::to_value(got).unwrap(), id);
                prop_assert_eq!(m, method);
                prop_assert_eq!(params, json!({}));
            }
            other => prop_assert!(false, "{other:?}"),
        }
    }
}

/// One input line of the serve fuzz.
#[derive(Clone, Debug)]
enum Piece {
    Garbage(Vec<u8>),
    Request(u32, &'static str),
    Notification,
    Blank,
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        proptest::collection::vec(
            any::<u8>().prop_filter("no newline", |b| *b != b'\n'),
            0..60
        )
        .prop_map(Piece::Garbage),
        (
            any::<u32>(),
            prop_oneof![
                Just("no/such"),
                Just("session/prompt"),
                Just("session/resume"),
                Just("session/working-directory/get"),
                Just("initialize"),
            ]
        )
            .prop_map(|(i, m)| Piece::Request(i, m)),
        Just(Piece::Notification),
        Just(Piece::Blank),
    ]
}

/// No host: every `initialize` of the fuzz fails before it would connect (its params lack
/// `cwd`), so the serve loop is exercised without an engine.
struct NoHost;

impl Connector for NoHost {
    fn connect(&self, _init: Init) -> Result<Arc<dyn dsh_protocol::Client>, ConnectError> {
        Err(ConnectError("no host in this test".into()))
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn the_server_answers_every_request_once_in_order(
        pieces in proptest::collection::vec(piece(), 0..40),
        cut in 1usize..97,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let mut input = Vec::new();
            let mut ids = Vec::new();
            let mut errors_without_id = 0;
            for (n, p) in pieces.iter().enumerate() {
                match p {
                    Piece::Garbage(b) => {
                        input.extend_from_slice(b);
                        if !matches!(parse_line(b), Incoming::Blank | Incoming::Response | Incoming::Notification { .. }) {
                            errors_without_id += 1;
                        }
                    }
                    Piece::Request(i, m) => {
                        let id = format!("{n}-{i}");
                        input.extend_from_slice(json!({"jsonrpc":"2.0","id":id,"method":m,"params":{"sessionId":"s"}}).to_string().as_bytes());
                        ids.push(id);
                    }
                    Piece::Notification => input.extend_from_slice(br#"{"jsonrpc":"2.0","method":"note"}"#),
                    Piece::Blank => {}
                }
                input.push(b'\n');
            }
            let (mut client, server_io) = tokio::io::duplex(cut);
            let (server_read, server_write) = tokio::io::split(server_io);
            let config = SdkServerConfig { max_line_bytes: 256, ..SdkServerConfig::default() };
            let serving = tokio::spawn(serve(Arc::new(NoHost), server_read, server_write, config, std::future::pending()));
            let (mut client_read, mut client_write) = tokio::io::split(&mut client);
            let write = async {
                use tokio::io::AsyncWriteExt;
                client_write.write_all(&input).await.unwrap();
                client_write.shutdown().await.unwrap();
            };
            let mut output = Vec::new();
            let read = client_read.read_to_end(&mut output);
            let (_, r) = tokio::join!(write, read);
            r.unwrap();
            let end = serving.await.unwrap();
            assert_eq!(end, ServeEnd::InputClosed);
            let frames: Vec<Value> = output
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice(l).expect("the server writes only JSON lines"))
                .collect();
            let answered: Vec<String> = frames
                .iter()
                .filter_map(|f| f["id"].as_str().map(str::to_owned))
                .collect();
            assert_eq!(answered, ids);
            let null_ids = frames.iter().filter(|f| f["id"].is_null()).count();
            assert_eq!(null_ids, errors_without_id);
            assert!(frames.iter().all(|f| f["jsonrpc"] == "2.0"));
        });
    }
}
