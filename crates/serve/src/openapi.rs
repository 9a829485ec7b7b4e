//! The OpenAPI 3.1 document of the HTTP API, assembled from the protocol's schemars schemas
//! (committed as `docs/openapi.json`). OpenAPI 3.1 uses JSON Schema 2020-12, so the protocol's
//! definitions become `components/schemas` as they are.

use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use crate::app::Health;

fn error_response() -> Value {
    json!({
        "description": "A refusal or a failure: a typed error (see the status table in docs/http-api.md).",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ProtocolError"}}}
    })
}

fn json_response(description: &str, schema: Value) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": schema}}
    })
}

/// The operations a new session's id leads to (OpenAPI links: stateful clients and testers
/// follow them).
fn with_links(mut response: Value) -> Value {
    let link = |op: &str| json!({"operationId": op, "parameters": {"id": "$response.body#/id"}});
    response["links"] = json!({
        "GetSession": link("getSession"),
        "SendOp": link("sendOp"),
        "ListCommands": link("listCommands"),
        "CloseSession": link("closeSession"),
        "ListFiles": link("listFiles"),
    });
    response
}

fn session_id_param() -> Value {
    json!({
        "name": "id", "in": "path", "required": true,
        "description": "The session id.",
        "schema": {"type": "string"}
    })
}

/// One event of the log stream (OpenAPI 3.1 describes a `text/event-stream` by the schema of
/// one event): a record (`id` its seq, `data` its session-format line) or an error.
fn log_event_schema() -> Value {
    json!({
        "type": "object",
        "required": ["data"],
        "properties": {
            "event": {"type": "string", "enum": ["record", "error"]},
            "id": {"type": "string", "pattern": "^[0-9]+$"},
            "data": {"type": "string", "contentMediaType": "application/json",
                     "description": "A record: its JSON line exactly as the session file holds it. An error: a ProtocolError."}
        }
    })
}

/// The document.
pub fn openapi() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    let mut g = settings.into_generator();
    let op = g.subschema_for::<dsh_protocol::Op>().to_value();
    let open = g.subschema_for::<dsh_protocol::OpenSession>().to_value();
    let accepted = g.subschema_for::<dsh_protocol::OpAccepted>().to_value();
    let summary = g.subschema_for::<dsh_protocol::SessionSummary>().to_value();
    let command = g.subschema_for::<dsh_protocol::CommandInfo>().to_value();
    let _error = g.subschema_for::<dsh_protocol::ProtocolError>();
    let event = g.subschema_for::<dsh_protocol::Event>().to_value();
    let health = g.subschema_for::<Health>().to_value();
    let query = g.subschema_for::<dsh_protocol::SessionQuery>().to_value();
    let files_query = g.subschema_for::<crate::files::FilesQuery>().to_value();
    let file_list = g.subschema_for::<crate::files::FileList>().to_value();
    let schemas = g.take_definitions(true);
    let query_params: Vec<Value> = query_properties(&schemas, &query);
    let files_params: Vec<Value> = query_properties(&schemas, &files_query);
    let secured = json!([{"bearer": []}, {}]);
    let errors = error_response();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "dsh serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "dsh sessions over HTTP: the dsh-protocol vocabulary (docs/protocol.md) as JSON, events as Server-Sent Events. See docs/http-api.md."
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "security": secured,
        "paths": {
            "/v1/health": {"get": {
                "operationId": "health",
                "summary": "The server answers (no token needed).",
                "security": [],
                "responses": {"200": json_response("Up.", health), "default": errors}
            }},
            "/openapi.json": {"get": {
                "operationId": "openapi",
                "summary": "This document.",
                "responses": {"200": json_response("The OpenAPI 3.1 document.", json!({"type": "object"})), "default": errors}
            }},
            "/v1/sessions": {
                "get": {
                    "operationId": "listSessions",
                    "summary": "Stored and open sessions, newest first.",
                    "parameters": query_params,
                    "responses": {
                        "200": json_response("The sessions.", json!({"type": "array", "items": summary})),
                        "default": errors
                    }
                },
                "post": {
                    "operationId": "openSession",
                    "summary": "Create (the default when `type` is absent), resume or fork a session.",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": open}}},
                    "responses": {
                        "201": with_links(json_response("The session, open in the server.", summary.clone())),
                        "default": errors
                    }
                }
            },
            "/v1/sessions/{id}": {
                "parameters": [session_id_param()],
                "get": {
                    "operationId": "getSession",
                    "summary": "One session's summary and state.",
                    "responses": {"200": json_response("The session.", summary), "default": errors}
                },
                "delete": {
                    "operationId": "closeSession",
                    "summary": "Close the session in the server: its turn is interrupted, its log flushed.",
                    "responses": {"204": {"description": "Closed."}, "default": errors}
                }
            },
            "/v1/sessions/{id}/ops": {
                "parameters": [session_id_param()],
                "post": {
                    "operationId": "sendOp",
                    "summary": "Send one op to an open session.",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": op}}},
                    "responses": {"202": json_response("Taken; `seq` is the log's last seq when it was.", accepted), "default": errors}
                }
            },
            "/v1/sessions/{id}/commands": {
                "parameters": [session_id_param()],
                "get": {
                    "operationId": "listCommands",
                    "summary": "The session's slash commands.",
                    "responses": {"200": json_response("The commands.", json!({"type": "array", "items": command})), "default": errors}
                }
            },
            "/v1/sessions/{id}/files": {
                "parameters": [session_id_param()],
                "get": {
                    "operationId": "listFiles",
                    "summary": "The files under the session's working directory (for `@` mentions): relative paths, ignored files left out, bounded; `dir` must stay inside the directory (no `..`, no symbolic link out).",
                    "parameters": files_params,
                    "responses": {"200": json_response("The files.", file_list), "default": errors}
                }
            },
            "/v1/sessions/{id}/events": {
                "parameters": [session_id_param()],
                "get": {
                    "operationId": "sessionEvents",
                    "summary": "The session's events as Server-Sent Events: committed events after `after` (or after `Last-Event-ID`, or the last `tailTurns` turns), a snapshot, then live events; or, with `before`, a finite page of earlier events.",
                    "description": "Each SSE event has `event:` = the Event's `type`, `data:` = the Event as JSON (schema `Event`), `id:` = its position (`seq`, or `seq.k` for the k-th further event of one seq; the same in a tail or a page as in a full replay). Comments (`: keep-alive`) every 15 s.",
                    "parameters": [
                        {"name": "after", "in": "query", "required": false,
                         "description": "Only committed events with a greater seq (wins over Last-Event-ID; not with `tailTurns` or `before`).",
                         "schema": {"type": "integer", "format": "uint64", "minimum": 0}},
                        {"name": "tailTurns", "in": "query", "required": false,
                         "description": "Only the committed events of the last N turns (from the `turnStarted` of the first of them; every event when the session has fewer). Last-Event-ID wins over it (a reconnect continues where it was).",
                         "schema": {"type": "integer", "format": "uint32", "minimum": 1, "maximum": 4294967295_u64}},
                        {"name": "before", "in": "query", "required": false,
                         "description": "A page of earlier events: only committed events with a smaller seq (the last `tailTurns` turns of them when given), then the stream ends (no snapshot, no live events).",
                         "schema": {"type": "integer", "format": "uint64", "minimum": 1}},
                        {"name": "Last-Event-ID", "in": "header", "required": false,
                         "description": "Resume right after this event id.",
                         "schema": {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?$"}}
                    ],
                    "responses": {
                        "200": {
                            "description": "The event stream (each `data:` is an `Event`).",
                            "content": {"text/event-stream": {"schema": {"type": "string"}, "x-event-schema": event}}
                        },
                        "default": errors
                    }
                }
            },
            "/v1/sessions/{id}/log": {
                "parameters": [session_id_param()],
                "get": {
                    "operationId": "sessionLog",
                    "summary": "The session's raw log as Server-Sent Events: each committed record after `after` (or after `Last-Event-ID`) as its exact session-format JSON line, then each record as it commits, until the session is closed.",
                    "description": "Each SSE event is `event: record`, `id:` = the record's seq, `data:` = the record's JSON line byte for byte (docs/session-format.md). A record is sent once it is written through to the operating system. A failure sends `event: error` with a `ProtocolError` and ends the stream. A session not open in the server sends its stored records and ends. Comments (`: keep-alive`) every 15 s.",
                    "parameters": [
                        {"name": "after", "in": "query", "required": false,
                         "description": "Only records with a greater seq (wins over Last-Event-ID).",
                         "schema": {"type": "integer", "format": "uint64", "minimum": 0}},
                        {"name": "Last-Event-ID", "in": "header", "required": false,
                         "description": "Resume after this seq.",
                         "schema": {"type": "string", "pattern": "^[0-9]+$"}}
                    ],
                    "responses": {
                        "200": {
                            "description": "The log stream (each `data:` is one session-format record).",
                            "content": {"text/event-stream": {"schema": log_event_schema()}}
                        },
                        "default": errors
                    }
                }
            }
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "A token from `dsh serve token create` (required once any token exists)."}
            }
        }
    })
}

/// The properties of a flat query struct as OpenAPI query parameters.
fn query_properties(schemas: &serde_json::Map<String, Value>, root: &Value) -> Vec<Value> {
    let schema = root
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        .and_then(|name| schemas.get(name))
        .unwrap_or(root);
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, s)| {
            let mut s = s.clone();
            let description = s
                .as_object_mut()
                .and_then(|o| o.remove("description"))
                .unwrap_or(Value::Null);
            // A query parameter is absent or a value, never JSON null.
            if let Some(Value::Array(types)) = s.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    s["type"] = only;
                }
            }
            json!({"name": name, "in": "query", "required": false,
                   "description": description, "schema": s})
        })
        .collect()
}
