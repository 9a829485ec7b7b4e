//! The routes and their handlers.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::Router;

use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use dsh_protocol::{
    CommandInfo, ErrorCode, Op, OpAccepted, OpenSession, SessionQuery, SessionSummary,
};
use futures::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::error::ApiError;
use crate::events::{Cursor, Positioned, Start, Tail, positioned, tail};

/// `GET /v1/health`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// Always `ok` when the server answers.
    pub status: String,
    /// The server's version.
    pub version: String,
}

/// The router: every route, `extra` (routes of another front end served beside the API, e.g.
/// the web app; without a fallback of its own), the fallbacks with typed bodies, and the guard
/// over all of them.
pub(crate) fn router(state: Arc<AppState>, extra: Router) -> Router {
    Router::new()
        .route("/v1/health", get(health))
        .route("/openapi.json", get(openapi))
        .route("/v1/sessions", get(list_sessions).post(create_session))
        .route("/v1/sessions/{id}", get(get_session).delete(close_session))
        .route("/v1/sessions/{id}/ops", axum::routing::post(send_op))
        .route("/v1/sessions/{id}/commands", get(commands))
        .route("/v1/sessions/{id}/events", get(events))
        .route("/v1/sessions/{id}/log", get(log))
        .route("/v1/sessions/{id}/files", get(files))
        .with_state(state.clone())
        .merge(extra)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state,
            crate::guard::guard,
        ))
}

async fn not_found() -> ApiError {
    ApiError::with_status(
        StatusCode::NOT_FOUND,
        ErrorCode::InvalidRequest,
        "no such route (see /openapi.json)",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::with_status(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::InvalidRequest,
        "this route does not take this method (see /openapi.json)",
    )
}

/// A path parameter, its rejection typed.
pub(crate) struct Id(String);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::invalid(e.body_text()))?;
        Ok(Id(id))
    }
}

/// A query string, its rejection typed.
pub(crate) struct Q<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(q) = Query::<T>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::invalid(e.body_text()))?;
        Ok(Q(q))
    }
}

/// A JSON body: `application/json`, bounded, parsed with typed failures.
pub(crate) struct JsonBody<T>(T);

impl FromRequest<Arc<AppState>> for JsonBody<serde_json::Value> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &Arc<AppState>) -> Result<Self, ApiError> {
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|m| m.trim().eq_ignore_ascii_case("application/json"));
        if json != Some(true) {
            return Err(ApiError::with_status(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::InvalidRequest,
                "the body must be JSON (Content-Type: application/json)",
            ));
        }
        let limit = state.config.max_body;
        let too_large = || {
            ApiError::with_status(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::InvalidRequest,
                format!("the body is larger than {limit} bytes"),
            )
        };
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(too_large());
        }
        let bytes = axum::body::to_bytes(req.into_body(), limit)
            .await
            .map_err(|_| too_large())?;
        let value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::invalid(format!("malformed JSON: {e}")))?;
        Ok(JsonBody(value))
    }
}

fn parse<T: DeserializeOwned>(value: serde_json::Value, what: &str) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(|e| ApiError::invalid(format!("not {what}: {e}")))
}

async fn health() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    })
}

async fn openapi(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    Json(state.openapi.clone())
}

async fn list_sessions(
    State(state): State<Arc<AppState>>,
    Q(query): Q<SessionQuery>,
) -> Result<Json<Vec<SessionSummary>>, ApiError> {
    Ok(Json(state.client.sessions(query).await?))
}

/// A working directory a session may use: absolute and an existing directory of this machine.
fn check_cwd(cwd: Option<&String>) -> Result<(), ApiError> {
    let Some(cwd) = cwd else { return Ok(()) };
    let p = std::path::Path::new(cwd);
    if !p.is_absolute() || !p.is_dir() {
        return Err(ApiError::invalid(format!(
            "cwd `{cwd}` is not an absolute path to a directory of the server's machine"
        )));
    }
    Ok(())
}

async fn create_session(
    State(state): State<Arc<AppState>>,
    JsonBody(mut body): JsonBody<serde_json::Value>,
) -> Result<(StatusCode, Json<SessionSummary>), ApiError> {
    // `type` defaults to `create`.
    if let Some(o) = body.as_object_mut()
        && !o.contains_key("type")
    {
        o.insert("type".into(), "create".into());
    }
    crate::settings::check_session_settings(&body)?;
    let open: OpenSession = parse(body, "an OpenSession")?;
    let options = match &open {
        OpenSession::Create { options, .. }
        | OpenSession::Resume { options, .. }
        | OpenSession::Fork { options, .. } => options,
    };
    check_cwd(options.cwd.as_ref())?;
    let summary = state.client.open(open).await?;
    Ok((StatusCode::CREATED, Json(summary)))
}

async fn get_session(
    State(state): State<Arc<AppState>>,
    Id(id): Id,
) -> Result<Json<SessionSummary>, ApiError> {
    Ok(Json(state.client.session(&id).await?))
}

async fn close_session(
    State(state): State<Arc<AppState>>,
    Id(id): Id,
) -> Result<StatusCode, ApiError> {
    state.client.close(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn send_op(
    State(state): State<Arc<AppState>>,
    Id(id): Id,
    JsonBody(body): JsonBody<serde_json::Value>,
) -> Result<(StatusCode, Json<OpAccepted>), ApiError> {
    let op: Op = parse(body, "an Op")?;
    Ok((
        StatusCode::ACCEPTED,
        Json(state.client.send(&id, op).await?),
    ))
}

/// The files under the session's working directory (`@` mentions; `crate::files`).
async fn files(
    State(state): State<Arc<AppState>>,
    Id(id): Id,
    Q(query): Q<crate::files::FilesQuery>,
) -> Result<Json<crate::files::FileList>, ApiError> {
    let cwd = state.client.session(&id).await?.cwd;
    let listed = tokio::task::spawn_blocking(move || crate::files::list(&cwd, &query))
        .await
        .map_err(|e| {
            ApiError::new(
                ErrorCode::Internal,
                format!("listing the session's files failed: {e}"),
            )
        })??;
    Ok(Json(listed))
}

async fn commands(
    State(state): State<Arc<AppState>>,
    Id(id): Id,
) -> Result<Json<Vec<CommandInfo>>, ApiError> {
    Ok(Json(state.client.commands(&id).await?))
}

/// `?after=SEQ`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct EventsQuery {
    after: Option<u64>,
}

/// The events route's query: `?after=SEQ`, or `?tailTurns=N` (the last N turns), or
/// `?before=SEQ` (a finite page of earlier events, with `tailTurns` its last N turns).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionEventsQuery {
    after: Option<u64>,
    tail_turns: Option<u32>,
    before: Option<u64>,
}

/// Where an event stream starts: a position, or a tail of the history.
enum EventsStart {
    Start(Start),
    Tail(Tail),
}

fn events_start(query: &SessionEventsQuery, headers: &HeaderMap) -> Result<EventsStart, ApiError> {
    if query.after.is_some() && (query.tail_turns.is_some() || query.before.is_some()) {
        return Err(ApiError::invalid(
            "`after` cannot be combined with `tailTurns` or `before` (use one start)",
        ));
    }
    if query.tail_turns == Some(0) {
        return Err(ApiError::invalid(
            "`tailTurns` must be at least 1 (leave it out for every turn)",
        ));
    }
    if query.before == Some(0) {
        return Err(ApiError::invalid(
            "`before` must be at least 1 (no event has a seq below 1)",
        ));
    }
    if query.before.is_some() {
        return Ok(EventsStart::Tail(Tail {
            turns: query.tail_turns,
            before: query.before,
        }));
    }
    if let Some(a) = query.after {
        return Ok(EventsStart::Start(Start::After(Some(a))));
    }
    // A reconnect (`Last-Event-ID`) continues where it was, whatever start the URL names.
    match headers.get("last-event-id") {
        None => Ok(match query.tail_turns {
            Some(n) => EventsStart::Tail(Tail {
                turns: Some(n),
                before: None,
            }),
            None => EventsStart::Start(Start::After(None)),
        }),
        Some(v) => {
            let v = v.to_str().unwrap_or_default();
            match Cursor::parse(v) {
                Some(c) => Ok(EventsStart::Start(Start::At(c))),
                None => Err(ApiError::invalid(format!(
                    "Last-Event-ID `{v}` is not an event id of this server"
                ))),
            }
        }
    }
}

/// The SSE form of one event: `id:` its position, `event:` its type tag, `data:` its JSON.
pub(crate) fn sse_event(p: &Positioned) -> SseEvent {
    let value = serde_json::to_value(&p.event).unwrap_or_default();
    let kind = value
        .get("type")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("event")
        .to_owned();
    let mut ev = SseEvent::default().event(kind).data(value.to_string());
    if let Some(id) = &p.id {
        ev = ev.id(id);
    }
    ev
}

async fn events(
    State(state): State<Arc<AppState>>,
    Id(id): Id,
    Q(query): Q<SessionEventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let stream = match events_start(&query, &headers)? {
        EventsStart::Start(start) => positioned(state.client.clone(), &id, start).await?,
        EventsStart::Tail(t) => tail(state.client.clone(), &id, t).await?,
    };
    let sse: std::pin::Pin<Box<dyn Stream<Item = Result<SseEvent, Infallible>> + Send>> =
        Box::pin(stream.map(|p| Ok(sse_event(&p))));
    let sse = Sse::new(sse).keep_alive(
        KeepAlive::new()
            .interval(state.config.keep_alive)
            .text("keep-alive"),
    );
    let mut response = sse.into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    Ok(response)
}

/// The SSE form of a log stream item: `event: record`, `id:` its seq, `data:` its exact line;
/// or `event: error` with a `ProtocolError` (the stream ends after it).
pub(crate) fn log_event(
    item: Result<dsh_protocol::LogRecord, dsh_protocol::ProtocolError>,
) -> SseEvent {
    match item {
        Ok(r) => SseEvent::default()
            .event("record")
            .id(r.seq.to_string())
            .data(&*r.line),
        Err(e) => SseEvent::default()
            .event("error")
            .data(serde_json::to_string(&e).unwrap_or_default()),
    }
}

async fn log(
    State(state): State<Arc<AppState>>,
    Id(id): Id,
    Q(query): Q<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let after = match query.after {
        Some(a) => Some(a),
        None => match headers.get("last-event-id") {
            None => None,
            Some(v) => {
                let v = v.to_str().unwrap_or_default();
                Some(v.trim().parse::<u64>().map_err(|_| {
                    ApiError::invalid(format!("Last-Event-ID `{v}` is not a log seq"))
                })?)
            }
        },
    };
    let stream = state.client.log(&id, after).await?;
    let sse: std::pin::Pin<Box<dyn Stream<Item = Result<SseEvent, Infallible>> + Send>> =
        Box::pin(stream.map(|item| Ok(log_event(item))));
    let sse = Sse::new(sse).keep_alive(
        KeepAlive::new()
            .interval(state.config.keep_alive)
            .text("keep-alive"),
    );
    let mut response = sse.into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    Ok(response)
}
