//! SSE framing + DeepSeek translation throughput on a large synthetic stream.
//!
//! `cargo bench -p dsh-llm-deepseek` prints MB/s (best of several runs). The stream mixes
//! reasoning and text deltas with fragmented parallel tool calls and keep-alive comments, fed in
//! 16 KiB reads like a network body.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Instant;

use dsh_llm::{SseFramer, SseItem, StreamChunk};
use dsh_llm_deepseek::{Progress, Translator};

fn chunk(delta: &str, finish: &str) -> String {
    format!(
        "data: {{\"id\":\"23d01db0-7b76-413e-b4fd-b0bf3362f996\",\"object\":\"chat.completion.chunk\",\"created\":1781233924,\"model\":\"deepseek-flash\",\"system_fingerprint\":\"fp_8b330d02d0_prod0820_fp8_kvcache_20260402\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":{finish}}}],\"usage\":null}}\n\n"
    )
}

fn synthetic(target: usize) -> Vec<u8> {
    let mut s = String::with_capacity(target + 4096);
    s.push_str(": keep-alive\n\n");
    s.push_str(&chunk(
        r#"{"role":"assistant","content":null,"reasoning_content":""}"#,
        "null",
    ));
    let mut i = 0usize;
    let third = target / 3;
    while s.len() < third {
        s.push_str(&chunk(
            &format!(
                r#"{{"content":null,"reasoning_content":" step {i} of the \"plan\": check"}}"#
            ),
            "null",
        ));
        i += 1;
    }
    while s.len() < 2 * third {
        s.push_str(&chunk(
            &format!(r#"{{"content":" word{i} é","reasoning_content":null}}"#),
            "null",
        ));
        i += 1;
        if i.is_multiple_of(500) {
            s.push_str(": keep-alive\n\n");
        }
    }
    let mut call = 0;
    while s.len() < target {
        s.push_str(&chunk(&format!(r#"{{"tool_calls":[{{"index":{call},"id":"call_{call:02}_JQSxFX1xOHGH6ajdpN88RMXO","type":"function","function":{{"name":"read","arguments":""}}}}]}}"#), "null"));
        for k in 0..40 {
            s.push_str(&chunk(&format!(r#"{{"tool_calls":[{{"index":{call},"function":{{"arguments":"{{\"file_path\": \"src/m{k}.rs\"}}"}}}}]}}"#), "null"));
        }
        call += 1;
    }
    s.push_str(&chunk(
        r#"{"content":"","reasoning_content":null}"#,
        "\"tool_calls\"",
    ));
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

fn run(bytes: &[u8]) -> usize {
    let mut framer = SseFramer::new();
    let mut tr = Translator::new();
    let mut items = Vec::new();
    let mut out: Vec<StreamChunk> = Vec::new();
    let mut chunks = 0;
    for piece in bytes.chunks(16 * 1024) {
        items.clear();
        framer.push(piece, &mut items).unwrap();
        for item in items.drain(..) {
            if let SseItem::Event(ev) = item {
                let p = tr.event(&ev.data, &mut out).unwrap();
                chunks += out.len();
                black_box(&out);
                out.clear();
                if p == Progress::Done {
                    return chunks;
                }
            }
        }
    }
    panic!("no [DONE]");
}

fn main() {
    let bytes = synthetic(64 * 1024 * 1024);
    let mb = bytes.len() as f64 / (1024.0 * 1024.0);
    let mut best = f64::MAX;
    let mut chunks = 0;
    for _ in 0..5 {
        let t = Instant::now();
        chunks = run(black_box(&bytes));
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "sse framing + deepseek translation: {mb:.1} MiB, {chunks} chunks, best {:.1} ms, {:.0} MiB/s",
        best * 1000.0,
        mb / best
    );
}
