//! Composition layers and diffing.

use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_kernel::{
    BoxError, ComposeError, Composer, Composition, Ctx, Kernel, Layer, Plugin, PluginRegistry,
};
use schemars::JsonSchema;
use serde::Deserialize;

static APPLIES: AtomicUsize = AtomicUsize::new(0);
static DISPOSALS: AtomicUsize = AtomicUsize::new(0);

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct EchoConfig {
    #[serde(default)]
    word: String,
    #[serde(default)]
    max_tokens: Option<u32>,
}

/// Counts applies and disposals per process; each test uses its own words to stay independent.
struct Echo;
impl Plugin for Echo {
    const NAME: &'static str = "echo";
    type Config = EchoConfig;
    async fn apply(ctx: Ctx, _config: EchoConfig) -> Result<(), BoxError> {
        APPLIES.fetch_add(1, Ordering::SeqCst);
        ctx.on_dispose(|| {
            DISPOSALS.fetch_add(1, Ordering::SeqCst);
        })?;
        Ok(())
    }
}

struct Other;
impl Plugin for Other {
    const NAME: &'static str = "other";
    type Config = EchoConfig;
    async fn apply(_ctx: Ctx, _config: EchoConfig) -> Result<(), BoxError> {
        Ok(())
    }
}

fn registry() -> PluginRegistry {
    let mut r = PluginRegistry::new();
    r.register::<Echo>().register::<Other>();
    r
}

const PRESET: &str = "
plugins:
  - id: a
    name: echo
    config: { word: alpha }
  - id: b
    name: echo
    config: { word: beta, maxTokens: 10 }
    group: core
  - name: other
";

#[test]
fn layers_replace_rows_by_id_and_disable_removes() {
    let preset = Layer::parse("preset:test", PRESET).unwrap();
    let user = Layer::parse(
        "/home/u/.dsh/dsh.yaml",
        "plugins:\n  - id: b\n    name: echo\n    config: { word: gamma }\n  - id: other\n    name: other\n    disabled: true\n  - id: c\n    name: echo\n",
    )
    .unwrap();
    let c = Composition::compose(&[preset, user], &registry()).unwrap();
    let ids: Vec<&str> = c.rows.iter().map(|r| r.row.id.as_str()).collect();
    assert_eq!(ids, vec!["a", "b", "c"]);
    let b = &c.rows[1];
    assert_eq!(b.source, "/home/u/.dsh/dsh.yaml");
    // The whole config was replaced: maxTokens is gone.
    assert_eq!(b.row.config, serde_json::json!({"word": "gamma"}));
    assert_eq!(c.rows[0].source, "preset:test");
}

#[test]
fn errors_name_the_file_the_row_and_the_field() {
    let bad = Layer::parse(
        "user.yaml",
        "plugins:\n  - id: a\n    name: echo\n    config: { maxTokens: lots }\n",
    )
    .unwrap();
    let err = Composition::compose(&[bad], &registry())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("user.yaml: row `a`: invalid config for plugin `echo`: maxTokens:"),
        "{err}"
    );

    let unknown = Layer::parse("user.yaml", "plugins:\n  - name: ech0\n").unwrap();
    let err = Composition::compose(&[unknown], &registry())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("row `ech0`") && err.contains("known plugins: echo, other"),
        "{err}"
    );

    let syntax = Layer::parse("user.yaml", "plugins:\n  - name: echo\n   config: [\n").unwrap_err();
    assert!(matches!(syntax, ComposeError::Syntax { .. }));
    let text = syntax.to_string();
    assert!(
        text.starts_with("user.yaml: ") && text.contains("line"),
        "{text}"
    );

    let field = Layer::parse("user.yaml", "plugins:\n  - name: echo\n    confg: {}\n").unwrap_err();
    assert!(
        field.to_string().contains("unknown field `confg`"),
        "{field}"
    );

    let dup = Layer::parse("user.yaml", "plugins:\n  - name: echo\n  - name: echo\n").unwrap_err();
    assert_eq!(dup.to_string(), "user.yaml: duplicate row id `echo`");
}

#[test]
fn a_json_layer_reads_as_its_yaml_and_names_its_errors() {
    let yaml = Layer::parse(
        "p",
        "plugins:\n  - name: echo\n    config: {greeting: hi, n: 2}\n  - id: o\n    name: other\n    disabled: true\n",
    )
    .unwrap();
    let json = Layer::parse_json(
        "p",
        r#"{"plugins":[{"name":"echo","config":{"greeting":"hi","n":2}},{"id":"o","name":"other","disabled":true}]}"#,
    )
    .unwrap();
    assert_eq!(json, yaml);
    assert_eq!(json.rows[0].id, "echo", "the id defaults to the name");

    let syntax = Layer::parse_json("preset:x", r#"{"plugins": [}"#).unwrap_err();
    assert!(matches!(syntax, ComposeError::Syntax { .. }));
    assert!(syntax.to_string().starts_with("preset:x: "), "{syntax}");
    let field =
        Layer::parse_json("preset:x", r#"{"plugins":[{"name":"echo","confg":{}}]}"#).unwrap_err();
    assert!(
        field.to_string().contains("unknown field `confg`"),
        "{field}"
    );
    let dup = Layer::parse_json(
        "preset:x",
        r#"{"plugins":[{"name":"echo"},{"name":"echo"}]}"#,
    )
    .unwrap_err();
    assert_eq!(dup.to_string(), "preset:x: duplicate row id `echo`");
}

#[tokio::test]
async fn composer_restarts_only_changed_rows() {
    let k = Kernel::new(registry());
    let mut composer = Composer::new(k.root());
    let first = Composition::compose(&[Layer::parse("p", PRESET).unwrap()], k.registry()).unwrap();
    let report = composer.apply(&first).await.unwrap();
    assert_eq!(report.mounted, vec!["a", "b", "other"]);
    composer.ready().await.unwrap();
    let applies = APPLIES.load(Ordering::SeqCst);
    let disposals = DISPOSALS.load(Ordering::SeqCst);

    // Edit: change b, drop other, keep a.
    let edited = "plugins:\n  - id: a\n    name: echo\n    config: { word: alpha }\n  - id: b\n    name: echo\n    config: { word: delta }\n";
    let second = Composition::compose(&[Layer::parse("p", edited).unwrap()], k.registry()).unwrap();
    let a_before = composer.fiber("a").unwrap().id();
    let report = composer.apply(&second).await.unwrap();
    assert_eq!(report.updated, vec!["b"]);
    assert_eq!(report.removed, vec!["other"]);
    assert!(report.mounted.is_empty());
    composer.ready().await.unwrap();
    assert_eq!(composer.fiber("a").unwrap().id(), a_before);
    // Exactly one restart: b (other is not an echo; only this test mounts echo).
    assert_eq!(APPLIES.load(Ordering::SeqCst), applies + 1);
    assert_eq!(DISPOSALS.load(Ordering::SeqCst), disposals + 1);
    assert_eq!(composer.ids(), ["a", "b"]);

    // An invalid edit is refused before anything is touched: the last good tree stays.
    let invalid = Layer::parse(
        "p",
        "plugins:\n  - id: a\n    name: echo\n    config: { word: 5 }\n",
    )
    .unwrap();
    assert!(Composition::compose(&[invalid], k.registry()).is_err());
    assert_eq!(composer.ids(), ["a", "b"]);
    k.dispose().await;
}

/// A row whose dependency no row provides (the `commands` row disabled under `compact-command`,
/// say) used to keep `ready()` waiting forever: now it returns once nothing else is starting,
/// and the row is named with what it waits for. It still starts when the service appears.
#[tokio::test]
async fn ready_returns_when_a_row_waits_for_a_service_no_row_provides() {
    use crate::common::{Consumer, Provider};
    let mut r = registry();
    r.register::<Consumer>().register::<Provider>();
    let k = Kernel::new(r);
    let mut composer = Composer::new(k.root());
    let rows = "plugins:\n  - id: a\n    name: echo\n  - id: needs-greeter\n    name: consumer\n";
    let c = Composition::compose(&[Layer::parse("p", rows).unwrap()], k.registry()).unwrap();
    composer.apply(&c).await.unwrap();
    // Bounded: before the fix this wait never ended.
    tokio::time::timeout(std::time::Duration::from_secs(30), composer.ready())
        .await
        .expect("ready() returned")
        .unwrap();
    assert_eq!(
        composer.waiting(),
        vec![("needs-greeter".to_owned(), vec!["greeter"])]
    );
    assert_eq!(
        composer.fiber("a").unwrap().state(),
        dsh_kernel::FiberState::Active
    );

    // The provider arrives in a later composition: the waiting row starts, nothing waits.
    let rows = format!("{rows}  - id: greeter\n    name: provider\n");
    let c = Composition::compose(&[Layer::parse("p", &rows).unwrap()], k.registry()).unwrap();
    composer.apply(&c).await.unwrap();
    composer.ready().await.unwrap();
    assert!(composer.waiting().is_empty());
    assert_eq!(
        composer.fiber("needs-greeter").unwrap().state(),
        dsh_kernel::FiberState::Active
    );
    k.dispose().await;
}
