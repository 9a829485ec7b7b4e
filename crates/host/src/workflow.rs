//! `workflow` runs as front ends see them: the `tool-workflow/*` records of the calling session
//! (format §7.14, read in the format's own shapes) and the usage of each sub-agent as it ends
//! (`dsh/subagent-usage`), folded into [`EventMsg::WorkflowProgress`] events that each carry
//! the whole run.

use std::collections::HashMap;

use dsh_protocol::{EventMsg, Usage, WorkflowAgent, WorkflowAgentState, WorkflowStatus};
use dsh_session::{Event, EventKind};
use serde::Deserialize;

/// The prefix of dsh's run ids: `wf-<callId>`.
const RUN_PREFIX: &str = "wf-";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunStartData {
    run_id: String,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AgentStartData {
    run_id: String,
    seq: u64,
    #[serde(default)]
    label: String,
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    child_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Outcome {
    Completed,
    Failed,
    Cancelled,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AgentEndData {
    run_id: String,
    seq: u64,
    outcome: Outcome,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum StopReason {
    Completed,
    Cancelled,
    Error,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunEndData {
    run_id: String,
    stop_reason: StopReason,
}

/// One run being folded.
#[derive(Debug)]
struct Run {
    call_id: String,
    name: String,
    status: WorkflowStatus,
    agents: Vec<WorkflowAgent>,
}

impl Run {
    fn agent(&mut self, seq: u64) -> &mut WorkflowAgent {
        let i = match self.agents.iter().position(|a| a.seq == seq) {
            Some(i) => i,
            None => {
                self.agents.push(WorkflowAgent {
                    seq,
                    label: format!("agent {seq}"),
                    phase: None,
                    session_id: None,
                    state: WorkflowAgentState::Running,
                    usage: None,
                });
                self.agents.sort_by_key(|a| a.seq);
                self.agents.iter().position(|a| a.seq == seq).unwrap_or(0)
            }
        };
        &mut self.agents[i]
    }
}

/// The runs of one session's log, folded one committed event at a time.
#[derive(Debug, Default)]
pub struct Workflows {
    /// By run id; a run is dropped once its `run-end` is projected.
    runs: HashMap<String, Run>,
    /// A sub-agent's session → its run.
    children: HashMap<String, String>,
}

impl Workflows {
    /// Whether `kind` is a `tool-workflow/*` record.
    pub fn is_record(kind: &EventKind) -> bool {
        matches!(
            kind,
            EventKind::ToolWorkflowRunStart
                | EventKind::ToolWorkflowAgentStart
                | EventKind::ToolWorkflowAgentEnd
                | EventKind::ToolWorkflowRunEnd
        )
    }

    /// Folds a `tool-workflow/*` record. `open_call` names the oldest open `workflow` call of
    /// the session not yet tied to a run (for run ids not of dsh's `wf-<callId>` form).
    pub fn record(
        &mut self,
        ev: &Event,
        open_call: impl FnOnce(&dyn Fn(&str) -> bool) -> Option<String>,
    ) -> Option<EventMsg> {
        let run_id = match ev.event_kind() {
            EventKind::ToolWorkflowRunStart => {
                let d: RunStartData = ev.data_as().ok()?;
                let call_id = match d.run_id.strip_prefix(RUN_PREFIX) {
                    Some(call) => call.to_owned(),
                    None => {
                        let bound: Vec<&str> =
                            self.runs.values().map(|r| r.call_id.as_str()).collect();
                        open_call(&|c| !bound.contains(&c)).unwrap_or_else(|| d.run_id.clone())
                    }
                };
                self.runs.insert(
                    d.run_id.clone(),
                    Run {
                        call_id,
                        name: d.name,
                        status: WorkflowStatus::Running,
                        agents: Vec::new(),
                    },
                );
                d.run_id
            }
            EventKind::ToolWorkflowAgentStart => {
                let d: AgentStartData = ev.data_as().ok()?;
                let run = self.runs.get_mut(&d.run_id)?;
                let a = run.agent(d.seq);
                if !d.label.is_empty() {
                    a.label = d.label;
                }
                a.phase = d.phase.filter(|p| !p.is_empty()).or(a.phase.take());
                if let Some(child) = d.child_id.filter(|c| !c.is_empty()) {
                    self.children.insert(child.clone(), d.run_id.clone());
                    a.session_id = Some(child);
                }
                d.run_id
            }
            EventKind::ToolWorkflowAgentEnd => {
                let d: AgentEndData = ev.data_as().ok()?;
                let run = self.runs.get_mut(&d.run_id)?;
                run.agent(d.seq).state = match d.outcome {
                    Outcome::Completed => WorkflowAgentState::Completed,
                    Outcome::Failed => WorkflowAgentState::Failed,
                    Outcome::Cancelled => WorkflowAgentState::Cancelled,
                };
                d.run_id
            }
            EventKind::ToolWorkflowRunEnd => {
                let d: RunEndData = ev.data_as().ok()?;
                let mut run = self.runs.remove(&d.run_id)?;
                self.children.retain(|_, r| *r != d.run_id);
                run.status = match d.stop_reason {
                    StopReason::Completed => WorkflowStatus::Completed,
                    StopReason::Cancelled => WorkflowStatus::Cancelled,
                    StopReason::Error => WorkflowStatus::Error,
                };
                return Some(progress(&d.run_id, &run));
            }
            _ => return None,
        };
        self.runs.get(&run_id).map(|run| progress(&run_id, run))
    }

    /// The process that ran the session's runs died (a turn repaired as `interrupted`): every
    /// run still open ends `cancelled`, so no front end keeps showing it running.
    pub fn interrupted(&mut self) -> Vec<EventMsg> {
        self.children.clear();
        let mut runs: Vec<(String, Run)> = self.runs.drain().collect();
        runs.sort_by(|a, b| a.0.cmp(&b.0));
        runs.into_iter()
            .map(|(id, mut run)| {
                run.status = WorkflowStatus::Cancelled;
                for a in &mut run.agents {
                    if a.state == WorkflowAgentState::Running {
                        a.state = WorkflowAgentState::Cancelled;
                    }
                }
                progress(&id, &run)
            })
            .collect()
    }

    /// A sub-agent's run ended with `usage` (`dsh/subagent-usage`): its run's progress, when
    /// it is one of a running workflow's agents.
    pub fn child_usage(&mut self, child: &str, usage: Usage) -> Option<EventMsg> {
        let run_id = self.children.get(child)?.clone();
        let run = self.runs.get_mut(&run_id)?;
        let agent = run
            .agents
            .iter_mut()
            .find(|a| a.session_id.as_deref() == Some(child))?;
        agent.usage = Some(usage);
        Some(progress(&run_id, run))
    }
}

fn progress(run_id: &str, run: &Run) -> EventMsg {
    EventMsg::WorkflowProgress {
        call_id: run.call_id.clone(),
        run_id: run_id.to_owned(),
        name: run.name.clone(),
        status: run.status,
        agents: run.agents.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, kind: &str, data: serde_json::Value) -> Event {
        let line = serde_json::json!({"type": kind, "seq": seq, "time": 0, "data": data});
        Event::from_line(&line.to_string(), seq).expect("a valid line")
    }

    fn agents(msg: &EventMsg) -> Vec<(String, WorkflowAgentState)> {
        match msg {
            EventMsg::WorkflowProgress { agents, .. } => {
                agents.iter().map(|a| (a.label.clone(), a.state)).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    /// A run whose id does not name its call (the original's ids) is tied to the open
    /// `workflow` call; an `agent-end` whose start was never logged still shows the agent; a
    /// record of an unknown run gives nothing; the run leaves once it ended.
    #[test]
    fn a_foreign_run_id_an_unstarted_agent_and_the_end() {
        let mut w = Workflows::default();
        let start = ev(
            1,
            "tool-workflow/run-start",
            serde_json::json!({"runId": "run-7", "name": "review"}),
        );
        let p = w.record(&start, |free| {
            Some("call_a").filter(|c| free(c)).map(str::to_owned)
        });
        match p {
            Some(EventMsg::WorkflowProgress {
                ref call_id,
                ref status,
                ..
            }) => {
                assert_eq!(call_id, "call_a");
                assert_eq!(*status, WorkflowStatus::Running);
            }
            other => panic!("{other:?}"),
        }
        let end = ev(
            2,
            "tool-workflow/agent-end",
            serde_json::json!({"runId": "run-7", "seq": 2, "outcome": "failed"}),
        );
        let p = w.record(&end, |_| None).expect("progress");
        assert_eq!(
            agents(&p),
            [("agent 2".to_owned(), WorkflowAgentState::Failed)]
        );
        let start1 = ev(
            3,
            "tool-workflow/agent-start",
            serde_json::json!({"runId": "run-7", "seq": 1, "label": "first", "phase": null, "childId": "child-1"}),
        );
        let p = w.record(&start1, |_| None).expect("progress");
        assert_eq!(
            agents(&p),
            [
                ("first".to_owned(), WorkflowAgentState::Running),
                ("agent 2".to_owned(), WorkflowAgentState::Failed)
            ]
        );
        let used = Usage {
            output_tokens: 7,
            ..Usage::default()
        };
        assert!(w.child_usage("child-1", used).is_some());
        assert!(w.child_usage("someone-else", used).is_none());
        let other = ev(
            4,
            "tool-workflow/agent-end",
            serde_json::json!({"runId": "run-8", "seq": 1, "outcome": "completed"}),
        );
        assert!(w.record(&other, |_| None).is_none());
        let run_end = ev(
            5,
            "tool-workflow/run-end",
            serde_json::json!({"runId": "run-7", "stopReason": "error"}),
        );
        match w.record(&run_end, |_| None) {
            Some(EventMsg::WorkflowProgress { status, agents, .. }) => {
                assert_eq!(status, WorkflowStatus::Error);
                assert_eq!(agents[0].usage, Some(used));
            }
            other => panic!("{other:?}"),
        }
        assert!(w.runs.is_empty() && w.children.is_empty());
        // A run cut by a crash ends cancelled at the repaired turn's end, its agents too.
        w.record(&start, |_| None);
        w.record(&start1, |_| None);
        let ended = w.interrupted();
        match ended.as_slice() {
            [EventMsg::WorkflowProgress { status, agents, .. }] => {
                assert_eq!(*status, WorkflowStatus::Cancelled);
                assert_eq!(agents[0].state, WorkflowAgentState::Cancelled);
            }
            other => panic!("{other:?}"),
        }
        assert!(w.interrupted().is_empty());
    }
}
