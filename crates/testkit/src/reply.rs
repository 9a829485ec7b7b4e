//! Scripted HTTP responses: a status line, headers and a list of body steps.
//!
//! A [`Reply`] is data: building one does no I/O. The server plays it back step by step, so a test
//! controls exactly which bytes leave in which write, when the stream pauses, and how it ends.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;

/// The SSE keep-alive comment DeepSeek sends while a request waits for capacity.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// The `content-type` DeepSeek sends on streaming responses.
pub const SSE_CONTENT_TYPE: &str = "text/event-stream; charset=utf-8";

/// One step of a response script.
#[derive(Clone, Debug)]
pub enum Step {
    /// Send these bytes as one body frame (one HTTP chunk), flushed before the next step runs.
    Bytes(Bytes),
    /// Pause before the next step.
    Sleep(Duration),
    /// Wait until the test opens the gate (see [`Gate`]).
    Gate(Gate),
    /// Abort the connection: before the head, the socket is closed with no response; in the body,
    /// the connection is torn down mid-body (no terminating chunk), so the client sees an error,
    /// never a clean end.
    Reset,
    /// Never send anything again. Ends only when the client goes away or the server is dropped.
    Stall,
    /// Send `: keep-alive\n\n` after every interval, forever (a request that never gets
    /// capacity). Ends like [`Step::Stall`]. Before the head it behaves like a stall.
    KeepAliveEvery(Duration),
}

/// How a byte stream is cut into writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Split {
    /// One write.
    Whole,
    /// One write per SSE event or comment (after each `\n\n`).
    PerEvent,
    /// Writes of `n` bytes (the last may be shorter); `Every(1)` is one byte at a time.
    Every(usize),
    /// Writes of these sizes in order; the remainder is one final write.
    Sizes(Vec<usize>),
    /// Writes of pseudo-random sizes in `1..=max` (0 is treated as 1), reproducible from `seed`.
    Random {
        /// Seed of the size sequence.
        seed: u64,
        /// Largest write.
        max: usize,
    },
}

impl Split {
    /// Cuts `bytes` into the pieces this split describes (no empty pieces).
    pub fn apply(&self, bytes: &Bytes) -> Vec<Bytes> {
        match self {
            Split::Whole if bytes.is_empty() => Vec::new(),
            Split::Whole => vec![bytes.clone()],
            Split::PerEvent => split_events(bytes),
            Split::Every(n) => split_every(bytes, *n),
            Split::Sizes(sizes) => split_sizes(bytes, sizes),
            Split::Random { seed, max } => {
                split_sizes(bytes, &random_sizes(bytes.len(), *seed, *max))
            }
        }
    }
}

/// A scripted response: status, headers, steps before the head is sent, and body steps.
///
/// Build one with [`Reply::sse`], [`Reply::json`], [`Reply::status`] or the helpers in
/// [`crate::deepseek`], then append body steps with the builder methods.
#[derive(Clone, Debug)]
pub struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) before_head: Vec<Step>,
    pub(crate) body: Vec<Step>,
    pub(crate) content_length: bool,
}

impl Reply {
    /// An empty response with `status` and no headers; the body is sent chunked unless
    /// [`Reply::content_length`] is called.
    pub fn status(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            before_head: Vec::new(),
            body: Vec::new(),
            content_length: false,
        }
    }

    /// A `200` streaming response with DeepSeek's SSE headers (`content-type`, `cache-control`,
    /// `x-ds-trace-id`), sent chunked. Append the body with [`Reply::bytes`] and friends.
    pub fn sse() -> Self {
        Self::status(200)
            .header("content-type", SSE_CONTENT_TYPE)
            .header("cache-control", "no-cache")
            .header("x-ds-trace-id", "dsh-testkit-trace")
    }

    /// A `200` SSE response whose body is `bytes`, sent as one write.
    pub fn sse_bytes(bytes: impl Into<Bytes>) -> Self {
        Self::sse().bytes(bytes)
    }

    /// A complete JSON response (`content-type: application/json`, `content-length` framing).
    pub fn json(status: u16, body: impl Into<Bytes>) -> Self {
        Self::status(status)
            .header("content-type", "application/json")
            .bytes(body)
            .content_length()
    }

    /// A complete plain-text response (`content-type: text/plain; charset=utf-8`).
    pub fn text(status: u16, body: impl Into<Bytes>) -> Self {
        Self::status(status)
            .header("content-type", "text/plain; charset=utf-8")
            .bytes(body)
            .content_length()
    }

    /// Adds a response header (appended: repeated names are sent repeatedly).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sends `content-length` (the sum of all [`Step::Bytes`]) instead of chunked framing. A
    /// [`Step::Reset`] or [`Step::Stall`] then leaves the body short of its announced length.
    pub fn content_length(mut self) -> Self {
        self.content_length = true;
        self
    }

    /// Waits `delay` before sending the status line and headers (the client sees no response
    /// head until then).
    pub fn delay_head(mut self, delay: Duration) -> Self {
        self.before_head.push(Step::Sleep(delay));
        self
    }

    /// Waits for `gate` before sending the status line and headers.
    pub fn gate_head(mut self, gate: &Gate) -> Self {
        self.before_head.push(Step::Gate(gate.clone()));
        self
    }

    /// Never sends a response head: the request hangs until the client gives up.
    pub fn stall_head(mut self) -> Self {
        self.before_head.push(Step::Stall);
        self
    }

    /// Closes the connection without any response (a transport failure before headers).
    pub fn reset_head(mut self) -> Self {
        self.before_head.push(Step::Reset);
        self
    }

    /// Appends one body write.
    pub fn bytes(mut self, bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        if !bytes.is_empty() {
            self.body.push(Step::Bytes(bytes));
        }
        self
    }

    /// Appends `bytes` split into writes of the given sizes, in order; whatever remains after the
    /// last size is sent as a final write. Zero sizes are skipped.
    pub fn chunks(mut self, bytes: impl Into<Bytes>, sizes: &[usize]) -> Self {
        for piece in split_sizes(&bytes.into(), sizes) {
            self.body.push(Step::Bytes(piece));
        }
        self
    }

    /// Appends `bytes` split into writes of `size` bytes each (the last may be shorter).
    /// `size` 0 is treated as 1.
    pub fn split_every(mut self, bytes: impl Into<Bytes>, size: usize) -> Self {
        for piece in split_every(&bytes.into(), size) {
            self.body.push(Step::Bytes(piece));
        }
        self
    }

    /// Appends `bytes` as one write per SSE event (split after every blank-line terminator).
    pub fn split_events(mut self, bytes: impl Into<Bytes>) -> Self {
        for piece in split_events(&bytes.into()) {
            self.body.push(Step::Bytes(piece));
        }
        self
    }

    /// Appends `bytes` cut into writes as `split` says.
    pub fn split(mut self, bytes: impl Into<Bytes>, split: &Split) -> Self {
        for piece in split.apply(&bytes.into()) {
            self.body.push(Step::Bytes(piece));
        }
        self
    }

    /// Appends one `: keep-alive\n\n` comment write.
    pub fn keep_alive(self) -> Self {
        self.bytes(Bytes::from_static(KEEP_ALIVE))
    }

    /// Appends a pause.
    pub fn sleep(mut self, delay: Duration) -> Self {
        self.body.push(Step::Sleep(delay));
        self
    }

    /// Appends a wait for `gate` (the test opens it with [`Gate::open`]).
    pub fn gate(mut self, gate: &Gate) -> Self {
        self.body.push(Step::Gate(gate.clone()));
        self
    }

    /// Sends the end of the body (the chunked terminator `0\r\n\r\n`) in a separate write,
    /// `delay` after the last body write, as servers do that flush `data: [DONE]` before they
    /// close the body. A client that stops reading at `[DONE]` then cannot return the
    /// connection to its pool (see [`crate::MockServer::connection_count`]). Call it last.
    pub fn terminator_after(mut self, delay: Duration) -> Self {
        self.body.push(Step::Sleep(delay));
        self
    }

    /// Appends an abrupt connection teardown: the client sees a body error, not a clean end.
    pub fn reset(mut self) -> Self {
        self.body.push(Step::Reset);
        self
    }

    /// Appends endless keep-alive comments, one per `interval` (ends like a stall).
    pub fn keep_alive_every(mut self, interval: Duration) -> Self {
        self.body.push(Step::KeepAliveEvery(interval));
        self
    }

    /// Appends a stall: nothing more is ever sent.
    pub fn stall(mut self) -> Self {
        self.body.push(Step::Stall);
        self
    }

    /// Appends an arbitrary step.
    pub fn step(mut self, step: Step) -> Self {
        if let Step::Bytes(b) = &step
            && b.is_empty()
        {
            return self;
        }
        self.body.push(step);
        self
    }

    /// The HTTP status this reply sends.
    pub fn status_code(&self) -> u16 {
        self.status
    }

    /// The body steps, in order.
    pub fn body_steps(&self) -> &[Step] {
        &self.body
    }

    /// All body bytes concatenated (what a client reads if nothing resets or stalls).
    pub fn body_bytes(&self) -> Bytes {
        let mut out = Vec::new();
        for step in &self.body {
            if let Step::Bytes(b) = step {
                out.extend_from_slice(b);
            }
        }
        Bytes::from(out)
    }
}

/// Pseudo-random sizes in `1..=max` covering at least `total` bytes (a SplitMix64 sequence).
pub fn random_sizes(total: usize, seed: u64, max: usize) -> Vec<usize> {
    let max = max.max(1) as u64;
    let mut state = seed;
    let mut sizes = Vec::new();
    let mut covered = 0;
    while covered < total {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let size = (z % max) as usize + 1;
        sizes.push(size);
        covered += size;
    }
    sizes
}

/// Splits `bytes` into pieces of the given sizes; the remainder (if any) is the last piece.
pub fn split_sizes(bytes: &Bytes, sizes: &[usize]) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0;
    for &size in sizes {
        if at >= bytes.len() {
            break;
        }
        if size == 0 {
            continue;
        }
        let end = (at + size).min(bytes.len());
        out.push(bytes.slice(at..end));
        at = end;
    }
    if at < bytes.len() {
        out.push(bytes.slice(at..));
    }
    out
}

/// Splits `bytes` into pieces of `size` bytes (0 is treated as 1).
pub fn split_every(bytes: &Bytes, size: usize) -> Vec<Bytes> {
    let size = size.max(1);
    (0..bytes.len())
        .step_by(size)
        .map(|at| bytes.slice(at..(at + size).min(bytes.len())))
        .collect()
}

/// Splits an SSE byte stream after every `\n\n` (one piece per event or comment); a trailing
/// unterminated tail is the last piece.
pub fn split_events(bytes: &Bytes) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b'\n' && bytes[i + 1] == b'\n' {
            out.push(bytes.slice(start..i + 2));
            start = i + 2;
            i += 2;
        } else {
            i += 1;
        }
    }
    if start < bytes.len() {
        out.push(bytes.slice(start..));
    }
    out
}

/// A barrier a script waits on until the test opens it.
///
/// Use it to observe a half-sent response deterministically: script `bytes(a).gate(&g).bytes(b)`,
/// read `a` on the client, then `g.open()`. [`Gate::wait_reached`] tells the test that the server
/// got to the gate (everything before it has been handed to the socket).
#[derive(Clone)]
pub struct Gate {
    inner: Arc<GateInner>,
}

struct GateInner {
    opened: watch::Sender<bool>,
    reached: watch::Sender<usize>,
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gate")
            .field("open", &self.is_open())
            .field("reached", &*self.inner.reached.borrow())
            .finish()
    }
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(GateInner {
                opened: watch::channel(false).0,
                reached: watch::channel(0).0,
            }),
        }
    }

    /// Opens the gate: every script waiting on it (now or later) continues.
    pub fn open(&self) {
        self.inner.opened.send_replace(true);
    }

    /// Whether [`Gate::open`] was called.
    pub fn is_open(&self) -> bool {
        *self.inner.opened.borrow()
    }

    /// Waits until scripts have reached this gate `times` times in total.
    pub async fn wait_reached(&self, times: usize) {
        let mut rx = self.inner.reached.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|n| *n >= times).await;
    }

    pub(crate) async fn pass(&self) {
        self.inner.reached.send_modify(|n| *n += 1);
        let mut rx = self.inner.opened.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }
}
