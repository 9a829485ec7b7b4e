//! The response body that plays a script: one frame per [`Step::Bytes`], flushed separately.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::stream::BoxStream;
use hyper::body::{Body, Frame, SizeHint};

use crate::record::Outcome;
use crate::reply::{KEEP_ALIVE, Step};
use crate::server::Shared;

/// Error a script body yields to make hyper abort the connection mid-body.
#[derive(Debug, thiserror::Error)]
#[error("dsh-testkit: scripted connection reset")]
pub(crate) struct ScriptedReset;

/// Records how a response ended exactly once; dropping it unfinished records [`Outcome::Dropped`].
pub(crate) struct Finisher {
    shared: Arc<Shared>,
    index: usize,
    done: bool,
}

impl Finisher {
    pub(crate) fn new(shared: Arc<Shared>, index: usize) -> Self {
        Self {
            shared,
            index,
            done: false,
        }
    }

    pub(crate) fn finish(&mut self, outcome: Outcome) {
        if !self.done {
            self.done = true;
            self.shared.finish(self.index, outcome);
        }
    }
}

impl Drop for Finisher {
    fn drop(&mut self) {
        self.finish(Outcome::Dropped);
    }
}

struct State {
    steps: VecDeque<Step>,
    finisher: Finisher,
    /// Set after a data frame: the next poll yields once so hyper flushes that frame on its own.
    just_sent: bool,
}

async fn next_frame(st: &mut State) -> Option<Result<Frame<Bytes>, ScriptedReset>> {
    if st.just_sent {
        st.just_sent = false;
        tokio::task::yield_now().await;
    }
    loop {
        match st.steps.pop_front() {
            None => {
                st.finisher.finish(Outcome::Completed);
                return None;
            }
            Some(Step::Bytes(bytes)) => {
                st.just_sent = true;
                if st.steps.is_empty() {
                    // The last frame: with content-length framing hyper never polls again.
                    st.finisher.finish(Outcome::Completed);
                }
                return Some(Ok(Frame::data(bytes)));
            }
            Some(Step::Sleep(delay)) => tokio::time::sleep(delay).await,
            Some(Step::Gate(gate)) => gate.pass().await,
            Some(Step::Stall) => futures::future::pending::<()>().await,
            Some(Step::KeepAliveEvery(interval)) => {
                tokio::time::sleep(interval).await;
                st.steps.push_front(Step::KeepAliveEvery(interval));
                st.just_sent = true;
                return Some(Ok(Frame::data(Bytes::from_static(KEEP_ALIVE))));
            }
            Some(Step::Reset) => {
                st.steps.clear();
                st.finisher.finish(Outcome::Reset);
                return Some(Err(ScriptedReset));
            }
        }
    }
}

/// A hyper body over a scripted step list.
pub(crate) struct ScriptBody {
    stream: Option<BoxStream<'static, Result<Frame<Bytes>, ScriptedReset>>>,
    exact_len: Option<u64>,
}

impl ScriptBody {
    /// A body playing `steps`; `exact_len` announces a `content-length`.
    pub(crate) fn new(steps: Vec<Step>, mut finisher: Finisher, exact_len: Option<u64>) -> Self {
        if steps.is_empty() {
            finisher.finish(Outcome::Completed);
            return Self {
                stream: None,
                exact_len: Some(0),
            };
        }
        let state = State {
            steps: steps.into(),
            finisher,
            just_sent: false,
        };
        let stream = futures::stream::unfold(state, |mut st| async move {
            let item = next_frame(&mut st).await?;
            Some((item, st))
        });
        Self {
            stream: Some(Box::pin(stream)),
            exact_len,
        }
    }
}

impl ScriptBody {
    /// An empty body that records nothing (fallback for a response that could not be built).
    pub(crate) fn empty() -> Self {
        Self {
            stream: None,
            exact_len: Some(0),
        }
    }
}

impl Body for ScriptBody {
    type Data = Bytes;
    type Error = ScriptedReset;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match self.stream.as_mut() {
            None => Poll::Ready(None),
            Some(stream) => {
                let polled = stream.as_mut().poll_next(cx);
                if let Poll::Ready(None) = polled {
                    self.stream = None;
                }
                polled
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.stream.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.exact_len {
            Some(len) => SizeHint::with_exact(len),
            None => SizeHint::default(),
        }
    }
}
