//! What `dsh exec` does after the task is answered: wait (capped) for the session's background
//! work — jobs and continuable subagents — and the turns their notices wake, then say what is
//! still running (its teardown settles it); and the usage summary, sub-agents included.

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_jobs::Jobs;
use dsh_kernel::Ctx;
use dsh_llm::{CallSettings, Llm, UsageTally};
use dsh_subagent::Subagents;

/// Background work of `owner` still running.
fn pending(
    jobs: Option<&Arc<dyn Jobs>>,
    subagents: Option<&Arc<dyn Subagents>>,
    owner: &str,
) -> (Vec<String>, usize) {
    let ids = jobs.map(|j| j.running(owner)).unwrap_or_default();
    let children = subagents.map_or(0, |s| s.busy_children(owner));
    (ids, children)
}

/// Waits until the agent is idle with no background work, or `cap` passes. Returns the line
/// to print when work was left running (it is stopped by the agent's teardown).
pub(crate) async fn settle(root: &Ctx, agent: &Arc<dyn Agent>, cap: Duration) -> Option<String> {
    let jobs = root.get::<dyn Jobs>();
    let subagents = root.get::<dyn Subagents>();
    let owner = agent.id().to_owned();
    let deadline = tokio::time::Instant::now() + cap;
    loop {
        agent.when_idle().await;
        let (ids, children) = pending(jobs.as_ref(), subagents.as_ref(), &owner);
        if ids.is_empty() && children == 0 {
            return None;
        }
        let all_settled = async {
            if let Some(j) = &jobs {
                j.when_settled(&owner).await;
            }
            if let Some(s) = &subagents {
                s.when_children_settled(&owner).await;
            }
        };
        tokio::select! {
            () = all_settled => continue,
            () = tokio::time::sleep_until(deadline) => {}
        }
        // The deadline passed: a turn a notice woke is let finish only if nothing is left.
        let (ids, children) = pending(jobs.as_ref(), subagents.as_ref(), &owner);
        if ids.is_empty() && children == 0 {
            continue;
        }
        let mut what = Vec::new();
        if !ids.is_empty() {
            what.push(format!(
                "{} background job(s) ({})",
                ids.len(),
                ids.join(", ")
            ));
        }
        if children > 0 {
            what.push(format!("{children} continuable subagent(s)"));
        }
        return Some(format!(
            "dsh: stopped {} still running after {} s (--wait-background)",
            what.join(" and "),
            cap.as_secs()
        ));
    }
}

/// `usage: <in> input (<hit> cached), <out> output, <n> requests (<m> in subagents), cost $x`.
pub(crate) fn usage_line(root: &Ctx, agent: &Arc<dyn Agent>) -> String {
    let llm = root.get::<dyn Llm>();
    let provider = agent.options().provider.unwrap_or_default();
    let price = |model: Option<&str>| {
        let llm = llm.as_ref()?;
        llm.prepare_call(&CallSettings {
            provider: provider.clone(),
            model: model.map(str::to_owned),
            ..Default::default()
        })
        .ok()?
        .model
        .pricing
    };
    let events = agent.session().events();
    let mut total = UsageTally::default();
    let mut sub_requests = 0u64;
    let mut sub_tally = UsageTally::default();
    let mut requests = 0u64;
    for share in dsh_subagent::session_usage(&events) {
        let pricing = price(share.model.as_deref());
        let mut t = UsageTally::default();
        t.add(&share.usage, pricing.as_ref());
        if share.subagent {
            sub_requests += share.requests;
            sub_tally.merge(&t);
        }
        requests += share.requests;
        total.merge(&t);
    }
    let cost = if total.unpriced > 0 {
        format!("{} (some requests unpriced)", total.cost)
    } else {
        total.cost.to_string()
    };
    format!(
        "dsh: usage: {} input ({} cached), {} output, {} requests ({} in subagents, {} input, {} output); cost {}",
        total.input(),
        total.cache_hit_input,
        total.output,
        requests,
        sub_requests,
        sub_tally.input(),
        sub_tally.output,
        cost
    )
}
