//! Approval requests and questions as `session/request_permission`: the client's choice goes
//! back to the session as `answerApproval` / `answerQuestion`. Each request runs on its own
//! task, so the session's other events keep flowing while the client decides.

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    SessionId, ToolCallUpdate, ToolCallUpdateFields,
};
use dsh_protocol::{
    ApprovalDecision, ApprovalRequest, Client as Host, Op, Question, QuestionAnswer,
    QuestionRequest,
};

const ALLOW_ONCE: &str = "allow-once";
const ALLOW_ALWAYS: &str = "allow-always";
const REJECT_ONCE: &str = "reject-once";
/// The option of a question that answers none of its options.
const SKIP: &str = "skip";

/// The client's choice: an option id, `None` when the request was cancelled.
type Choice = Result<Option<String>, agent_client_protocol::Error>;

async fn ask(connection: &ConnectionTo<Client>, request: RequestPermissionRequest) -> Choice {
    let r = connection.send_request(request).block_task().await?;
    Ok(match r.outcome {
        RequestPermissionOutcome::Selected(s) => Some(s.option_id.0.to_string()),
        _ => None,
    })
}

/// The decision of a client's choice on an approval request.
fn decision(choice: Choice) -> ApprovalDecision {
    match choice {
        Ok(Some(id)) if id == ALLOW_ONCE => ApprovalDecision::AllowOnce,
        Ok(Some(id)) if id == ALLOW_ALWAYS => ApprovalDecision::AllowAlways,
        Ok(Some(_)) => ApprovalDecision::Deny {
            reason: Some("the user rejected it".into()),
        },
        Ok(None) => ApprovalDecision::Deny {
            reason: Some("the user dismissed the request".into()),
        },
        // A failed request fails closed.
        Err(e) => ApprovalDecision::Deny {
            reason: Some(format!("the permission request failed: {e}")),
        },
    }
}

/// Asks the client about a tool call waiting for approval (shown with `title`, the call's
/// card title) in ACP session `session` and answers the host's session `target` with its choice.
pub(crate) fn ask_approval(
    connection: ConnectionTo<Client>,
    host: Arc<dyn Host>,
    (session, target): (String, String),
    request: ApprovalRequest,
    title: String,
) {
    tokio::spawn(async move {
        let title = if request.reason.is_empty() {
            title
        } else {
            format!("{title}: {}", request.reason)
        };
        let ask_for = RequestPermissionRequest::new(
            SessionId::new(session.as_str()),
            ToolCallUpdate::new(
                request.call_id.clone(),
                ToolCallUpdateFields::new().title(title),
            ),
            vec![
                PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
                PermissionOption::new(
                    ALLOW_ALWAYS,
                    "Always allow",
                    PermissionOptionKind::AllowAlways,
                ),
                PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
            ],
        );
        let decision = decision(ask(&connection, ask_for).await);
        let answer = Op::AnswerApproval {
            request_id: request.request_id,
            decision,
        };
        // The request may have closed meanwhile (the turn ended, another client answered).
        if let Err(e) = host.send(&target, answer).await {
            tracing::debug!(error = %e, "approval answer not taken");
        }
    });
}

/// The option id of a question's option `i`.
fn option_id(i: usize) -> String {
    format!("option-{i}")
}

/// A question as a permission request: one option per answer, and `skip`.
fn question_request(session: &str, request_id: &str, q: &Question) -> RequestPermissionRequest {
    let title = match &q.header {
        Some(h) if !h.is_empty() => format!("{h}: {}", q.question),
        _ => q.question.clone(),
    };
    let mut options: Vec<PermissionOption> = q
        .options
        .iter()
        .enumerate()
        .map(|(i, o)| {
            PermissionOption::new(
                option_id(i),
                o.label.clone(),
                PermissionOptionKind::AllowOnce,
            )
        })
        .collect();
    options.push(PermissionOption::new(
        SKIP,
        "Skip",
        PermissionOptionKind::RejectOnce,
    ));
    RequestPermissionRequest::new(
        SessionId::new(session),
        ToolCallUpdate::new(
            format!("{request_id}/{}", q.id),
            ToolCallUpdateFields::new().title(title),
        ),
        options,
    )
}

/// The answer of a client's choice on a question: the chosen option's label, or none.
fn question_answer(q: &Question, choice: Choice) -> QuestionAnswer {
    let selected = match choice {
        Ok(Some(id)) => q
            .options
            .iter()
            .enumerate()
            .find(|(i, _)| option_id(*i) == id)
            .map(|(_, o)| vec![o.label.clone()])
            .unwrap_or_default(),
        Ok(None) => Vec::new(),
        Err(e) => {
            tracing::warn!(error = %e, "question not asked");
            Vec::new()
        }
    };
    QuestionAnswer {
        question_id: q.id.clone(),
        selected,
        text: None,
    }
}

/// Asks the client each question of `request` in turn (as permission requests whose options
/// are the answers) in ACP session `session` and answers the host's session `target`.
pub(crate) fn ask_questions(
    connection: ConnectionTo<Client>,
    host: Arc<dyn Host>,
    (session, target): (String, String),
    request: QuestionRequest,
) {
    tokio::spawn(async move {
        let mut answers = Vec::with_capacity(request.questions.len());
        for q in &request.questions {
            let choice = ask(
                &connection,
                question_request(&session, &request.request_id, q),
            )
            .await;
            answers.push(question_answer(q, choice));
        }
        let answer = Op::AnswerQuestion {
            request_id: request.request_id,
            answers,
        };
        if let Err(e) = host.send(&target, answer).await {
            tracing::debug!(error = %e, "question answer not taken");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_protocol::QuestionOption;

    fn question() -> Question {
        Question {
            id: "q1".into(),
            header: Some("Colour".into()),
            question: "Which one?".into(),
            options: vec![
                QuestionOption {
                    label: "red".into(),
                    description: None,
                },
                QuestionOption {
                    label: "blue".into(),
                    description: None,
                },
            ],
            multi_select: false,
        }
    }

    #[test]
    fn a_question_is_a_permission_request_with_its_options_and_skip() {
        let q = question();
        let r = question_request("s1", "req-1", &q);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["toolCall"]["toolCallId"], "req-1/q1");
        assert_eq!(v["toolCall"]["title"], "Colour: Which one?");
        let names: Vec<&str> = v["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["red", "blue", "Skip"]);
        assert_eq!(
            question_answer(&q, Ok(Some(option_id(1)))).selected,
            ["blue"]
        );
        assert!(
            question_answer(&q, Ok(Some(SKIP.into())))
                .selected
                .is_empty()
        );
        assert!(question_answer(&q, Ok(None)).selected.is_empty());
    }

    #[test]
    fn a_failed_or_dismissed_approval_denies() {
        assert_eq!(
            decision(Ok(Some(ALLOW_ALWAYS.into()))),
            ApprovalDecision::AllowAlways
        );
        assert!(matches!(
            decision(Ok(Some(REJECT_ONCE.into()))),
            ApprovalDecision::Deny { .. }
        ));
        assert!(matches!(decision(Ok(None)), ApprovalDecision::Deny { .. }));
        assert!(matches!(
            decision(Err(agent_client_protocol::Error::new(-32603, "gone"))),
            ApprovalDecision::Deny { .. }
        ));
    }
}
