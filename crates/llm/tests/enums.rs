//! Wire round trips of the closed sets: failure codes, reasoning efforts, route capabilities.
//! Unknown spellings (other writers' logs, future providers) are kept verbatim, never defaulted.

use dsh_llm::{
    FailureCode, FinishReason, LlmFailure, ModelInfo, ReasoningEffort, SystemPromptUpdate,
    ToolSpec, ToolUpdate, codes,
};
use serde_json::{Value, json};

#[test]
fn every_known_failure_code_round_trips_through_its_wire_string() {
    assert_eq!(FailureCode::KNOWN.len(), 21);
    for code in FailureCode::KNOWN {
        let wire = serde_json::to_value(code).unwrap();
        assert_eq!(wire, Value::String(code.as_str().to_owned()));
        let back: FailureCode = serde_json::from_value(wire).unwrap();
        assert_eq!(&back, code);
        assert!(
            !matches!(back, FailureCode::Other(_)),
            "{code} parsed as Other"
        );
        assert_eq!(FailureCode::from_wire(code.as_str()), *code);
    }
    assert_eq!(codes::STREAM_CLOSED, FailureCode::StreamClosed);
    assert_eq!(FailureCode::StreamClosed.as_str(), "STREAM_CLOSED");
    assert_eq!(FailureCode::Unknown.as_str(), "UNKNOWN");
}

#[test]
fn unknown_failure_codes_are_kept_and_written_back_verbatim() {
    for wire in [
        "HTTP_302",
        "INSUFFICIENT_SYSTEM_RESOURCE",
        "auth",
        "",
        "X-Y z",
    ] {
        let code: FailureCode = serde_json::from_value(json!(wire)).unwrap();
        assert_eq!(code, FailureCode::Other(wire.to_owned()));
        assert_eq!(serde_json::to_value(&code).unwrap(), json!(wire));
        assert_eq!(code.to_string(), wire);
    }
    // A failure record from another writer keeps its code and every member byte for byte.
    let text = r#"{"message":"m","code":"SOMETHING_NEW","status":599,"requestId":"r"}"#;
    let f: LlmFailure = serde_json::from_str(text).unwrap();
    assert_eq!(f.code, FailureCode::Other("SOMETHING_NEW".into()));
    assert_eq!(serde_json::to_string(&f).unwrap(), text);
    // Inside a finish reason too.
    let reason = json!({"kind":"error","failure":{"message":"m","code":"AUTH"}});
    let r: FinishReason = serde_json::from_value(reason.clone()).unwrap();
    assert_eq!(r.failure().map(|f| &f.code), Some(&FailureCode::Auth));
    assert_eq!(serde_json::to_value(&r).unwrap(), reason);
    // A code is not a string: a number is refused with a clear error.
    let err = serde_json::from_value::<LlmFailure>(json!({"message":"m","code":5})).unwrap_err();
    assert!(err.to_string().contains("invalid type"), "{err}");
}

#[test]
fn efforts_round_trip_and_unknown_ids_stay_other() {
    for e in ReasoningEffort::KNOWN {
        let wire = serde_json::to_value(e).unwrap();
        assert_eq!(wire, json!(e.as_str()));
        assert_eq!(serde_json::from_value::<ReasoningEffort>(wire).unwrap(), *e);
    }
    assert_eq!(
        ReasoningEffort::KNOWN
            .iter()
            .map(ReasoningEffort::as_str)
            .collect::<Vec<_>>(),
        ["off", "low", "high", "max"]
    );
    let x: ReasoningEffort = serde_json::from_value(json!("xhigh")).unwrap();
    assert_eq!(x, ReasoningEffort::Other("xhigh".into()));
    assert_eq!(serde_json::to_value(&x).unwrap(), json!("xhigh"));
    assert_eq!(
        ReasoningEffort::from("High"),
        ReasoningEffort::Other("High".into())
    );
}

#[test]
fn capabilities_round_trip_and_unknown_values_are_refused() {
    assert_eq!(
        serde_json::to_value(SystemPromptUpdate::InHistory).unwrap(),
        json!("in-history")
    );
    for (t, wire) in [
        (ToolUpdate::AdditionOnly, "addition-only"),
        (ToolUpdate::InHistory, "in-history"),
    ] {
        assert_eq!(serde_json::to_value(t).unwrap(), json!(wire));
        assert_eq!(t.as_str(), wire);
        assert_eq!(
            serde_json::from_value::<ToolUpdate>(json!(wire)).unwrap(),
            t
        );
    }
    // A capability the build does not know is not assumed: it is an error, not "absent".
    assert!(serde_json::from_value::<ToolUpdate>(json!("everything")).is_err());
    let info = ModelInfo {
        id: "m".into(),
        context_window: 1,
        default_max_tokens: 1,
        max_output_tokens: None,
        reasoning_efforts: vec![ReasoningEffort::Off, ReasoningEffort::Other("x".into())],
        default_effort: Some(ReasoningEffort::Off),
        input_modalities: vec![],
        system_prompt_update: Some(SystemPromptUpdate::InHistory),
        tool_update: Some(ToolUpdate::AdditionOnly),
        pricing: None,
    };
    let v = serde_json::to_value(&info).unwrap();
    assert_eq!(v["reasoningEfforts"], json!(["off", "x"]));
    assert_eq!(v["systemPromptUpdate"], json!("in-history"));
    assert_eq!(v["toolUpdate"], json!("addition-only"));
    assert_eq!(serde_json::from_value::<ModelInfo>(v).unwrap(), info);
    let bare = ModelInfo {
        system_prompt_update: None,
        tool_update: None,
        ..info
    };
    let v = serde_json::to_value(&bare).unwrap();
    assert!(v.get("systemPromptUpdate").is_none() && v.get("toolUpdate").is_none());
}

#[test]
fn tool_spec_is_the_request_header_shape_byte_for_byte() {
    let text = r#"{"name":"read","description":"Read.","parameters":{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}}"#;
    let spec: ToolSpec = serde_json::from_str(text).unwrap();
    assert_eq!(spec.defer_loading, None);
    assert_eq!(serde_json::to_string(&spec).unwrap(), text);
    let deferred = r#"{"name":"x","description":"","parameters":{},"deferLoading":true}"#;
    let spec: ToolSpec = serde_json::from_str(deferred).unwrap();
    assert_eq!(spec.defer_loading, Some(true));
    assert_eq!(serde_json::to_string(&spec).unwrap(), deferred);
    assert_eq!(
        ToolSpec::new("x", "", json!({})),
        ToolSpec {
            defer_loading: None,
            ..spec
        }
    );
}
