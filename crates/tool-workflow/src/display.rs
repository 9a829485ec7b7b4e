//! How a `workflow` call looks: an agent card named by the script's `meta.name`, its phases,
//! and once it ended how many sub-agents it ran and how they ended (from `tool/result.meta`).

use dsh_tools::display::output_head;
use dsh_tools::{DisplayInput, ToolDisplay, ToolKind};
use serde::Deserialize;

use crate::events::AgentOutcome;
use crate::run::AgentRecord;

/// Lines of the result the card keeps.
const OUTPUT_LINES: usize = 3;

#[derive(Deserialize)]
struct Shown {
    meta: ShownMeta,
    #[serde(default)]
    run_in_background: Option<bool>,
}

#[derive(Deserialize)]
struct ShownMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    phases: Vec<ShownPhase>,
}

#[derive(Deserialize)]
struct ShownPhase {
    title: String,
}

/// The display of a `workflow` call.
pub fn display(call: &DisplayInput<'_>) -> ToolDisplay {
    let mut d = ToolDisplay::new(ToolKind::Agent, "Workflow");
    if let Some(shown) = call.parse::<Shown>() {
        if let Some(name) = shown.meta.name.filter(|n| !n.trim().is_empty()) {
            d = d.with_subject(name);
        }
        if !shown.meta.phases.is_empty() {
            let titles: Vec<String> = shown.meta.phases.into_iter().map(|p| p.title).collect();
            d = d.with_field("phases", titles.join(" → "));
        }
        if shown.run_in_background == Some(true) {
            d = d.with_field("mode", "background job");
        }
    }
    if let Some(result) = call.succeeded() {
        let mut out = output_head(result.text, OUTPUT_LINES);
        let agents: Option<Vec<AgentRecord>> = call
            .meta_field("agents")
            .and_then(|v| serde_json::from_value(v.clone()).ok());
        if let Some(agents) = agents {
            let count = |o: AgentOutcome| agents.iter().filter(|a| a.outcome == Some(o)).count();
            let mut headline = format!(
                "{} sub-agent{}",
                agents.len(),
                if agents.len() == 1 { "" } else { "s" }
            );
            for (o, n) in [
                (AgentOutcome::Completed, count(AgentOutcome::Completed)),
                (AgentOutcome::Failed, count(AgentOutcome::Failed)),
                (AgentOutcome::Cancelled, count(AgentOutcome::Cancelled)),
            ] {
                if n > 0 {
                    headline.push_str(&format!(", {n} {}", o.as_str()));
                }
            }
            out.headline = Some(headline);
        }
        d = d.with_output(out);
    }
    d
}
