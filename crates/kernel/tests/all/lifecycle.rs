//! Fiber lifecycle: deferred apply, dependency-driven start/stop/restart, teardown order.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, FiberState, Kernel, KernelError, Plugin, PluginRegistry};
use parking_lot::Mutex;

use crate::common::*;

fn kernel() -> Kernel {
    let mut reg = PluginRegistry::new();
    reg.register::<Provider>()
        .register::<Consumer>()
        .register::<Bare>();
    Kernel::new(reg)
}

#[tokio::test]
async fn apply_is_deferred() {
    let k = kernel();
    let log = Log::default();
    let f = k.mount_plugin::<Bare>(ProbeConfig::new("a", &log)).unwrap();
    // Current-thread runtime: nothing ran yet because mount never applies inline.
    assert!(log.snapshot().is_empty());
    assert_eq!(f.state(), FiberState::Pending);
    f.ready().await.unwrap();
    assert_eq!(log.snapshot(), vec!["bare:apply:a"]);
    k.dispose().await;
}

#[tokio::test]
async fn consumer_mounted_before_provider_starts_when_provider_arrives() {
    let k = kernel();
    let log = Log::default();
    let c = k
        .mount_plugin::<Consumer>(ProbeConfig::new("c", &log))
        .unwrap();
    tokio::task::yield_now().await;
    assert_eq!(c.state(), FiberState::Pending);
    let p = k
        .mount_plugin::<Provider>(ProbeConfig::new("hello", &log))
        .unwrap();
    p.ready().await.unwrap();
    c.ready().await.unwrap();
    assert_eq!(
        log.take(),
        vec!["provider:apply:hello", "consumer:apply:hello"]
    );
    k.dispose().await;
}

#[tokio::test]
async fn provider_replacement_restarts_dependents() {
    let k = kernel();
    let log = Log::default();
    let p = k
        .mount("provider", serde_json::json!({"label": "v1"}))
        .unwrap();
    // Configs mounted by name carry no probe: use a typed mount for the logging consumer.
    let c = k
        .mount_plugin::<Consumer>(ProbeConfig::new("c", &log))
        .unwrap();
    c.ready().await.unwrap();
    assert_eq!(log.take(), vec!["consumer:apply:v1"]);

    p.update_config(serde_json::json!({"label": "v2"}))
        .await
        .unwrap();
    // The provider's unload awaited the consumer's.
    assert_eq!(log.take(), vec!["consumer:dispose"]);
    assert_eq!(c.state(), FiberState::Pending);
    c.ready().await.unwrap();
    assert_eq!(log.take(), vec!["consumer:apply:v2"]);
    k.dispose().await;
}

#[tokio::test]
async fn provider_loss_stops_dependents_and_return_starts_them() {
    let k = kernel();
    let log = Log::default();
    let p = k
        .mount_plugin::<Provider>(ProbeConfig::new("one", &log))
        .unwrap();
    let c = k
        .mount_plugin::<Consumer>(ProbeConfig::new("c", &log))
        .unwrap();
    c.ready().await.unwrap();
    p.dispose().await;
    assert_eq!(p.state(), FiberState::Disposed);
    assert_eq!(c.state(), FiberState::Pending);
    assert!(k.root().get::<dyn Greeter>().is_none());

    let p2 = k
        .mount_plugin::<Provider>(ProbeConfig::new("two", &log))
        .unwrap();
    p2.ready().await.unwrap();
    c.ready().await.unwrap();
    assert_eq!(
        log.take(),
        vec![
            "provider:apply:one",
            "consumer:apply:one",
            "consumer:dispose",
            "provider:dispose",
            "provider:apply:two",
            "consumer:apply:two",
        ]
    );
    k.dispose().await;
}

#[tokio::test]
async fn dependents_are_unloaded_before_the_providers_disposers_run() {
    let k = kernel();
    let log = Log::default();
    let p = k
        .mount_plugin::<Provider>(ProbeConfig::new("x", &log))
        .unwrap();
    let c = k
        .mount_plugin::<Consumer>(ProbeConfig::new("c", &log))
        .unwrap();
    c.ready().await.unwrap();
    log.take();
    p.dispose().await;
    // The consumer's async disposer yields five times; it still completes first.
    assert_eq!(log.take(), vec!["consumer:dispose", "provider:dispose"]);
    k.dispose().await;
}

#[tokio::test]
async fn duplicate_provider_is_an_error_naming_both_owners() {
    let mut reg = PluginRegistry::new();
    reg.register::<Provider>().register::<OtherProvider>();
    let k = Kernel::new(reg);
    let a = k
        .mount("provider", serde_json::json!({"label": "a"}))
        .unwrap();
    a.ready().await.unwrap();
    let b = k
        .mount("other-provider", serde_json::json!({"label": "b"}))
        .unwrap();
    let err = b.ready().await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`greeter`"), "{text}");
    assert!(
        text.contains("`provider`") && text.contains("`other-provider`"),
        "{text}"
    );
    assert_eq!(b.state(), FiberState::Failed);
    // The original provider is untouched.
    assert_eq!(k.root().get::<dyn Greeter>().unwrap().greet(), "a");
    k.dispose().await;
}

#[tokio::test]
async fn service_is_invisible_until_its_provider_is_active() {
    struct Slow;
    impl Plugin for Slow {
        const NAME: &'static str = "slow";
        type Config = ProbeConfig;
        async fn apply(ctx: Ctx, config: ProbeConfig) -> Result<(), BoxError> {
            struct G;
            impl Greeter for G {
                fn greet(&self) -> String {
                    "slow".into()
                }
            }
            ctx.provide::<dyn Greeter>(Arc::new(G))?;
            config.log.push(format!(
                "visible-during-apply:{}",
                ctx.get::<dyn Greeter>().is_some()
            ));
            Ok(())
        }
    }
    let k = kernel();
    let log = Log::default();
    let f = k.mount_plugin::<Slow>(ProbeConfig::new("", &log)).unwrap();
    f.ready().await.unwrap();
    assert_eq!(log.take(), vec!["visible-during-apply:false"]);
    assert!(k.root().get::<dyn Greeter>().is_some());
    k.dispose().await;
}

struct Disposers;
impl Plugin for Disposers {
    const NAME: &'static str = "disposers";
    type Config = ProbeConfig;
    async fn apply(ctx: Ctx, config: ProbeConfig) -> Result<(), BoxError> {
        for i in 1..=2 {
            let log = config.log.clone();
            ctx.on_dispose_async(async move {
                log.push(format!("async{i}:start"));
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
                log.push(format!("async{i}:end"));
            })?;
        }
        let log = config.log.clone();
        ctx.on_dispose(move || log.push("sync3"))?;
        ctx.on_dispose(|| panic!("disposer four fails"))?;
        let log = config.log.clone();
        ctx.on_dispose(move || log.push("sync5"))?;
        Ok(())
    }
}

#[tokio::test]
async fn disposers_run_newest_first_one_at_a_time_and_survive_failures() {
    let k = kernel();
    let log = Log::default();
    let f = k
        .mount_plugin::<Disposers>(ProbeConfig::new("", &log))
        .unwrap();
    f.ready().await.unwrap();
    f.dispose().await;
    assert_eq!(
        log.take(),
        vec![
            "sync5",
            "sync3",
            "async2:start",
            "async2:end",
            "async1:start",
            "async1:end"
        ]
    );
    k.dispose().await;
}

struct Tasks;
struct DropFlag(Log, &'static str);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.push(self.1);
    }
}
impl Plugin for Tasks {
    const NAME: &'static str = "tasks";
    type Config = ProbeConfig;
    async fn apply(ctx: Ctx, config: ProbeConfig) -> Result<(), BoxError> {
        let flag = DropFlag(config.log.clone(), "forever-task:dropped");
        ctx.spawn(async move {
            let _flag = flag;
            std::future::pending::<()>().await;
        })?;
        let token = ctx.cancel_token();
        let log = config.log.clone();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        ctx.spawn(async move {
            let _ = tx.send(());
            token.cancelled().await;
            log.push("token-task:saw-cancel");
        })?;
        let log = config.log.clone();
        ctx.on_dispose(move || log.push("disposer"))?;
        rx.await?;
        Ok(())
    }
}

#[tokio::test]
async fn spawned_tasks_are_cancelled_after_disposers_and_awaited() {
    let k = kernel();
    let log = Log::default();
    let f = k.mount_plugin::<Tasks>(ProbeConfig::new("", &log)).unwrap();
    f.ready().await.unwrap();
    assert_eq!(k.stats().tasks, 2);
    f.dispose().await;
    let mut entries = log.take();
    // Disposers first; then both tasks end: the one watching the token finishes by itself, the
    // other is dropped.
    assert_eq!(entries.remove(0), "disposer");
    entries.sort();
    assert_eq!(
        entries,
        vec!["forever-task:dropped", "token-task:saw-cancel"]
    );
    assert_eq!(k.stats().tasks, 0);
    k.dispose().await;
}

#[tokio::test]
async fn registration_after_unload_is_refused() {
    let k = kernel();
    let log = Log::default();
    let slot = Arc::new(Mutex::new(None));
    let mut cfg = ProbeConfig::new("", &log);
    cfg.ctx_out = Some(slot.clone());
    let f = k.mount_plugin::<Bare>(cfg).unwrap();
    f.ready().await.unwrap();
    let ctx = take_ctx(&slot);
    assert!(ctx.is_active());
    f.dispose().await;
    assert!(!ctx.is_active());
    let err = ctx.on_dispose(|| {}).unwrap_err();
    assert!(matches!(err, KernelError::Inactive { .. }), "{err}");
    assert!(err.to_string().contains("bare"), "{err}");
    assert!(ctx.spawn(async {}).is_err());
    assert!(ctx.on::<crate::events::Ping>(|_| Ok(())).is_err());
    k.dispose().await;
}

#[tokio::test]
async fn a_context_of_an_earlier_activation_is_stale_after_restart() {
    let k = kernel();
    let log = Log::default();
    let slot = Arc::new(Mutex::new(None));
    let mut cfg = ProbeConfig::new("", &log);
    cfg.ctx_out = Some(slot.clone());
    let f = k.mount_plugin::<Bare>(cfg).unwrap();
    f.ready().await.unwrap();
    let old = take_ctx(&slot);
    f.restart().await;
    f.ready().await.unwrap();
    let new = take_ctx(&slot);
    assert!(new.is_active());
    let err = old.on_dispose(|| {}).unwrap_err();
    assert!(err.to_string().contains("stale"), "{err}");
    k.dispose().await;
}

#[tokio::test]
async fn failed_apply_undoes_its_registrations_and_reports_the_error() {
    struct Failing;
    impl Plugin for Failing {
        const NAME: &'static str = "failing";
        type Config = ProbeConfig;
        async fn apply(ctx: Ctx, config: ProbeConfig) -> Result<(), BoxError> {
            let log = config.log.clone();
            ctx.on_dispose(move || log.push("undone"))?;
            ctx.on::<crate::events::Ping>(|_| Ok(()))?;
            Err("disk on fire".into())
        }
    }
    let k = kernel();
    let log = Log::default();
    let f = k
        .mount_plugin::<Failing>(ProbeConfig::new("", &log))
        .unwrap();
    let err = f.ready().await.unwrap_err();
    assert!(err.to_string().contains("disk on fire"), "{err}");
    assert_eq!(f.state(), FiberState::Failed);
    assert_eq!(log.take(), vec!["undone"]);
    assert_eq!(k.stats().listeners, 0);
    k.dispose().await;
}

#[tokio::test]
async fn undeclared_dependency_is_an_error() {
    struct Sneaky;
    impl Plugin for Sneaky {
        const NAME: &'static str = "sneaky";
        type Config = ProbeConfig;
        async fn apply(ctx: Ctx, _config: ProbeConfig) -> Result<(), BoxError> {
            ctx.dep::<dyn Greeter>()?;
            Ok(())
        }
    }
    let k = kernel();
    let f = k.mount_plugin::<Sneaky>(ProbeConfig::default()).unwrap();
    let err = f.ready().await.unwrap_err().to_string();
    assert!(
        err.contains("did not declare") && err.contains("greeter"),
        "{err}"
    );
    k.dispose().await;
}

#[tokio::test]
async fn child_plugins_are_disposed_with_their_parent() {
    struct Parent;
    impl Plugin for Parent {
        const NAME: &'static str = "parent";
        type Config = ProbeConfig;
        async fn apply(ctx: Ctx, config: ProbeConfig) -> Result<(), BoxError> {
            ctx.mount_plugin::<Bare>(ProbeConfig::new("child", &config.log))?;
            Ok(())
        }
    }
    let k = kernel();
    let log = Log::default();
    let p = k
        .mount_plugin::<Parent>(ProbeConfig::new("", &log))
        .unwrap();
    p.ready().await.unwrap();
    let tree = k.fibers();
    let child = tree
        .iter()
        .find(|f| f.name == "bare")
        .expect("child fiber listed");
    assert_eq!(child.parent, Some(p.id()));
    assert!(
        tree.iter()
            .any(|f| f.effects.contains(&"plugin:bare".to_owned()))
    );
    p.dispose().await;
    assert!(k.fibers().iter().all(|f| f.name != "bare"));
    k.dispose().await;
}

#[tokio::test]
async fn tree_lists_state_owner_and_effects() {
    let k = kernel();
    let log = Log::default();
    let p = k
        .mount_plugin::<Provider>(ProbeConfig::new("t", &log))
        .unwrap();
    p.ready().await.unwrap();
    let tree = k.fibers();
    let info = tree.iter().find(|f| f.name == "provider").unwrap();
    assert_eq!(info.state, FiberState::Active);
    assert_eq!(info.parent, Some(0));
    assert_eq!(info.effects, vec!["service:greeter", "disposer"]);
    k.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_plugins_leave_nothing_behind() {
    struct Busy;
    impl Plugin for Busy {
        const NAME: &'static str = "busy";
        type Config = ProbeConfig;
        async fn apply(ctx: Ctx, _config: ProbeConfig) -> Result<(), BoxError> {
            ctx.on::<crate::events::Ping>(|_| Ok(()))?;
            ctx.spawn(std::future::pending())?;
            let scope = ctx.scope("s")?;
            scope.ctx().on::<crate::events::Ping>(|_| Ok(()))?;
            ctx.on_dispose(|| {})?;
            Ok(())
        }
    }
    let k = kernel();
    let baseline = k.stats();
    let mut handles = Vec::new();
    for _ in 0..1000 {
        handles.push(k.mount_plugin::<Busy>(ProbeConfig::default()).unwrap());
    }
    for h in &handles {
        h.ready().await.unwrap();
    }
    let loaded = k.stats();
    assert_eq!(loaded.listeners, 2000);
    assert_eq!(loaded.tasks, 1000);
    for h in &handles {
        h.dispose().await;
    }
    assert_eq!(k.stats(), baseline);
    k.dispose().await;
    let end = k.stats();
    assert_eq!(
        (end.listeners, end.tasks, end.services, end.effects),
        (0, 0, 0, 0)
    );
}

#[tokio::test]
async fn kernel_dispose_unloads_newest_first() {
    let k = kernel();
    let log = Log::default();
    let p = k
        .mount_plugin::<Provider>(ProbeConfig::new("p", &log))
        .unwrap();
    let c = k
        .mount_plugin::<Consumer>(ProbeConfig::new("c", &log))
        .unwrap();
    c.ready().await.unwrap();
    log.take();
    k.dispose().await;
    assert_eq!(log.take(), vec!["consumer:dispose", "provider:dispose"]);
    assert_eq!(p.state(), FiberState::Disposed);
    assert_eq!(c.state(), FiberState::Disposed);
}
