//! The approval seam of dsh: what a front end implements to answer "may this tool call run?"
//! ([`ApprovalAnswerer`], kernel service `approval-answerer`), the question and the answer, and
//! the audit events every reader of a session log decodes (`approval/asked`,
//! `approval/decided`). The policies and rules that decide when to ask live in `dsh-approval`.
//! Its sibling [`question`]: questions the agent asks the user (`ask_user_question`), answered by
//! the `question-answerer` service.

pub mod answer;
pub mod events;
pub mod question;

pub use answer::{ApprovalAnswer, ApprovalAnswerer, ApprovalRequest};
pub use events::{ApprovalAsked, ApprovalDecided, DecidedOutcome};
pub use question::{
    Question, QuestionAnswer, QuestionAnswerer, QuestionOption, QuestionReply, QuestionRequest,
};
