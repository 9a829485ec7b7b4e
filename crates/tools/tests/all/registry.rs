//! Registration, scoping, restrictions, schema order and concurrency classification.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin, ScopeKey};
use dsh_tools::ToolErrorCode;
use dsh_tools::{
    Concurrency, FnTool, Tool, ToolFilter, ToolOutput, Tools, ToolsConfig, ToolsError,
};
use serde_json::{Value, json};

use crate::common::{echo, env, env_with, req, text_schema};

#[tokio::test]
async fn schemas_are_sorted_minimal_and_byte_stable() {
    let e = env().await;
    e.tools.register(&e.root, echo("zeta", "")).unwrap();
    e.tools.register(&e.root, echo("alpha", "")).unwrap();
    e.tools.register(&e.root, echo("mid", "")).unwrap();
    let names: Vec<String> = e.tools.schemas(None).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["alpha", "mid", "zeta"]);
    let first = serde_json::to_string(&e.tools.schemas(None)).unwrap();
    let second = serde_json::to_string(&e.tools.schemas(None)).unwrap();
    assert_eq!(first, second);
    let one = serde_json::to_string(&e.tools.schemas(None)[0]).unwrap();
    assert_eq!(
        one,
        r#"{"name":"alpha","description":"Echo (alpha).","parameters":{"type":"object","properties":{"text":{"type":"string","description":"what to echo"}},"required":["text"]}}"#
    );
    e.kernel.dispose().await;
}

#[tokio::test]
async fn configured_order_comes_first() {
    let e = env_with(ToolsConfig {
        order: vec!["zeta".into(), "mid".into()],
        max_inline_bytes: None,
    })
    .await;
    for n in ["alpha", "mid", "zeta", "beta"] {
        e.tools.register(&e.root, echo(n, "")).unwrap();
    }
    let names: Vec<String> = e.tools.schemas(None).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["zeta", "mid", "alpha", "beta"]);
}

#[tokio::test]
async fn bad_registrations_are_refused_with_reasons() {
    let e = env().await;
    let bad_name = Arc::new(FnTool::new("has space", "x", text_schema(), |_, _| async {
        Ok(ToolOutput::text(""))
    }));
    assert!(matches!(
        e.tools.register(&e.root, bad_name),
        Err(ToolsError::InvalidName(_))
    ));
    let bad_schema = Arc::new(FnTool::new(
        "t",
        "x",
        json!({"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}),
        |_, _| async { Ok(ToolOutput::text("")) },
    ));
    let err = e.tools.register(&e.root, bad_schema).unwrap_err();
    assert!(
        matches!(
            &err,
            ToolsError::InvalidSchema {
                source: dsh_tools::schema::SchemaError::UnsupportedKeyword { keyword, .. },
                ..
            } if keyword == "pattern"
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "tool \"t\" has an invalid parameter schema: parameters.properties.a: unsupported schema keyword \"pattern\""
    );
    e.tools.register(&e.root, echo("dup", "")).unwrap();
    let err = e
        .tools
        .register(&e.root, echo("dup", ""))
        .unwrap_err()
        .to_string();
    assert_eq!(err, "tool \"dup\" is already registered globally by `root`");
}

#[tokio::test]
async fn scoped_tools_are_private_shadow_globals_and_die_with_the_scope() {
    let e = env().await;
    e.tools.register(&e.root, echo("say", "global:")).unwrap();
    let scope = e.root.scope("agent-a").unwrap();
    e.tools
        .register(scope.ctx(), echo("say", "scoped:"))
        .unwrap();
    e.tools.register(scope.ctx(), echo("private", "")).unwrap();
    let a = ScopeKey::new("agent-a");
    let b = ScopeKey::new("agent-b");

    let in_a: Vec<String> = e
        .tools
        .schemas(Some(&a))
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(in_a, ["private", "say"]);
    let in_b: Vec<String> = e
        .tools
        .schemas(Some(&b))
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(in_b, ["say"]);
    assert_eq!(e.tools.schemas(None).len(), 1);

    let mut r = req("say", r#"{"text":"hi"}"#);
    r.scope = Some(a.clone());
    assert_eq!(e.tools.execute(r).await.text(), "scoped:hi");
    let mut r = req("say", r#"{"text":"hi"}"#);
    r.scope = Some(b.clone());
    assert_eq!(e.tools.execute(r).await.text(), "global:hi");
    let mut r = req("private", r#"{"text":"hi"}"#);
    r.scope = Some(b);
    assert_eq!(
        e.tools.execute(r).await.code(),
        Some(&ToolErrorCode::UnknownTool)
    );

    scope.dispose().await;
    let in_a: Vec<String> = e
        .tools
        .schemas(Some(&a))
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(in_a, ["say"]);
}

struct Registrar;
impl Plugin for Registrar {
    const NAME: &'static str = "registrar";
    type Config = dsh_kernel::EmptyConfig;
    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>()]
    }
    async fn apply(ctx: Ctx, _config: Self::Config) -> Result<(), BoxError> {
        ctx.dep::<dyn Tools>()?.register(&ctx, echo("owned", ""))?;
        Ok(())
    }
}

#[tokio::test]
async fn a_plugins_tools_are_removed_when_it_unloads() {
    let e = env().await;
    let fiber = e
        .kernel
        .mount_plugin::<Registrar>(Default::default())
        .unwrap();
    fiber.ready().await.unwrap();
    assert_eq!(e.tools.schemas(None).len(), 1);
    fiber.dispose().await;
    assert!(e.tools.schemas(None).is_empty());
    assert!(e.tools.lookup(None, "owned").is_none());
}

#[tokio::test]
async fn allow_and_deny_restrict_per_scope() {
    let e = env().await;
    for n in ["a", "b", "c"] {
        e.tools.register(&e.root, echo(n, "")).unwrap();
    }
    let scope = e.root.scope("agent").unwrap();
    e.tools
        .restrict(scope.ctx(), ToolFilter::allow(["a", "b"]))
        .unwrap();
    e.tools.restrict(&e.root, ToolFilter::deny(["b"])).unwrap();
    let key = ScopeKey::new("agent");
    let names = |s: Option<&ScopeKey>| -> Vec<String> {
        e.tools.schemas(s).into_iter().map(|x| x.name).collect()
    };
    assert_eq!(names(None), ["a", "c"]);
    assert_eq!(names(Some(&key)), ["a"]);
    let mut r = req("c", r#"{"text":"x"}"#);
    r.scope = Some(key.clone());
    let res = e.tools.execute(r).await;
    assert_eq!(res.text(), "Error: unknown tool \"c\"");
    scope.dispose().await;
    assert_eq!(names(Some(&key)), ["a", "c"]);
}

struct Classifier;
impl Tool for Classifier {
    fn name(&self) -> &str {
        "classify"
    }
    fn description(&self) -> &str {
        "parallel when mode is read"
    }
    fn parameters(&self) -> &Value {
        static S: std::sync::LazyLock<Value> = std::sync::LazyLock::new(
            || json!({"type":"object","properties":{"mode":{"type":"string"}},"required":["mode"]}),
        );
        &S
    }
    fn execute<'a>(
        &'a self,
        _ctx: dsh_tools::ToolContext,
        _args: Value,
    ) -> futures::future::BoxFuture<'a, Result<ToolOutput, dsh_tools::ToolError>> {
        Box::pin(async { Ok(ToolOutput::text("ok")) })
    }
    fn concurrency(&self, args: &Value) -> Concurrency {
        match args["mode"].as_str() {
            Some("read") => Concurrency::ParallelSafe,
            Some("panic") => panic!("classifier exploded"),
            _ => Concurrency::Exclusive,
        }
    }
}

#[tokio::test]
async fn concurrency_is_parallel_only_when_the_tool_says_so() {
    let e = env().await;
    e.tools.register(&e.root, Arc::new(Classifier)).unwrap();
    e.tools.register(&e.root, echo("plain", "")).unwrap();
    let c = |name: &str, args: &str| e.tools.concurrency(None, name, args);
    assert_eq!(
        c("classify", r#"{"mode":"read"}"#),
        Concurrency::ParallelSafe
    );
    assert_eq!(c("classify", r#"{"mode":"write"}"#), Concurrency::Exclusive);
    assert_eq!(c("classify", r#"{"mode":"panic"}"#), Concurrency::Exclusive);
    assert_eq!(c("classify", r#"{"mode":1}"#), Concurrency::Exclusive);
    assert_eq!(c("classify", "not json"), Concurrency::Exclusive);
    assert_eq!(c("missing", "{}"), Concurrency::Exclusive);
    // Megabyte arguments are not parsed to classify the call: it runs exclusive.
    let big =
        json!({"mode": "read", "pad": "x".repeat(dsh_tools::service::MAX_CLASSIFIED_ARGUMENTS)});
    assert_eq!(c("classify", &big.to_string()), Concurrency::Exclusive);
    assert_eq!(c("plain", r#"{"text":"x"}"#), Concurrency::Exclusive);
}

/// A tool whose schema is an MCP server's, sent verbatim.
struct Foreign;
impl Tool for Foreign {
    fn name(&self) -> &str {
        "foreign"
    }
    fn description(&self) -> &str {
        "verbatim schema"
    }
    fn parameters(&self) -> &Value {
        static S: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
            json!({"type":"object","$schema":"https://json-schema.org/draft/2020-12/schema",
                   "properties":{"n":{"type":"integer","minimum":1}},"required":["n"]})
        });
        &S
    }
    fn execute<'a>(
        &'a self,
        _ctx: dsh_tools::ToolContext,
        args: Value,
    ) -> futures::future::BoxFuture<'a, Result<ToolOutput, dsh_tools::ToolError>> {
        Box::pin(async move { Ok(ToolOutput::text(args.to_string())) })
    }
    fn foreign_schema(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn foreign_schemas_are_kept_verbatim_and_left_to_their_owner() {
    let e = env().await;
    e.tools.register(&e.root, Arc::new(Foreign)).unwrap();
    let spec = e.tools.schemas(None).remove(0);
    assert_eq!(spec.parameters["properties"]["n"]["minimum"], json!(1));
    // arguments the subset validator would refuse reach the owner, which validates them
    let res = e.tools.execute(req("foreign", r#"{"n":0}"#)).await;
    assert!(!res.is_error, "{}", res.text());
    assert_eq!(res.text(), r#"{"n":0}"#);
    // but a non-object never does
    let res = e.tools.execute(req("foreign", "[1]")).await;
    assert_eq!(res.code(), Some(&ToolErrorCode::InvalidArgs));
    assert_eq!(
        res.text(),
        "Error: invalid arguments: arguments must be a JSON object"
    );
    e.kernel.dispose().await;
}

#[tokio::test]
async fn a_removable_registration_is_withdrawn_on_demand() {
    let e = env().await;
    let reg = e
        .tools
        .register_removable(&e.root, echo("temp", ""))
        .unwrap();
    e.tools.register(&e.root, echo("kept", "")).unwrap();
    assert!(e.tools.lookup(None, "temp").is_some());
    reg.dispose();
    assert!(e.tools.lookup(None, "temp").is_none());
    assert!(e.tools.lookup(None, "kept").is_some());
    // the name is free again
    e.tools.register(&e.root, echo("temp", "")).unwrap();
    e.kernel.dispose().await;
}
