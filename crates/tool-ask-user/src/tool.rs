//! `ask_user_question`.

use std::collections::HashSet;

use dsh_agent::Agents;
use dsh_approval_api::{
    Question, QuestionAnswerer, QuestionOption, QuestionReply, QuestionRequest,
};
use dsh_kernel::Ctx;
use dsh_tools::{DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolKind, ToolOutput};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The tool's name.
pub const NAME: &str = "ask_user_question";

const DESCRIPTION: &str = "Ask the user brief, self-contained questions when you need a \
decision, a preference or missing information. Put a recommended option first, its label ending \
\"(Recommended)\".";

/// The error without a person to ask.
const NO_PERSON: &str = "no user-questions answerer accepted the request: nobody can answer \
questions in this session. Decide by yourself: choose the most reasonable option, say which \
assumption you made, and continue.";

/// The error of a child agent (the original's text).
const DELEGATED: &str = "human interaction is unavailable while the calling agent is owned by \
another live agent; include the unresolved question or decision in the child agent's final \
result";

/// The `ask_user_question` tool.
pub struct AskUserTool {
    ctx: Ctx,
    parameters: Value,
}

impl std::fmt::Debug for AskUserTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AskUserTool").finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Args {
    questions: Vec<QuestionArg>,
}

#[derive(Deserialize)]
struct QuestionArg {
    id: String,
    question: String,
    #[serde(default)]
    header: Option<String>,
    #[serde(default)]
    options: Option<Vec<OptionArg>>,
    #[serde(default)]
    multi_select: Option<bool>,
}

#[derive(Deserialize)]
struct OptionArg {
    label: String,
    #[serde(default)]
    description: Option<String>,
}

/// The result JSON (the original's `{"answers":[{id, selected, custom?}]}`).
#[derive(Serialize)]
struct Answers {
    answers: Vec<AnswerOut>,
}

#[derive(Serialize)]
struct AnswerOut {
    id: String,
    selected: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    custom: Option<String>,
}

impl AskUserTool {
    /// The tool; the calling agent and the answerer are looked up through `ctx` at each call.
    pub fn new(ctx: Ctx) -> Self {
        let parameters = json!({
            "type": "object",
            "properties": {
                "questions": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "question": {"type": "string"},
                            "header": {"type": "string"},
                            "options": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "label": {"type": "string"},
                                        "description": {"type": "string"}
                                    },
                                    "required": ["label"]
                                }
                            },
                            "multi_select": {"type": "boolean"}
                        },
                        "required": ["id", "question"]
                    }
                }
            },
            "required": ["questions"]
        });
        AskUserTool { ctx, parameters }
    }

    fn request(&self, tc: &ToolContext, args: Value) -> Result<QuestionRequest, ToolError> {
        let args: Args =
            serde_json::from_value(args).map_err(|e| ToolError::invalid_args(e.to_string()))?;
        if args.questions.is_empty() {
            return Err(ToolError::new(
                "EMPTY_QUESTIONS",
                "ask_user_question requires at least one question",
            ));
        }
        let mut ids = HashSet::new();
        for q in &args.questions {
            if !ids.insert(q.id.as_str()) {
                return Err(ToolError::invalid_args(format!(
                    "question id {} must be unique within this call",
                    serde_json::to_string(&q.id).unwrap_or_default()
                )));
            }
        }
        Ok(QuestionRequest {
            id: format!("question-{}", uuid::Uuid::now_v7()),
            session_id: tc.session_id().to_owned(),
            call_id: tc.call_id().to_owned(),
            questions: args
                .questions
                .into_iter()
                .map(|q| Question {
                    id: q.id,
                    header: q.header,
                    question: q.question,
                    options: q
                        .options
                        .unwrap_or_default()
                        .into_iter()
                        .map(|o| QuestionOption {
                            label: o.label,
                            description: o.description,
                        })
                        .collect(),
                    multi_select: q.multi_select.unwrap_or(false),
                })
                .collect(),
        })
    }
}

/// The display of an `ask_user_question` call: its first question as the subject.
pub fn display(call: &DisplayInput<'_>) -> ToolDisplay {
    let mut d = ToolDisplay::new(ToolKind::Other, "Ask the user");
    if let Some(q) = call
        .args()
        .pointer("/questions/0/question")
        .and_then(Value::as_str)
    {
        d = d.with_subject(q.to_owned());
    }
    d
}

impl Tool for AskUserTool {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// It asks the user: nothing to approve first.
    fn read_only(&self) -> bool {
        true
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        display(call)
    }

    fn execute<'a>(
        &'a self,
        tc: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let request = self.request(&tc, args)?;
            // A child agent asks nobody: its parent decides (the original's rule).
            let agent = self
                .ctx
                .get::<dyn Agents>()
                .and_then(|a| a.get(tc.session_id()));
            if agent.is_some_and(|a| a.session().header().parent_session.is_some()) {
                return Err(ToolError::new("DELEGATED_CALLER", DELEGATED));
            }
            let Some(answerer) = self.ctx.get::<dyn QuestionAnswerer>() else {
                return Err(ToolError::new("NO_PROVIDER", NO_PERSON));
            };
            let reply = tokio_select(&tc, answerer.ask(&request)).await;
            match reply {
                Some(QuestionReply::Answered(answers)) => {
                    let out = Answers {
                        answers: answers
                            .into_iter()
                            .map(|a| AnswerOut {
                                id: a.id,
                                selected: a.selected,
                                custom: a.custom,
                            })
                            .collect(),
                    };
                    let value =
                        serde_json::to_value(out).map_err(|e| ToolError::failed(e.to_string()))?;
                    Ok(ToolOutput::json(value))
                }
                Some(QuestionReply::Cancelled) => Err(ToolError::new(
                    "ASK_ABORTED",
                    "the question was dismissed without an answer",
                )),
                None => Err(ToolError::aborted()),
            }
        })
    }
}

/// The reply, or `None` when the call is cancelled first.
async fn tokio_select<'a>(
    tc: &ToolContext,
    ask: BoxFuture<'a, QuestionReply>,
) -> Option<QuestionReply> {
    let cancelled = tc.cancel_token().cancelled();
    futures::pin_mut!(cancelled);
    match futures::future::select(ask, cancelled).await {
        futures::future::Either::Left((reply, _)) => Some(reply),
        futures::future::Either::Right(((), _)) => None,
    }
}
