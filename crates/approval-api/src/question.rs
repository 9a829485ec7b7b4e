//! The sibling seam for questions the agent asks the user (`ask_user_question`): a front end
//! that has a person answers them (kernel service `question-answerer`).

use dsh_kernel::Service;
use futures::future::BoxFuture;

/// One option of a question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuestionOption {
    /// The label (what an answer names).
    pub label: String,
    /// One sentence about it.
    pub description: Option<String>,
}

/// One question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// Its id within the request (echoed in the answer).
    pub id: String,
    /// A short heading.
    pub header: Option<String>,
    /// The question.
    pub question: String,
    /// The choices (none: free text only).
    pub options: Vec<QuestionOption>,
    /// Several options may be chosen.
    pub multi_select: bool,
}

/// Questions of one tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuestionRequest {
    /// The request's id (answer with it).
    pub id: String,
    /// The session (agent) asking.
    pub session_id: String,
    /// The tool call.
    pub call_id: String,
    /// The questions.
    pub questions: Vec<Question>,
}

/// A person's answer to one question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuestionAnswer {
    /// The question's id.
    pub id: String,
    /// The labels chosen (none and no `custom`: skipped).
    pub selected: Vec<String>,
    /// Free text.
    pub custom: Option<String>,
}

/// How the questions were settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuestionReply {
    /// The person answered.
    Answered(Vec<QuestionAnswer>),
    /// Dismissed (the turn ended, the front end went away).
    Cancelled,
}

/// Asks the user: the host's clients (the TUI, the server's, ACP).
pub trait QuestionAnswerer: Send + Sync + 'static {
    /// Asks the questions of `request`; resolves with the answer or `Cancelled`.
    fn ask<'a>(&'a self, request: &'a QuestionRequest) -> BoxFuture<'a, QuestionReply>;
}

impl Service for dyn QuestionAnswerer {
    const NAME: &'static str = "question-answerer";
}
