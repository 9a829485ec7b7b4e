//! The protocol's JSON Schema (committed as `docs/protocol.schema.json`).

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// The JSON Schema (draft 2020-12) of every protocol type: the roots (`Op`, `Event`,
/// `OpenSession`, `OpAccepted`, `SessionSummary`, `SessionQuery`, `CommandInfo`,
/// `ProtocolError`) and everything they use, under `$defs`.
pub fn protocol_schema() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let roots = [
        generator.subschema_for::<crate::Op>(),
        generator.subschema_for::<crate::Event>(),
        generator.subschema_for::<crate::OpenSession>(),
        generator.subschema_for::<crate::OpAccepted>(),
        generator.subschema_for::<crate::SessionSummary>(),
        generator.subschema_for::<crate::SessionQuery>(),
        generator.subschema_for::<crate::CommandInfo>(),
        generator.subschema_for::<crate::ProtocolError>(),
    ];
    let defs: Map<String, Value> = generator.take_definitions(true);
    let any_of: Vec<Value> = roots.into_iter().map(|s| s.to_value()).collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://dsh.invalid/protocol.schema.json",
        "title": "dsh-protocol",
        "description": "The front-end protocol of dsh: Op in, Event out. See docs/protocol.md.",
        "anyOf": any_of,
        "$defs": defs,
    })
}
