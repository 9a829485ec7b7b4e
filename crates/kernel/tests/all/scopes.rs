//! Scoped registration, dispatch and disposal.

use dsh_kernel::{Kernel, PluginRegistry, ScopeKey};

use crate::common::Log;
use crate::events::{Ping, Shout};

#[tokio::test]
async fn scoped_dispatch_reaches_global_and_own_listeners_only() {
    let k = Kernel::new(PluginRegistry::new());
    let root = k.root();
    let log = Log::default();
    let a = root.scope("agent-a").unwrap();
    let b = root.scope("agent-b").unwrap();
    assert_eq!(a.ctx().scope_key(), Some(ScopeKey::new("agent-a")));
    for (name, ctx) in [("global", &root), ("a", a.ctx()), ("b", b.ctx())] {
        let l = log.clone();
        ctx.on::<Ping>(move |p| {
            l.push(format!("{name}:{}", p.0));
            Ok(())
        })
        .unwrap();
    }
    a.ctx().emit(&Ping(1));
    b.ctx().emit(&Ping(2));
    root.emit(&Ping(3));
    root.emit_in(Some(&ScopeKey::new("agent-a")), &Ping(4));
    assert_eq!(
        log.take(),
        vec![
            "global:1", "a:1", "global:2", "b:2", "global:3", "global:4", "a:4"
        ]
    );

    // Hooks filter the same way.
    a.ctx()
        .hook::<Shout, _, _>(|i: String, n| async move { n.run(i + "+a").await })
        .unwrap();
    root.hook::<Shout, _, _>(|i: String, n| async move { n.run(i + "+g").await })
        .unwrap();
    let out = a
        .ctx()
        .call::<Shout, _, _>("x".into(), |s| async move { s })
        .await;
    assert_eq!(out, "x+a+g");
    let out = b
        .ctx()
        .call::<Shout, _, _>("x".into(), |s| async move { s })
        .await;
    assert_eq!(out, "x+g");
    k.dispose().await;
}

#[tokio::test]
async fn disposing_a_scope_undoes_its_registrations_only() {
    let k = Kernel::new(PluginRegistry::new());
    let root = k.root();
    let log = Log::default();
    let scope = root.scope("agent").unwrap();
    let l = log.clone();
    scope
        .ctx()
        .on::<Ping>(move |_| {
            l.push("scoped");
            Ok(())
        })
        .unwrap();
    let l = log.clone();
    scope
        .ctx()
        .on_dispose(move || l.push("scope-disposer"))
        .unwrap();
    scope.ctx().spawn(std::future::pending()).unwrap();
    let l = log.clone();
    root.on::<Ping>(move |_| {
        l.push("global");
        Ok(())
    })
    .unwrap();
    assert_eq!(k.stats().tasks, 1);
    scope.dispose().await;
    assert_eq!(log.take(), vec!["scope-disposer"]);
    assert_eq!(k.stats().tasks, 0);
    scope.ctx().emit(&Ping(0));
    assert_eq!(log.take(), vec!["global"]);
    assert!(
        scope.ctx().on::<Ping>(|_| Ok(())).is_err(),
        "a disposed scope refuses registrations"
    );
    // Disposing again is harmless.
    scope.dispose().await;
    k.dispose().await;
}
