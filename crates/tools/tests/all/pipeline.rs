//! The execution pipeline: validation, hooks, guards, failures, cancellation, timeouts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use dsh_kernel::ScopeKey;
use dsh_llm::ContentBlock;
use dsh_tools::{
    ApprovalOutcome, Approvals, CallInfo, FnTool, Guard, PostDecision, PreDecision, ToolError,
    ToolErrorCode, ToolOutput, ToolTimeoutPlugin, ToolsExecute, ToolsPostExecute, ToolsPreExecute,
    ToolsResultEvent,
};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::oneshot;

use crate::common::{Env, echo, env, req, text_schema};

#[tokio::test]
async fn success_and_argument_validation() {
    let e = env().await;
    e.tools.register(&e.root, echo("echo", ">")).unwrap();
    let ok = e.tools.execute(req("echo", r#"{"text":"hi"}"#)).await;
    assert!(!ok.is_error);
    assert_eq!(ok.content, vec![ContentBlock::text(">hi")]);
    assert_eq!(ok.value, Some(json!(">hi")));

    let missing = e.tools.execute(req("echo", "")).await;
    assert!(missing.is_error);
    assert_eq!(missing.code(), Some(&ToolErrorCode::InvalidArgs));
    assert_eq!(
        missing.text(),
        "Error: invalid arguments: missing required property \"text\""
    );
    assert_eq!(missing.error.as_ref().unwrap().name, "InvalidArgsError");

    let bad_json = e.tools.execute(req("echo", "{\"text\": ")).await;
    assert_eq!(
        bad_json.text(),
        "Error: invalid arguments: \"arguments\" must be an object"
    );
    let wrong = e.tools.execute(req("echo", r#"{"text":5}"#)).await;
    assert_eq!(
        wrong.text(),
        "Error: invalid arguments: \"text\" must be a string"
    );

    let noargs = Arc::new(FnTool::new(
        "noargs",
        "takes nothing",
        json!({"type":"object","properties":{}}),
        |_, args| async move { Ok(ToolOutput::json(args)) },
    ));
    e.tools.register(&e.root, noargs).unwrap();
    let empty = e.tools.execute(req("noargs", "")).await;
    assert_eq!(empty.text(), "{}");

    let unknown = e.tools.execute(req("nope", "{}")).await;
    assert_eq!(unknown.text(), "Error: unknown tool \"nope\"");
    assert_eq!(unknown.code(), Some(&ToolErrorCode::UnknownTool));
}

#[tokio::test]
async fn body_errors_and_panics_become_results() {
    let e = env().await;
    let failing = Arc::new(FnTool::new("fail", "fails", text_schema(), |_, _| async {
        Err::<ToolOutput, _>(ToolError::new("MY_CODE", "it broke"))
    }));
    let panicking = Arc::new(FnTool::new(
        "boom",
        "panics",
        text_schema(),
        |_, args| async move {
            if args["text"] == "x" {
                panic!("kaboom");
            }
            Ok(ToolOutput::text("fine"))
        },
    ));
    e.tools.register(&e.root, failing).unwrap();
    e.tools.register(&e.root, panicking).unwrap();
    let r = e.tools.execute(req("fail", r#"{"text":"x"}"#)).await;
    assert_eq!(r.text(), "Error: it broke");
    assert_eq!(
        r.error.as_ref().map(|e| (e.name.as_str(), e.code.as_str())),
        Some(("MyCodeError", "MY_CODE"))
    );
    assert!(r.value.is_none());
    let r = e.tools.execute(req("boom", r#"{"text":"x"}"#)).await;
    assert!(r.is_error);
    assert_eq!(r.code(), Some(&ToolErrorCode::ToolFailed));
    assert_eq!(r.text(), "Error: tool \"boom\" panicked: kaboom");
    // The service still works afterwards.
    assert_eq!(
        e.tools.execute(req("boom", r#"{"text":"y"}"#)).await.text(),
        "fine"
    );
}

#[tokio::test]
async fn pre_execute_allow_deny_and_panics() {
    let e = env().await;
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let tool = Arc::new(FnTool::new("t", "counts", text_schema(), move |_, _| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(ToolOutput::text("ran"))
        }
    }));
    e.tools.register(&e.root, tool).unwrap();
    e.root
        .hook::<ToolsPreExecute, _, _>(|call: Arc<CallInfo>, next| async move {
            match call.args["text"].as_str() {
                Some("deny") => PreDecision::Deny {
                    reason: "not today".into(),
                },
                Some("panic") => panic!("listener exploded"),
                _ => next.run(call).await,
            }
        })
        .unwrap();
    let r = e.tools.execute(req("t", r#"{"text":"deny"}"#)).await;
    assert_eq!(r.text(), "Error: not today");
    assert_eq!(r.code(), Some(&ToolErrorCode::ToolDenied));
    let r = e.tools.execute(req("t", r#"{"text":"panic"}"#)).await;
    assert_eq!(r.code(), Some(&ToolErrorCode::ToolFailed));
    assert_eq!(
        r.text(),
        "Error: tools/pre-execute failed: listener exploded"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let r = e.tools.execute(req("t", r#"{"text":"go"}"#)).await;
    assert_eq!(r.text(), "ran");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

struct Approver(ApprovalOutcome);
impl Approvals for Approver {
    fn ask<'a>(
        &'a self,
        _call: &'a CallInfo,
        _reason: Option<&'a str>,
    ) -> BoxFuture<'a, ApprovalOutcome> {
        Box::pin(async move { self.0 })
    }
}

#[tokio::test]
async fn ask_goes_to_the_approval_service_or_is_denied() {
    let e = env().await;
    e.tools.register(&e.root, echo("t", "")).unwrap();
    e.root
        .hook::<ToolsPreExecute, _, _>(|_call, _next| async move {
            PreDecision::Ask {
                reason: Some("writes files".into()),
            }
        })
        .unwrap();
    let r = e.tools.execute(req("t", r#"{"text":"x"}"#)).await;
    assert_eq!(r.code(), Some(&ToolErrorCode::ToolDenied));
    assert_eq!(
        r.text(),
        "Error: tool \"t\" requires approval (writes files), but no approval service is available"
    );

    for (outcome, text) in [
        (ApprovalOutcome::AllowedOnce, "x"),
        (
            ApprovalOutcome::Rejected,
            "Error: the user rejected tool \"t\"; its body was not executed",
        ),
        (
            ApprovalOutcome::Cancelled,
            "Error: approval for tool \"t\" was cancelled; its body was not executed",
        ),
        (
            ApprovalOutcome::Unavailable,
            "Error: approval for tool \"t\" is unavailable; its body was not executed",
        ),
    ] {
        let scope = e.root.scope(format!("{outcome:?}")).unwrap();
        let approvals: Arc<dyn Approvals> = Arc::new(Approver(outcome));
        scope.ctx().provide::<dyn Approvals>(approvals).unwrap();
        let r = e.tools.execute(req("t", r#"{"text":"x"}"#)).await;
        assert_eq!(r.text(), text, "{outcome:?}");
        scope.dispose().await;
    }
}

struct DenyWrites;
impl Guard for DenyWrites {
    fn check<'a>(&'a self, call: &'a CallInfo) -> BoxFuture<'a, Result<(), ToolError>> {
        Box::pin(async move {
            if call.args["text"] == "write" {
                Err(ToolError::new("NO_WRITES", "writes are not allowed here"))
            } else {
                Ok(())
            }
        })
    }
}

#[tokio::test]
async fn guards_deny_within_their_scope() {
    let e = env().await;
    e.tools.register(&e.root, echo("t", "")).unwrap();
    let scope = e.root.scope("guarded").unwrap();
    e.tools.guard(scope.ctx(), Arc::new(DenyWrites)).unwrap();
    let mut r = req("t", r#"{"text":"write"}"#);
    r.scope = Some(ScopeKey::new("guarded"));
    let res = e.tools.execute(r).await;
    assert_eq!(res.text(), "Error: writes are not allowed here");
    assert_eq!(res.code(), Some(&ToolErrorCode::from_wire("NO_WRITES")));
    assert_eq!(
        e.tools
            .execute(req("t", r#"{"text":"write"}"#))
            .await
            .text(),
        "write"
    );
    scope.dispose().await;
}

#[tokio::test]
async fn post_execute_accepts_replaces_and_blocks() {
    let e = env().await;
    let tool = Arc::new(FnTool::new(
        "t",
        "with meta",
        text_schema(),
        |_, args| async move {
            let mut out = ToolOutput::text(args["text"].as_str().unwrap_or_default().to_owned())
                .with_meta(json!({"m": 1}));
            out.contexts.push("from tool".into());
            Ok(out)
        },
    ));
    e.tools.register(&e.root, tool).unwrap();
    e.root
        .hook::<ToolsPostExecute, _, _>(|input: dsh_tools::PostExecuteInput, next| async move {
            let ctx = |v: &str| vec![v.to_owned()];
            match input.result.text().as_str() {
                "content" => PostDecision::Accept {
                    content: Some(vec![ContentBlock::text("replaced")]),
                    value: None,
                    additional_contexts: ctx("from post"),
                },
                "value" => PostDecision::Accept {
                    content: None,
                    value: Some(json!("new value")),
                    additional_contexts: vec![],
                },
                "both" => PostDecision::Accept {
                    content: Some(vec![]),
                    value: Some(json!(1)),
                    additional_contexts: vec![],
                },
                "block" => PostDecision::Block {
                    feedback: "blocked by policy".into(),
                },
                _ => next.run(input).await,
            }
        })
        .unwrap();
    let r = e.tools.execute(req("t", r#"{"text":"content"}"#)).await;
    assert_eq!(r.text(), "replaced");
    assert_eq!(r.value, Some(json!("content")));
    assert_eq!(r.meta, Some(json!({"m": 1})));
    assert_eq!(r.contexts, ["from tool", "from post"]);
    let r = e.tools.execute(req("t", r#"{"text":"value"}"#)).await;
    assert_eq!(
        (r.text().as_str(), r.value.clone()),
        ("new value", Some(json!("new value")))
    );
    let r = e.tools.execute(req("t", r#"{"text":"both"}"#)).await;
    assert_eq!(r.code(), Some(&ToolErrorCode::InvalidToolOutput));
    let r = e.tools.execute(req("t", r#"{"text":"block"}"#)).await;
    assert_eq!(r.text(), "Error: blocked by policy");
    assert_eq!(r.code(), Some(&ToolErrorCode::ToolBlocked));
    assert!(r.value.is_none() && r.contexts.is_empty());
    let r = e.tools.execute(req("t", r#"{"text":"plain"}"#)).await;
    assert_eq!((r.text().as_str(), r.is_error), ("plain", false));
}

#[tokio::test]
async fn tools_result_is_notified_for_every_call() {
    let e = env().await;
    e.tools.register(&e.root, echo("t", "")).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    e.root
        .on::<ToolsResultEvent>(move |ev| {
            sink.lock().push((
                ev.call.name.clone(),
                ev.result.is_error,
                serde_json::Value::clone(&ev.call.args),
            ));
            Ok(())
        })
        .unwrap();
    e.tools.execute(req("t", r#"{"text":"a"}"#)).await;
    e.tools.execute(req("missing", "{}")).await;
    assert_eq!(
        *seen.lock(),
        vec![
            ("t".to_owned(), false, json!({"text":"a"})),
            ("missing".to_owned(), true, json!(null))
        ]
    );
}

/// A tool that signals when it starts, then waits for its token; `text` picks what it returns.
fn waiter(
    started: Arc<Mutex<Option<oneshot::Sender<()>>>>,
    finished: Arc<AtomicBool>,
) -> Arc<FnTool> {
    Arc::new(FnTool::new(
        "wait",
        "waits for cancellation",
        text_schema(),
        move |ctx, args| {
            let started = started.clone();
            let finished = finished.clone();
            async move {
                if let Some(tx) = started.lock().take() {
                    let _ = tx.send(());
                }
                ctx.cancel_token().cancelled().await;
                finished.store(true, Ordering::SeqCst);
                if args["text"] == "specific" {
                    Err(ToolError::new("SPECIFIC", "body failed in its own way"))
                } else {
                    Ok(ToolOutput::text("late success"))
                }
            }
        },
    ))
}

#[tokio::test]
async fn cancellation_before_and_after_dispatch() {
    let e = env().await;
    let (tx, rx) = oneshot::channel();
    let started = Arc::new(Mutex::new(Some(tx)));
    let finished = Arc::new(AtomicBool::new(false));
    e.tools
        .register(&e.root, waiter(started.clone(), finished.clone()))
        .unwrap();

    let r = req("wait", r#"{"text":"x"}"#);
    r.cancel.cancel();
    let res = e.tools.execute(r).await;
    assert_eq!(res.text(), "Error: tool call aborted before dispatch");
    assert_eq!(
        res.error.as_ref().map(|e| e.name.as_str()),
        Some("AbortError")
    );
    assert_eq!(res.code(), Some(&ToolErrorCode::AbortedBeforeDispatch));
    assert!(!finished.load(Ordering::SeqCst));

    let r = req("wait", r#"{"text":"x"}"#);
    let token = r.cancel.clone();
    let running = tokio::spawn(e.tools.execute(r));
    rx.await.unwrap();
    token.cancel();
    let res = running.await.unwrap();
    assert_eq!(res.text(), "Error: tool call aborted");
    assert_eq!(res.code(), Some(&ToolErrorCode::Aborted));
    assert!(finished.load(Ordering::SeqCst), "the body was awaited");

    let (tx, rx) = oneshot::channel();
    *started.lock() = Some(tx);
    let r = req("wait", r#"{"text":"specific"}"#);
    let token = r.cancel.clone();
    let running = tokio::spawn(e.tools.execute(r));
    rx.await.unwrap();
    token.cancel();
    assert_eq!(
        running.await.unwrap().code(),
        Some(&ToolErrorCode::from_wire("SPECIFIC"))
    );
}

#[tokio::test]
async fn timeout_policy_cancels_and_awaits_the_body() {
    let e = env().await;
    let fiber = e
        .kernel
        .mount_plugin::<ToolTimeoutPlugin>(Default::default())
        .unwrap();
    fiber.ready().await.unwrap();
    let finished = Arc::new(AtomicBool::new(false));
    let (tx, _rx) = oneshot::channel();
    let tool = waiter(Arc::new(Mutex::new(Some(tx))), finished.clone());
    let tool = Arc::new(
        Arc::try_unwrap(tool)
            .ok()
            .unwrap()
            .with_timeout(Duration::from_millis(50)),
    );
    e.tools.register(&e.root, tool).unwrap();
    let res = e.tools.execute(req("wait", r#"{"text":"x"}"#)).await;
    assert_eq!(res.text(), "Error: tool call timed out after 50ms");
    let err = res.error.unwrap();
    assert_eq!(
        (err.name.as_str(), err.code),
        ("ToolTimeoutError", ToolErrorCode::ToolTimeout)
    );
    assert!(
        finished.load(Ordering::SeqCst),
        "the body was awaited, not abandoned"
    );
    // A fast tool is unaffected.
    e.tools.register(&e.root, echo("fast", "")).unwrap();
    assert_eq!(
        e.tools
            .execute(req("fast", r#"{"text":"ok"}"#))
            .await
            .text(),
        "ok"
    );
}

#[tokio::test]
async fn execute_wrappers_see_the_call_and_their_panics_are_contained() {
    let e = env().await;
    e.tools.register(&e.root, echo("t", "")).unwrap();
    e.root
        .hook::<ToolsExecute, _, _>(|input: dsh_tools::ExecuteInput, next| async move {
            if input.call.args["text"] == "panic" {
                panic!("wrapper exploded");
            }
            assert_eq!(input.ctx.session_id(), "sess-1");
            assert_eq!(input.ctx.tool_name(), "t");
            let mut out = next.run(input).await?;
            out.contexts.push("from wrapper".into());
            Ok(out)
        })
        .unwrap();
    let r = e.tools.execute(req("t", r#"{"text":"panic"}"#)).await;
    assert_eq!(r.text(), "Error: tools/execute failed: wrapper exploded");
    let r = e.tools.execute(req("t", r#"{"text":"ok"}"#)).await;
    assert_eq!(r.contexts, ["from wrapper"]);
}

fn big_tool(name: &str, size: usize) -> Arc<FnTool> {
    Arc::new(FnTool::new(
        name,
        "big output",
        text_schema(),
        move |_, _| async move {
            let mut s = String::from("HEAD");
            s.push_str(&"x".repeat(size));
            s.push_str("TAIL");
            Ok(ToolOutput::text(s))
        },
    ))
}

#[tokio::test]
async fn oversized_text_results_are_spilled_with_a_preview() {
    let e = env().await;
    let scratch = tempfile::tempdir().unwrap();
    e.tools.register(&e.root, big_tool("big", 60_000)).unwrap();
    e.tools.register(&e.root, big_tool("read", 60_000)).unwrap();
    e.tools.register(&e.root, big_tool("small", 100)).unwrap();
    let call = |name: &str| {
        let mut r = req(name, r#"{"text":"x"}"#);
        r.scratch_dir = Some(scratch.path().to_path_buf());
        e.tools.execute(r)
    };
    let r = call("big").await;
    let text = r.text();
    assert!(text.len() <= 50_000, "{}", text.len());
    assert!(text.starts_with("HEADxxx") && text.ends_with("xxxTAIL"));
    let path = stored_path(&text);
    let path = path.display();
    assert!(text.contains(&format!(
        " bytes. Full formatted result stored at: {path}. Use read with offset/limit, or grep this path to search within it.)"
    )));
    let path = path.to_string();
    assert_eq!(std::fs::read_to_string(path).unwrap().len(), 60_008);
    assert_eq!(
        r.value.as_ref().and_then(|v| v.as_str()).map(str::len),
        Some(60_008)
    );
    // `read` is never spilled (no read → spill → read loop); small results stay inline.
    assert_eq!(call("read").await.text().len(), 60_008);
    assert_eq!(call("small").await.text().len(), 108);

    let off = crate::common::env_with(dsh_tools::ToolsConfig {
        order: vec![],
        max_inline_bytes: Some(0),
    })
    .await;
    off.tools
        .register(&off.root, big_tool("big", 60_000))
        .unwrap();
    assert_eq!(
        off.tools
            .execute(req("big", r#"{"text":"x"}"#))
            .await
            .text()
            .len(),
        60_008
    );
}

/// The path a spilled result's notice names.
fn stored_path(text: &str) -> std::path::PathBuf {
    let start = text.find("Full formatted result stored at: ").unwrap() + 33;
    std::path::PathBuf::from(&text[start..start + text[start..].find(". Use read").unwrap()])
}

#[tokio::test]
async fn without_a_session_dir_spills_go_to_a_private_dir_removed_with_the_service() {
    let e = env().await;
    e.tools.register(&e.root, big_tool("big", 60_000)).unwrap();
    let path = stored_path(&e.tools.execute(req("big", r#"{"text":"x"}"#)).await.text());
    assert_eq!(std::fs::read_to_string(&path).unwrap().len(), 60_008);
    // Not the old shared `$TMPDIR/dsh-scratch/<session id>` keyed only by the id.
    let shared = std::env::temp_dir().join("dsh-scratch");
    assert!(!path.starts_with(&shared), "{}", path.display());
    let private = path.parent().unwrap().parent().unwrap().to_path_buf();
    assert!(
        private
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("dsh-tools-scratch-"),
        "{}",
        private.display()
    );
    let Env { kernel, tools, .. } = e;
    drop(tools);
    kernel.dispose().await;
    drop(kernel);
    assert!(
        !private.exists(),
        "{} outlived the service",
        private.display()
    );
}

#[tokio::test]
async fn session_spill_cap_keeps_an_oversized_result_unsaved_with_a_note() {
    let e = env().await;
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("earlier"), vec![b'x'; 50_000]).unwrap();
    e.tools.register(&e.root, big_tool("big", 60_000)).unwrap();
    let call = |cap: u64| {
        e.tools
            .execute(req("big", r#"{"text":"x"}"#).with_scratch(scratch.path(), Some(cap)))
    };
    // 50,000 + 60,008 > 100,000: not written, preview with a clear note.
    let text = call(100_000).await.text();
    assert!(text.len() <= 50_000, "{}", text.len());
    assert!(text.starts_with("HEADxxx") && text.ends_with("xxxTAIL"));
    assert!(
        text.contains(
            " bytes. The full result was not saved: this session's spill files reached their cap of 100000 bytes.)"
        ),
        "{text}"
    );
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 1);
    // With room, it is saved in the session's directory.
    let path = stored_path(&call(200_000).await.text());
    assert!(path.starts_with(scratch.path()));
}

#[tokio::test]
async fn timeout_default_applies_to_tools_without_a_budget() {
    let e = env().await;
    let fiber = e
        .kernel
        .mount_plugin::<ToolTimeoutPlugin>(dsh_tools::ToolTimeoutConfig {
            default_ms: Some(30),
        })
        .unwrap();
    fiber.ready().await.unwrap();
    let finished = Arc::new(AtomicBool::new(false));
    let (tx, _rx) = oneshot::channel();
    e.tools
        .register(
            &e.root,
            waiter(Arc::new(Mutex::new(Some(tx))), finished.clone()),
        )
        .unwrap();
    let res = e.tools.execute(req("wait", r#"{"text":"x"}"#)).await;
    assert_eq!(res.text(), "Error: tool call timed out after 30ms");
    assert!(finished.load(Ordering::SeqCst));
}

#[test]
fn spill_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    let ctx = dsh_tools::ToolContext::new("call/1", "s", "/").with_scratch_dir(&scratch);
    let (_f, a) = ctx.create_spill_file("out", "txt").unwrap();
    let (_g, b) = ctx.create_spill_file("out", "txt").unwrap();
    assert_ne!(a, b);
    assert_eq!(a.file_name().unwrap(), "out-call_1-0.txt");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&a), 0o600);
    assert_eq!(mode(&scratch), 0o700);
}

#[test]
fn scratch_room_follows_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), vec![b'a'; 600]).unwrap();
    let ctx = dsh_tools::ToolContext::new("c", "s", "/").with_scratch_dir(dir.path());
    assert!(ctx.check_scratch_room(1 << 30).is_ok(), "no cap, no limit");
    let ctx = ctx.with_scratch_cap(Some(1000));
    assert!(ctx.check_scratch_room(400).is_ok());
    let err = ctx.check_scratch_room(401).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::StorageFull);
    assert!(err.to_string().contains("cap of 1000 bytes"), "{err}");
    assert!(
        dsh_tools::ToolContext::new("c", "s", "/")
            .create_spill_file("x", "txt")
            .is_err(),
        "no scratch directory, no spill file"
    );
}

#[tokio::test]
async fn pre_execute_may_rewrite_arguments_which_are_validated_again() {
    let e = env().await;
    e.tools.register(&e.root, echo("echo", ">")).unwrap();
    e.root
        .hook::<ToolsPreExecute, _, _>(|call: Arc<CallInfo>, next| async move {
            match call.args["text"].as_str() {
                Some("swap") => PreDecision::Rewrite {
                    args: json!({"text": "swapped"}),
                },
                Some("break") => PreDecision::Rewrite {
                    args: json!({"other": 1}),
                },
                _ => next.run(call).await,
            }
        })
        .unwrap();
    let r = e.tools.execute(req("echo", r#"{"text":"swap"}"#)).await;
    assert_eq!(r.text(), ">swapped");
    let r = e.tools.execute(req("echo", r#"{"text":"break"}"#)).await;
    assert_eq!(r.code(), Some(&ToolErrorCode::InvalidArgs));
    assert!(
        r.text()
            .starts_with("Error: the arguments rewritten before execution are invalid:"),
        "{}",
        r.text()
    );
}
