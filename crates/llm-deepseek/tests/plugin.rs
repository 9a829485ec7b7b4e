//! The `deepseek` plugin on a real kernel, streaming through the `llm` service.

use dsh_kernel::{Kernel, PluginRegistry};
use dsh_llm::{BlockAssembler, CallSettings, Llm, LlmPlugin, Message, ReasoningEffort, codes};
use dsh_llm_deepseek::DeepSeekPlugin;
use dsh_testkit::{MockServer, Reply};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::common::fixture;

#[tokio::test]
async fn plugin_registers_route_deepseek_official_and_its_alias_and_streams_through_the_service() {
    let server = MockServer::start().await;
    let mut reg = PluginRegistry::new();
    reg.register::<LlmPlugin>().register::<DeepSeekPlugin>();
    let kernel = Kernel::new(reg);
    kernel.mount("llm", serde_json::json!({})).unwrap();
    let fiber = kernel
        .mount(
            "deepseek",
            serde_json::json!({"baseUrl": server.base_url(), "apiKey": "sk-plugin", "thinking": "disabled"}),
        )
        .unwrap();
    fiber.ready().await.unwrap();
    let root = kernel.root();
    let llm = root.get::<dyn Llm>().unwrap();
    // The original harness's provider id, plus dsh's earlier id as an alias of the same adapter.
    assert_eq!(
        llm.routes(),
        vec!["deepseek".to_owned(), "deepseek-official".to_owned()]
    );
    assert!(std::sync::Arc::ptr_eq(
        &llm.adapter("deepseek").unwrap(),
        &llm.adapter("deepseek-official").unwrap()
    ));

    let call = llm
        .prepare_call(&CallSettings {
            provider: "deepseek".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(call.model.id, "deepseek-flash");
    assert_eq!(call.model.context_window, 1_000_000);
    assert_eq!(
        (
            call.effort.as_ref().map(ReasoningEffort::as_str),
            call.max_tokens
        ),
        (Some("off"), 256_000)
    );
    assert!(call.defaulted.model && call.defaulted.effort && call.defaulted.max_tokens);
    // The deployment lock refuses thinking before any I/O.
    let err = llm
        .prepare_call(&CallSettings {
            provider: "deepseek".into(),
            effort: Some("high".into()),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(err.code, codes::UNSUPPORTED_REASONING_EFFORT);
    // Unknown model ids pass through.
    let other = llm
        .prepare_call(&CallSettings {
            provider: "deepseek".into(),
            model: Some("deepseek-next".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(other.model.id, "deepseek-next");

    server.push(Reply::sse().bytes(fixture("text.sse")));
    let req = call.request(
        vec![Message::user_text("m1", "hi").into()],
        vec![],
        CancellationToken::new(),
    );
    let chunks: Vec<_> = llm.stream(&root, req).await.unwrap().collect().await;
    let mut a = BlockAssembler::new();
    for c in &chunks {
        a.push(c).unwrap();
    }
    let msg = a
        .finish()
        .unwrap()
        .into_message("m2", "deepseek", "deepseek-flash");
    assert_eq!(msg.text(), "Hello! How can I help you today?");
    let sent = server.requests()[0].body_json().unwrap();
    assert_eq!(sent["thinking"], serde_json::json!({"type":"disabled"}));
    assert_eq!(sent["max_tokens"], 256_000);
    assert_eq!(server.requests()[0].bearer(), Some("sk-plugin"));

    // Live config: the next request uses the new settings, without re-registration.
    let before = llm.adapter("deepseek").unwrap();
    let second = MockServer::start().await;
    fiber
        .update_config(serde_json::json!({"baseUrl": second.base_url(), "apiKey": "sk-two"}))
        .await
        .unwrap();
    second.push(Reply::sse().bytes(fixture("text.sse")));
    let call = llm
        .prepare_call(&CallSettings {
            provider: "deepseek".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        call.effort,
        Some(ReasoningEffort::High),
        "the thinking lock was lifted"
    );
    let req = call.request(
        vec![Message::user_text("m1", "hi").into()],
        vec![],
        CancellationToken::new(),
    );
    let _: Vec<_> = llm.stream(&root, req).await.unwrap().collect().await;
    assert_eq!(second.requests()[0].bearer(), Some("sk-two"));
    assert!(std::sync::Arc::ptr_eq(
        &before,
        &llm.adapter("deepseek").unwrap()
    ));

    // An invalid snapshot is refused: URL and key stay those of the last good one.
    fiber
        .update_config(serde_json::json!({"baseUrl": "not a url", "apiKey": "sk-three"}))
        .await
        .unwrap();
    second.push(Reply::sse().bytes(fixture("text.sse")));
    let req = call.request(
        vec![Message::user_text("m1", "hi").into()],
        vec![],
        CancellationToken::new(),
    );
    let _: Vec<_> = llm.stream(&root, req).await.unwrap().collect().await;
    assert_eq!(second.requests()[1].bearer(), Some("sk-two"));
    assert_eq!(server.request_count(), 1);

    fiber.dispose().await;
    assert!(llm.routes().is_empty());
    kernel.dispose().await;
}
