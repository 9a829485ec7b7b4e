//! `cargo bench -p dsh-tui`: the TUI's budgets on a `TestBackend` (the rendering work of the
//! real terminal, without the terminal): first frame, key-to-screen with a 10,000-line
//! transcript, a streamed 100 KB answer (linear total work), peak RSS.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_protocol::{Event, EventMsg};
use dsh_tui::app::App;
use dsh_tui::composer::Composer;
use dsh_tui::theme::Theme;
use dsh_tui::transcript::Transcript;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const W: u16 = 120;
const H: u16 = 14;

fn app() -> App {
    let mut app = App::new(
        Theme::COLOR,
        Transcript::new(Theme::COLOR),
        Composer::new(None),
    );
    app.model = "deepseek-flash".into();
    app
}

fn delta(t: &str) -> Event {
    Event::new(1, EventMsg::TextDelta { text: t.into() })
}

/// Streams `bytes` of markdown in 16-byte deltas, drawing the viewport after each (the worst
/// case: a frame per delta). Returns the total time.
fn stream(bytes: usize) -> Duration {
    let mut app = app();
    let mut term = Terminal::new(TestBackend::new(W, H)).unwrap();
    let para = "Some streamed **markdown** with `code` and words to wrap around the line. ";
    let mut text = String::new();
    let mut n = 0;
    while text.len() < bytes {
        text.push_str(para);
        n += 1;
        if n % 4 == 0 {
            text.push_str("\n\n");
        }
    }
    let start = Instant::now();
    let chars: Vec<char> = text.chars().collect();
    for chunk in chars.chunks(16) {
        let d: String = chunk.iter().collect();
        let lines = app.transcript.on_event(&delta(&d), W);
        app.inserts.extend(lines);
        app.inserts.clear();
        term.draw(|f| app.draw(f)).unwrap();
    }
    start.elapsed()
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    // First frame: state, composer and one draw.
    let start = Instant::now();
    let app0 = app();
    let mut term = Terminal::new(TestBackend::new(W, H)).unwrap();
    term.draw(|f| app0.draw(f)).unwrap();
    println!("first frame (state + draw): {:?}", start.elapsed());

    // A 10,000-line transcript goes through the fold (into the scrollback: not kept).
    let mut app = app();
    let mut lines = 0usize;
    let start = Instant::now();
    while lines < 10_000 {
        let out = app
            .transcript
            .on_event(&delta("A line of an answer in the history.\n\n"), W);
        lines += out.len();
    }
    println!("10,000 transcript lines folded: {:?}", start.elapsed());

    // Key to screen: one key handled and the viewport drawn.
    let mut samples = Vec::new();
    for i in 0..2000 {
        let c = if i % 50 == 49 {
            KeyCode::Backspace
        } else {
            KeyCode::Char('x')
        };
        let t = Instant::now();
        app.key(KeyEvent::new(c, KeyModifiers::NONE), W);
        term.draw(|f| app.draw(f)).unwrap();
        samples.push(t.elapsed());
    }
    samples.sort();
    println!(
        "key-to-screen with 10,000 lines: median {:?}, p99 {:?}, max {:?}",
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
        samples[samples.len() - 1]
    );

    // Linear total work: 100 KB vs 50 KB (ratio ~2 when linear, ~4 when quadratic).
    let half = stream(50 * 1024);
    let full = stream(100 * 1024);
    println!(
        "streamed answer (a frame per 16-byte delta): 50 KB {:?}, 100 KB {:?}, ratio {:.2}",
        half,
        full,
        full.as_secs_f64() / half.as_secs_f64()
    );
    println!("peak RSS: {} KB", peak_rss_kb());
}
