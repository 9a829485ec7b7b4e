//! Notify, Hook and Parallel dispatch.

use std::sync::Arc;

use dsh_kernel::{Hook, HookOptions, Kernel, KernelError, Notify, Parallel, PluginRegistry};
use parking_lot::Mutex;

use crate::common::Log;

pub struct Ping(pub u32);
impl Notify for Ping {
    const NAME: &'static str = "test/ping";
}

pub struct Shout;
impl Hook for Shout {
    const NAME: &'static str = "test/shout";
    type Input = String;
    type Output = String;
}

pub struct Flush;
impl Parallel for Flush {
    const NAME: &'static str = "test/flush";
}

fn kernel() -> Kernel {
    Kernel::new(PluginRegistry::new())
}

#[tokio::test]
async fn a_failing_or_panicking_listener_does_not_starve_the_others() {
    let k = kernel();
    let ctx = k.root();
    let log = Log::default();
    let l = log.clone();
    ctx.on::<Ping>(move |p| {
        l.push(format!("first:{}", p.0));
        Ok(())
    })
    .unwrap();
    ctx.on::<Ping>(|_| panic!("listener two explodes")).unwrap();
    ctx.on::<Ping>(|_| Err("listener three refuses".into()))
        .unwrap();
    let l = log.clone();
    ctx.on::<Ping>(move |p| {
        l.push(format!("fourth:{}", p.0));
        Ok(())
    })
    .unwrap();
    ctx.emit(&Ping(7));
    ctx.emit(&Ping(8));
    assert_eq!(
        log.take(),
        vec!["first:7", "fourth:7", "first:8", "fourth:8"]
    );
    k.dispose().await;
}

#[tokio::test]
async fn hook_can_veto_enrich_and_mutate() {
    let k = kernel();
    let ctx = k.root();
    // Outermost: enrich the output.
    ctx.hook::<Shout, _, _>(|input, next| async move { format!("<{}>", next.run(input).await) })
        .unwrap();
    // Then: mutate the input.
    ctx.hook::<Shout, _, _>(
        |input: String, next| async move { next.run(input.to_uppercase()).await },
    )
    .unwrap();
    // Then: veto for one input.
    ctx.hook::<Shout, _, _>(|input: String, next| async move {
        if input == "SECRET" {
            "vetoed".to_owned()
        } else {
            next.run(input).await
        }
    })
    .unwrap();
    let terminal_calls = Arc::new(Mutex::new(0));
    let tc = terminal_calls.clone();
    let out = ctx
        .call::<Shout, _, _>("hi".to_owned(), move |s| async move {
            *tc.lock() += 1;
            format!("{s}!")
        })
        .await;
    assert_eq!(out, "<HI!>");
    let tc = terminal_calls.clone();
    let out = ctx
        .call::<Shout, _, _>("secret".to_owned(), move |s| async move {
            *tc.lock() += 1;
            s
        })
        .await;
    assert_eq!(out, "<vetoed>");
    assert_eq!(*terminal_calls.lock(), 1, "the veto skipped the terminal");
    k.dispose().await;
}

#[tokio::test]
async fn prepend_puts_a_hook_outermost() {
    let k = kernel();
    let ctx = k.root();
    ctx.hook::<Shout, _, _>(|i: String, n| async move { n.run(format!("{i}a")).await })
        .unwrap();
    ctx.hook_with::<Shout, _, _>(HookOptions { prepend: true }, |i: String, n| async move {
        n.run(format!("{i}b")).await
    })
    .unwrap();
    let out = ctx
        .call::<Shout, _, _>(String::new(), |s| async move { s })
        .await;
    assert_eq!(out, "ba");
    k.dispose().await;
}

#[tokio::test]
async fn no_listeners_means_the_terminal_runs() {
    let k = kernel();
    let out = k
        .root()
        .call::<Shout, _, _>("x".into(), |s| async move { s + "y" })
        .await;
    assert_eq!(out, "xy");
    k.dispose().await;
}

#[tokio::test]
async fn listeners_added_or_removed_during_a_dispatch_do_not_change_it() {
    let k = kernel();
    let ctx = k.root();
    let log = Log::default();
    let late = Arc::new(Mutex::new(None));
    let (l, c, late2) = (log.clone(), ctx.clone(), late.clone());
    ctx.on::<Ping>(move |p| {
        l.push(format!("adder:{}", p.0));
        if p.0 == 1 {
            let l2 = l.clone();
            c.on::<Ping>(move |p| {
                l2.push(format!("added:{}", p.0));
                Ok(())
            })?;
            // Remove the victim registered below during this dispatch.
            if let Some(reg) = late2.lock().take() {
                dsh_kernel::Registration::dispose(reg);
            }
        }
        Ok(())
    })
    .unwrap();
    let l = log.clone();
    let victim = ctx
        .on::<Ping>(move |p| {
            l.push(format!("victim:{}", p.0));
            Ok(())
        })
        .unwrap();
    *late.lock() = Some(victim);
    ctx.emit(&Ping(1));
    ctx.emit(&Ping(2));
    assert_eq!(
        log.take(),
        vec!["adder:1", "victim:1", "adder:2", "added:2"]
    );

    // The same for hooks: a middleware added during a dispatch is not in that chain.
    let c = ctx.clone();
    ctx.hook::<Shout, _, _>(move |i: String, n| {
        let c = c.clone();
        async move {
            c.hook::<Shout, _, _>(|i: String, n| async move { n.run(i + "+late").await })
                .ok();
            n.run(i + "+first").await
        }
    })
    .unwrap();
    let out = ctx
        .call::<Shout, _, _>("go".into(), |s| async move { s })
        .await;
    assert_eq!(out, "go+first");
    let out = ctx
        .call::<Shout, _, _>("go".into(), |s| async move { s })
        .await;
    assert_eq!(out, "go+first+late");
    k.dispose().await;
}

#[tokio::test]
async fn parallel_listeners_all_run_and_errors_are_aggregated() {
    let k = kernel();
    let ctx = k.root();
    let log = Log::default();
    for i in 0..3 {
        let l = log.clone();
        ctx.on_parallel::<Flush, _, _>(move |_e| {
            let l = l.clone();
            async move {
                tokio::task::yield_now().await;
                l.push(format!("ok{i}"));
                Ok(())
            }
        })
        .unwrap();
    }
    ctx.fire(Arc::new(Flush)).await.unwrap();
    let mut seen = log.take();
    seen.sort();
    assert_eq!(seen, vec!["ok0", "ok1", "ok2"]);

    ctx.on_parallel::<Flush, _, _>(|_e| async { Err("disk full".into()) })
        .unwrap();
    ctx.on_parallel::<Flush, _, _>(|_e| async { panic!("boom") })
        .unwrap();
    let err = ctx.fire(Arc::new(Flush)).await.unwrap_err();
    match &err {
        KernelError::Listeners { event, failures } => {
            assert_eq!(*event, "test/flush");
            assert_eq!(failures.len(), 2);
            assert!(failures.iter().all(|f| f.owner == "root"));
        }
        other => panic!("unexpected {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("disk full") && text.contains("boom"),
        "{text}"
    );
    assert_eq!(log.take().len(), 3, "the healthy listeners still ran");
    k.dispose().await;
}
