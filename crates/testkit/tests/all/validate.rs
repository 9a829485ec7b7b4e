use dsh_testkit::validate::{common_prefix_len, dsh_rule_violations, validate_request};
use dsh_testkit::{Completion, MockServer, Reply};
use serde_json::json;

use crate::common::post;

fn status_and_message(body: serde_json::Value) -> Option<(u16, String)> {
    let reply = validate_request(body.to_string().as_bytes()).err()?;
    let v: serde_json::Value = serde_json::from_slice(&reply.body_bytes()).unwrap();
    Some((
        reply.status_code(),
        v["error"]["message"].as_str().unwrap().to_owned(),
    ))
}

fn call(id: &str) -> serde_json::Value {
    json!({"id": id, "type": "function", "function": {"name": "read", "arguments": "{}"}})
}

#[test]
fn deepseek_rejections_use_the_real_texts() {
    let ok = json!({"model": "deepseek-flash", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "reasoning_content": "r", "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "x"},
        {"role": "tool", "tool_call_id": "b", "content": "y"},
    ], "stream": true, "stream_options": {"include_usage": true},
       "thinking": {"type": "enabled"}, "reasoning_effort": "high"});
    assert_eq!(status_and_message(ok.clone()), None);

    let mut no_reasoning = ok.clone();
    no_reasoning["messages"][1]
        .as_object_mut()
        .unwrap()
        .remove("reasoning_content");
    let (status, msg) = status_and_message(no_reasoning.clone()).unwrap();
    assert_eq!(status, 400);
    assert!(msg.contains("`reasoning_content` in the thinking mode must be passed back"));
    // Thinking disabled: not required.
    no_reasoning["thinking"] = json!({"type": "disabled"});
    no_reasoning
        .as_object_mut()
        .unwrap()
        .remove("reasoning_effort");
    assert_eq!(status_and_message(no_reasoning), None);

    let mut model = ok.clone();
    model["model"] = json!("deepseek-nope");
    assert_eq!(
        status_and_message(model).unwrap(),
        (
            400,
            "The supported API model names are deepseek-flash, deepseek-v4-pro, but you passed \
             deepseek-nope."
                .to_owned()
        )
    );

    let mut effort = ok.clone();
    effort["reasoning_effort"] = json!("extreme");
    let (status, msg) = status_and_message(effort).unwrap();
    assert_eq!(status, 422);
    assert!(
        msg.contains("reasoning_effort: unknown variant `extreme`"),
        "{msg}"
    );

    let mut missing_tool = ok.clone();
    missing_tool["messages"].as_array_mut().unwrap().remove(3);
    let (status, msg) = status_and_message(missing_tool).unwrap();
    assert_eq!(status, 400);
    assert!(msg.contains("insufficient tool messages following tool_calls message"));

    let stray = json!({"model": "deepseek-flash", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "a", "content": "x"}]});
    assert!(
        status_and_message(stray)
            .unwrap()
            .1
            .contains("Messages with role 'tool' must be a response")
    );

    let mut choice = ok.clone();
    choice["tool_choice"] = json!("required");
    assert_eq!(status_and_message(choice).unwrap().0, 400);

    let mut stream_opts = ok.clone();
    stream_opts["stream"] = json!(false);
    assert_eq!(status_and_message(stream_opts).unwrap().0, 400);

    assert_eq!(
        validate_request(b"{not json").unwrap_err().status_code(),
        422
    );
}

#[tokio::test]
async fn server_validation_rejects_without_consuming_the_queue() {
    let server = MockServer::start_with([Completion::new().text("ok").reply()]).await;
    server.validate_requests(true);
    let bad = post(&server.base_url(), r#"{"model":"gpt-4","messages":[]}"#).await;
    assert_eq!(bad.status(), 400);
    assert_eq!(server.remaining(), 1);
    let good = post(
        &server.base_url(),
        r#"{"model":"deepseek-flash","messages":[{"role":"user","content":"hi"}],"stream":true}"#,
    )
    .await;
    assert_eq!(good.status(), 200);
    let reqs = server.wait_for_requests(2).await;
    assert!(!reqs[0].scripted);
    assert_eq!(reqs[0].status, 400);
    assert!(reqs[1].scripted);
}

#[test]
fn dsh_rules_catch_null_content_key_order_and_non_extension() {
    let first = json!({"model": "deepseek-flash", "messages": [{"role": "user", "content": "hi"}],
                       "stream": true, "max_tokens": 100})
    .to_string();
    assert!(dsh_rule_violations(first.as_bytes(), None).is_empty());

    let extended = json!({"model": "deepseek-flash", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "more"}], "stream": true, "max_tokens": 100})
    .to_string();
    assert!(dsh_rule_violations(extended.as_bytes(), Some(first.as_bytes())).is_empty());

    let rewritten = json!({"model": "deepseek-flash", "messages": [
        {"role": "user", "content": "hi!"},
        {"role": "assistant", "content": null}], "stream": true, "max_tokens": 200})
    .to_string();
    let v = dsh_rule_violations(rewritten.as_bytes(), Some(first.as_bytes()));
    assert!(v.iter().any(|s| s.contains("content` is null")), "{v:?}");
    assert!(v.iter().any(|s| s.contains("do not byte-extend")), "{v:?}");
    assert!(
        v.iter()
            .any(|s| s.contains("other than `messages` and `tools` changed")),
        "{v:?}"
    );

    // tools may grow at the end (a late tool), never change in place or move
    let tool = |n: &str| json!({"type": "function", "function": {"name": n, "parameters": {}}});
    let with_tools = |tools: Vec<serde_json::Value>| {
        json!({"model": "deepseek-flash", "messages": [{"role": "user", "content": "hi"}],
               "stream": true, "tools": tools, "max_tokens": 100})
        .to_string()
    };
    let two = with_tools(vec![tool("b"), tool("c")]);
    let appended = with_tools(vec![tool("b"), tool("c"), tool("a")]);
    assert!(dsh_rule_violations(appended.as_bytes(), Some(two.as_bytes())).is_empty());
    let sorted_in = with_tools(vec![tool("a"), tool("b"), tool("c")]);
    let v = dsh_rule_violations(sorted_in.as_bytes(), Some(two.as_bytes()));
    assert!(
        v.iter().any(|s| s.contains("`tools` do not extend")),
        "{v:?}"
    );

    let disordered =
        r#"{"messages":[{"content":"","role":"assistant"}],"model":"deepseek-flash","tools":[]}"#;
    let v = dsh_rule_violations(disordered.as_bytes(), None);
    assert!(
        v.iter().any(|s| s.contains("key `model` out of order")),
        "{v:?}"
    );
    assert!(v.iter().any(|s| s.contains("assistant keys")), "{v:?}");
    assert!(v.iter().any(|s| s.contains("empty `tools`")), "{v:?}");
}

#[tokio::test]
async fn server_reports_rule_violations_and_prefix_hits() {
    let server = MockServer::start().await;
    server.set_responder(|req| Reply::text(200, format!("prefix {}", req.cached_prefix_bytes)));
    let a = r#"{"model":"deepseek-flash","messages":[{"role":"user","content":"hi"}]}"#;
    let b = r#"{"model":"deepseek-flash","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"}]}"#;
    let c = r#"{"model":"deepseek-flash","messages":[{"role":"user","content":"bye"}]}"#;
    let ra = post(&server.base_url(), a).await.text().await.unwrap();
    assert_eq!(ra, "prefix 0");
    let rb = post(&server.base_url(), b).await.text().await.unwrap();
    assert_eq!(rb, format!("prefix {}", a.len() - 2));
    assert_eq!(common_prefix_len(a.as_bytes(), b.as_bytes()), a.len() - 2);
    post(&server.base_url(), c).await;
    let v = server.dsh_rule_violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].starts_with("request #2: messages do not byte-extend"),
        "{v:?}"
    );
}

#[test]
fn common_prefix_len_handles_blocks_and_tails() {
    let a = vec![7u8; 10_000];
    let mut b = a.clone();
    assert_eq!(common_prefix_len(&a, &b), 10_000);
    b[9_000] = 8;
    assert_eq!(common_prefix_len(&a, &b), 9_000);
    b[4_096] = 8;
    assert_eq!(common_prefix_len(&a, &b), 4_096);
    assert_eq!(common_prefix_len(&a[..5], &b), 5);
    assert_eq!(common_prefix_len(b"", &b), 0);
}
