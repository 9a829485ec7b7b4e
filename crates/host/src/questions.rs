//! Questions the agent asks the user (`ask_user_question`): the host answers the
//! `question-answerer` seam by asking its clients ([`EventMsg::QuestionAsked`], kept in the
//! snapshot while open) and settles the question with the first
//! [`dsh_protocol::Op::AnswerQuestion`] ([`EventMsg::QuestionAnswered`]), or when the asker stops
//! waiting (the turn ended: answered with no answers).

use std::collections::HashMap;
use std::sync::Weak;

use dsh_approval_api::{
    QuestionAnswer as AskedAnswer, QuestionAnswerer, QuestionReply, QuestionRequest as AskedRequest,
};
use dsh_protocol::{
    ErrorCode, EventMsg, ProtocolError, Question, QuestionAnswer, QuestionOption, QuestionRequest,
};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::Inner;

/// Open questions by request id.
#[derive(Default)]
pub(crate) struct PendingQuestions {
    open: Mutex<HashMap<String, (String, oneshot::Sender<QuestionReply>)>>,
}

impl PendingQuestions {
    /// Answers `request_id` of `session_id`; the first answer wins. `settled` runs before the
    /// asker gets the answer (so clients hear of it before the turn goes on).
    pub fn answer(
        &self,
        session_id: &str,
        request_id: &str,
        answers: Vec<QuestionAnswer>,
        settled: impl FnOnce(),
    ) -> Result<(), ProtocolError> {
        let mut open = self.open.lock();
        if open.get(request_id).is_none_or(|(s, _)| s != session_id) {
            return Err(ProtocolError::new(
                ErrorCode::UnknownRequest,
                format!(
                    "no open question `{request_id}` in session `{session_id}` (answered already?)"
                ),
            ));
        }
        let Some((_, reply)) = open.remove(request_id) else {
            return Ok(());
        };
        drop(open);
        settled();
        let answers = answers
            .into_iter()
            .map(|a| AskedAnswer {
                id: a.question_id,
                selected: a.selected,
                custom: a.text,
            })
            .collect();
        // The asker may have given up in between: then nobody waits for the answer.
        let _ = reply.send(QuestionReply::Answered(answers));
        Ok(())
    }

    fn remove(&self, request_id: &str) -> bool {
        self.open.lock().remove(request_id).is_some()
    }
}

/// The host's `question-answerer`.
pub struct HostQuestions {
    inner: Weak<Inner>,
}

impl std::fmt::Debug for HostQuestions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostQuestions").finish_non_exhaustive()
    }
}

impl HostQuestions {
    pub(crate) fn new(inner: Weak<Inner>) -> Self {
        HostQuestions { inner }
    }
}

/// Closes a question when its asker stops waiting, answered or not.
struct Open {
    inner: Weak<Inner>,
    session_id: String,
    request_id: String,
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            let dismissed = inner.questions.remove(&self.request_id);
            if let Some(hub) = inner.hubs.lock().get(&self.session_id) {
                hub.question_closed(&self.request_id);
                if dismissed {
                    hub.live_event(EventMsg::QuestionAnswered {
                        request_id: self.request_id.clone(),
                        answers: Vec::new(),
                    });
                }
            }
        }
    }
}

fn protocol_request(r: &AskedRequest) -> QuestionRequest {
    QuestionRequest {
        request_id: r.id.clone(),
        questions: r
            .questions
            .iter()
            .map(|q| Question {
                id: q.id.clone(),
                header: q.header.clone(),
                question: q.question.clone(),
                options: q
                    .options
                    .iter()
                    .map(|o| QuestionOption {
                        label: o.label.clone(),
                        description: o.description.clone(),
                    })
                    .collect(),
                multi_select: q.multi_select,
            })
            .collect(),
    }
}

impl QuestionAnswerer for HostQuestions {
    fn ask<'a>(&'a self, request: &'a AskedRequest) -> BoxFuture<'a, QuestionReply> {
        Box::pin(async move {
            let Some(inner) = self.inner.upgrade() else {
                return QuestionReply::Cancelled;
            };
            let Some(hub) = inner.hubs.lock().get(&request.session_id).cloned() else {
                // Nobody serves this session: nobody can answer.
                return QuestionReply::Cancelled;
            };
            let (tx, rx) = oneshot::channel();
            inner
                .questions
                .open
                .lock()
                .insert(request.id.clone(), (request.session_id.clone(), tx));
            hub.question_opened(protocol_request(request));
            let _open = Open {
                inner: self.inner.clone(),
                session_id: request.session_id.clone(),
                request_id: request.id.clone(),
            };
            drop(inner);
            drop(hub);
            rx.await.unwrap_or(QuestionReply::Cancelled)
        })
    }
}
