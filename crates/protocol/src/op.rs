//! `Op`: what a client asks of an open session.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::settings::Effort;

/// Something attached to a prompt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Attachment {
    /// A file of the workspace, read by the host (`@path` mentions).
    #[serde(rename_all = "camelCase")]
    File {
        /// The path, relative to the session's working directory or absolute.
        path: String,
    },
    /// An image, inline.
    #[serde(rename_all = "camelCase")]
    Image {
        /// `image/png`, `image/jpeg`, `image/webp`, `image/gif`.
        media_type: String,
        /// The bytes, base64.
        data: String,
    },
}

/// A person's answer to an approval request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ApprovalDecision {
    /// Run this call once.
    AllowOnce,
    /// Run it, and calls like it in this project from now on.
    AllowAlways,
    /// Do not run it; the reason is shown to the model.
    Deny {
        /// Why (optional).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// A person's answer to one question of a [`crate::event::Question`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuestionAnswer {
    /// The question answered (its `id`).
    pub question_id: String,
    /// The labels of the options chosen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selected: Vec<String>,
    /// Free text, when the question allows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// What a client asks of an open session. Every op is logged or acted on in the order the host
/// receives it; the answer ([`OpAccepted`]) says where it landed in the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Op {
    /// Submit a prompt: it starts a turn, or, while one runs, queues as the next turn's input.
    #[serde(rename_all = "camelCase")]
    Submit {
        /// The prompt.
        text: String,
        /// Attached files and images.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<Attachment>,
    },
    /// Steer the running turn: delivered at its next step boundary (or as a new turn when idle).
    /// Until delivered it can be withdrawn.
    #[serde(rename_all = "camelCase")]
    Steer {
        /// The message.
        text: String,
    },
    /// Take back a queued steer (no-op once delivered: the answer says so).
    #[serde(rename_all = "camelCase")]
    WithdrawSteer {
        /// The steer's id (from [`crate::event::EventMsg::SteerQueued`]).
        steer_id: String,
    },
    /// Stop the running turn; what was streamed is kept.
    Interrupt,
    /// Stop the running turn and discard the session's pending input (prompts queued for the
    /// next turn, queued steers: each gets `steerWithdrawn`): nothing starts after the
    /// interrupted turn. What a headless run (`dsh exec`) sends on Ctrl-C.
    InterruptDropQueued,
    /// Write the session's log through to storage now: a new session's file is created (and
    /// its write lock taken), a resumed one's crash repairs are written. Fails with
    /// `STORAGE_FAILED` when the log cannot be written (a read-only or full disk) or
    /// `CONFLICT` when another creator took the id. What a headless run sends before its
    /// prompt, so such a failure comes before any token is spent.
    Persist,
    /// Answer an approval request; the first answer wins.
    #[serde(rename_all = "camelCase")]
    AnswerApproval {
        /// The request's id.
        request_id: String,
        /// The answer.
        decision: ApprovalDecision,
    },
    /// Answer a question the agent asked.
    #[serde(rename_all = "camelCase")]
    AnswerQuestion {
        /// The request's id.
        request_id: String,
        /// One answer per question.
        answers: Vec<QuestionAnswer>,
    },
    /// Run a slash command of the registry.
    #[serde(rename_all = "camelCase")]
    RunCommand {
        /// The name, without the slash.
        name: String,
        /// The rest of the line.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        args: String,
    },
    /// Use this model from the next request on.
    #[serde(rename_all = "camelCase")]
    SetModel {
        /// The model id.
        model: String,
    },
    /// Use this reasoning effort from the next request on.
    #[serde(rename_all = "camelCase")]
    SetEffort {
        /// The effort.
        effort: Effort,
    },
    /// Move the session to another working directory (absolute, or relative to its current
    /// one; it must exist). The host logs `working-directory/change` (a resumed session
    /// continues there) and tells the model in a one-line notice before its next request; an
    /// unchanged directory logs nothing. The answer's `id` is the new directory, canonical.
    #[serde(rename_all = "camelCase")]
    SetWorkingDirectory {
        /// The directory.
        path: String,
    },
}

/// Where an op landed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpAccepted {
    /// The last sequence number of the log when the op was taken (events it causes come later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The id the op created, when it created one (a steer's id, a queued prompt's id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A command's outcome (`runCommand`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<crate::command::CommandOutcome>,
}
