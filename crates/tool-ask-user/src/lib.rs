//! `dsh-tool-ask-user`: `ask_user_question`, structured questions to the user.
//!
//! The original's arguments (`questions: [{id, question, header?, options?: [{label,
//! description?}], multi_select?}]`) and result JSON (`{"answers":[{"id","selected":[…],
//! "custom"?}]}`); the questions go to the `question-answerer` service
//! ([`dsh_approval_api::QuestionAnswerer`]) the front end's host provides, which turns them into
//! the protocol's `QuestionAsked` and waits for `AnswerQuestion`. Without an answerer (no person:
//! `dsh exec`) the call fails at once with `NO_PROVIDER`, telling the model to decide by itself;
//! a child agent gets `DELEGATED_CALLER`, as in the original.

mod tool;

pub use tool::{AskUserTool, NAME, display};

use std::sync::Arc;

use dsh_agent::events::AgentCreated;
use dsh_approval_api::QuestionAnswerer;
use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_tools::Tools;
use serde::Deserialize;

/// Where `ask_user_question` is declared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Declare {
    /// To agents created while a person can answer (a `question-answerer` service exists: the
    /// TUI, `dsh serve`), as the original declares it only in its front ends' profiles, not in
    /// `headless`.
    #[default]
    WithPerson,
    /// Everywhere; without a person the call fails at once (`NO_PROVIDER`), telling the model to
    /// decide by itself.
    Always,
}

/// Config of the `tool-ask-user` plugin.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AskUserConfig {
    /// Where the tool is declared (`with-person`, `always`).
    #[serde(default)]
    pub declare: Declare,
}

/// Registers `ask_user_question`: globally with `declare: always`, else in the scope of each
/// agent created while a `question-answerer` exists.
#[derive(Debug)]
pub struct AskUserToolPlugin;

impl Plugin for AskUserToolPlugin {
    const NAME: &'static str = "tool-ask-user";
    type Config = AskUserConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>()]
    }

    async fn apply(ctx: Ctx, config: AskUserConfig) -> Result<(), BoxError> {
        let tools = ctx.dep::<dyn Tools>()?;
        let tool = Arc::new(AskUserTool::new(ctx.clone()));
        if config.declare == Declare::Always {
            tools.register(&ctx, tool)?;
            return Ok(());
        }
        let c = ctx.clone();
        ctx.on::<AgentCreated>(move |e| {
            if c.get::<dyn QuestionAnswerer>().is_some() {
                tools.register(e.agent.ctx(), tool.clone())?;
            }
            Ok(())
        })?;
        Ok(())
    }
}
