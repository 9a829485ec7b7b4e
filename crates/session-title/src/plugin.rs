//! The `session-title` plugin: watches `session/event` for a session's first request, writes the
//! fallback title at once and, with `llm`, runs the title call on a task of its own.

use std::collections::{HashMap, HashSet};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::hooks::{TurnStopping, TurnStoppingInput};
use dsh_kernel::schemars::{self, JsonSchema};
use dsh_kernel::{BoxError, Ctx, Dep, Next, Plugin};
use dsh_llm::service::CallSettings;
use dsh_llm::{
    BlockAssembler, ContentBlock, FinishReason, Llm, Message, MessageSource, ReasoningEffort, Role,
};
use dsh_session::feature::{SessionTitle, TitleRoute, TitleSource};
use dsh_session::wire::SourceKind;
use dsh_session::{CoreEvent, EventKind, NewEvent, PluginEvent, Session, SessionEvent, Sessions};
use futures::StreamExt;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::make::{fallback_title, model_title};

/// The title provider id written in `session/title.source.provider` (the original's).
pub const TITLE_PROVIDER: &str = "session-title-first-prompt-llm";

/// The title call's system prompt (ours; byte-stable).
const SYSTEM: &str = "You name coding sessions. Reply with one plain-text line and nothing else: a \
title of about five words (or ten CJK characters) in the language of the request, saying what \
the session is about. No quotes, no markdown, no final period.";

/// The lead line of the title call's user message.
const LEAD: &str = "Write a title for the session that starts with this request (JSON):";

/// Configuration of `session-title`. Every field is optional.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TitleConfig {
    /// Ask the session's route for a title (one small request, thinking off). Default `false`:
    /// `dsh exec` sends nothing extra; the TUI turns it on.
    #[serde(default)]
    pub llm: Option<bool>,
    /// Bytes of the first prompt sent to the title call (default 4096).
    #[serde(default)]
    pub max_input_bytes: Option<usize>,
    /// Output cap of the title call (default 4096).
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// Time limit of the title call, ms (default 60000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// How long the end of the first turn waits for a title call still running, ms (default
    /// 5000), so a short `exec` run still logs its title; after that the call goes on alone.
    #[serde(default)]
    pub wait_ms: Option<u64>,
}

/// `session/title-llm-request`: the title call as sent (logged before it), so it can be rebuilt
/// from the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitleLlmRequest {
    /// The title provider.
    pub title_provider: String,
    /// The human messages the title is made from.
    pub message_seqs: Vec<u64>,
    /// The route of the call.
    pub route: TitleRoute,
    /// The system prompt.
    pub system: String,
    /// The messages (one user message).
    pub messages: Vec<Message>,
    /// Output cap.
    pub max_tokens: u64,
    /// Effort, when the route has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
}

impl PluginEvent for TitleLlmRequest {
    const TYPE: &'static str = "session/title-llm-request";
}

/// The `session-title` plugin.
#[derive(Debug)]
pub struct SessionTitlePlugin;

/// What a session's title needs: its first human prompt.
struct FirstPrompt {
    seq: u64,
    text: String,
    route: TitleRoute,
}

/// A top-level session without a title whose only human message is the prompt being sent.
fn first_prompt(session: &Session, route: TitleRoute) -> Option<FirstPrompt> {
    session.with_log(|l| {
        if l.header().parent_session.is_some() {
            return None;
        }
        let mut human = None;
        for e in l.events() {
            match e.event_kind() {
                EventKind::SessionTitle | EventKind::SessionTitleLlmRequest => return None,
                EventKind::UserMessage => {
                    let Some(m) = e.message() else { continue };
                    if SourceKind::of(m) != SourceKind::User {
                        continue;
                    }
                    if human.is_some() {
                        return None;
                    }
                    human = Some((e.seq(), m.text()));
                }
                _ => {}
            }
        }
        let (seq, text) = human?;
        Some(FirstPrompt { seq, text, route })
    })
}

struct Titler {
    ctx: Ctx,
    config: TitleConfig,
    sessions: Arc<dyn Sessions>,
    llm: Option<Arc<dyn Llm>>,
    seen: Mutex<HashSet<Arc<str>>>,
    /// Running title calls, by session.
    pending: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
}

impl Titler {
    fn on_event(self: &Arc<Self>, ev: &SessionEvent) -> Result<(), BoxError> {
        let Some(CoreEvent::RequestContext(c)) = ev.event.core() else {
            return Ok(());
        };
        if !self.seen.lock().insert(Arc::clone(&ev.session_id)) {
            return Ok(());
        }
        let Some(session) = self.sessions.get(&ev.session_id) else {
            return Ok(());
        };
        let route = TitleRoute {
            provider: c.provider.clone(),
            model: c.model.clone(),
        };
        let Some(first) = first_prompt(&session, route) else {
            return Ok(());
        };
        if let Some(title) = fallback_title(&first.text) {
            session.append(NewEvent::plugin(&SessionTitle {
                title,
                message_seqs: vec![first.seq],
                source: TitleSource::Fallback,
            })?)?;
        }
        if self.config.llm == Some(true)
            && let Some(llm) = self.llm.clone()
        {
            let me = Arc::clone(self);
            let key = session.id().to_owned();
            let handle = tokio::spawn(async move {
                let limit = Duration::from_millis(me.config.timeout_ms.unwrap_or(60_000));
                let id = session.id().to_owned();
                match tokio::time::timeout(limit, me.ask(&llm, &session, first)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::info!(session = %id, "no model title: {e}"),
                    Err(_) => tracing::info!(session = %id, "no model title: timed out"),
                }
            });
            self.pending.lock().insert(key, handle);
        }
        Ok(())
    }

    /// At the end of a turn: waits (bounded by `waitMs`) for the session's running title call.
    async fn settle(&self, session_id: &str) {
        let handle = self.pending.lock().remove(session_id);
        if let Some(mut handle) = handle {
            let wait = Duration::from_millis(self.config.wait_ms.unwrap_or(5_000));
            if tokio::time::timeout(wait, &mut handle).await.is_err() {
                tracing::debug!(
                    session = session_id,
                    "the title call goes on after the turn"
                );
            }
        }
    }

    /// The title call; appends the provider title on success.
    async fn ask(
        &self,
        llm: &Arc<dyn Llm>,
        session: &Arc<Session>,
        first: FirstPrompt,
    ) -> Result<(), BoxError> {
        let model = llm
            .adapter(&first.route.provider)
            .map(|a| a.resolve_model(&first.route.model));
        let effort = model.as_ref().and_then(|m| {
            m.reasoning_efforts
                .iter()
                .find(|e| **e == ReasoningEffort::Off)
                .or_else(|| m.reasoning_efforts.first())
                .cloned()
        });
        let max_tokens = self.config.max_output_tokens.unwrap_or(4096);
        let prepared = llm.prepare_call(&CallSettings {
            provider: first.route.provider.clone(),
            model: Some(first.route.model.clone()),
            effort: effort.clone(),
            max_tokens: Some(max_tokens),
            temperature: None,
            stop: Vec::new(),
            purpose: Some("session-title".into()),
        })?;
        let input = crate::make::cut(&first.text, self.config.max_input_bytes.unwrap_or(4096));
        let framed =
            serde_json::to_string(&[serde_json::json!({"seq": first.seq, "text": input})])?;
        let user = Message::new(
            dsh_session::ids::message_id(),
            Role::User,
            vec![ContentBlock::text(format!("{LEAD}\n{framed}"))],
            MessageSource::new(SourceKind::SessionTitleLlm.as_str()),
        );
        let system = Message::system(dsh_session::ids::message_id(), SYSTEM);
        session.append(NewEvent::plugin(&TitleLlmRequest {
            title_provider: TITLE_PROVIDER.into(),
            message_seqs: vec![first.seq],
            route: first.route.clone(),
            system: SYSTEM.into(),
            messages: vec![user.clone()],
            max_tokens: prepared.max_tokens,
            reasoning_effort: effort.as_ref().map(|e| e.as_str().to_owned()),
        })?)?;
        let cancel = dsh_kernel::CancellationToken::new();
        let request = prepared.request(vec![Arc::new(system), Arc::new(user)], Vec::new(), cancel);
        let mut stream = pin!(llm.stream(&self.ctx, request).await?);
        let mut assembler = BlockAssembler::new();
        while let Some(chunk) = stream.next().await {
            assembler
                .push(&chunk)
                .map_err(|v| v.to_failure().to_string())?;
            if assembler.is_finished() {
                break;
            }
        }
        let done = assembler.finish().map_err(|v| v.to_failure().to_string())?;
        if !matches!(done.finish, FinishReason::Stop) {
            return Err(format!("the title call ended with {:?}", done.finish).into());
        }
        let text: String = done
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect();
        let Some(title) = model_title(&text) else {
            return Err("the title call answered no text".into());
        };
        session.append(NewEvent::plugin(&SessionTitle {
            title,
            message_seqs: vec![first.seq],
            source: TitleSource::Provider {
                provider: TITLE_PROVIDER.into(),
                model: Some(first.route),
            },
        })?)?;
        Ok(())
    }
}

impl Plugin for SessionTitlePlugin {
    const NAME: &'static str = "session-title";
    type Config = TitleConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Sessions>(), Dep::on::<dyn Llm>()]
    }

    async fn apply(ctx: Ctx, config: TitleConfig) -> Result<(), BoxError> {
        let sessions = ctx.dep::<dyn Sessions>()?;
        let llm = if config.llm == Some(true) {
            Some(ctx.dep::<dyn Llm>()?)
        } else {
            None
        };
        let llm_on = llm.is_some();
        let titler = Arc::new(Titler {
            ctx: ctx.clone(),
            config,
            sessions,
            llm,
            seen: Mutex::new(HashSet::new()),
            pending: Mutex::new(HashMap::new()),
        });
        let t = Arc::clone(&titler);
        ctx.on::<SessionEvent>(move |ev| t.on_event(ev))?;
        if llm_on {
            let t = Arc::clone(&titler);
            ctx.hook::<TurnStopping, _, _>(
                move |input: TurnStoppingInput, next: Next<TurnStopping>| {
                    let t = Arc::clone(&t);
                    async move {
                        let id = input.agent.session().id().to_owned();
                        t.settle(&id).await;
                        next.run(input).await
                    }
                },
            )?;
            ctx.on_dispose(move || {
                for (_, h) in titler.pending.lock().drain() {
                    h.abort();
                }
            })?;
        }
        Ok(())
    }
}
