//! Dispatch cost: one `Notify` to 10 listeners and one `Hook` through 10 middlewares.
//! Run with `cargo bench -p dsh-kernel`. Budget: each under 2 µs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use dsh_kernel::{Hook, Kernel, Notify, PluginRegistry};

struct Ping(u64);
impl Notify for Ping {
    const NAME: &'static str = "bench/ping";
}

struct Wrap;
impl Hook for Wrap {
    const NAME: &'static str = "bench/wrap";
    type Input = u64;
    type Output = u64;
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let k = Kernel::new(PluginRegistry::new());
        let ctx = k.root();
        let sum = Arc::new(AtomicU64::new(0));
        for _ in 0..10 {
            let s = sum.clone();
            ctx.on::<Ping>(move |p| {
                s.fetch_add(p.0, Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
            ctx.hook::<Wrap, _, _>(|i, next| async move { next.run(i + 1).await + 1 })
                .unwrap();
        }

        const N: u32 = 100_000;
        let mut notify = Vec::new();
        let mut hook = Vec::new();
        for _ in 0..15 {
            let t = Instant::now();
            for i in 0..N {
                ctx.emit(black_box(&Ping(u64::from(i))));
            }
            notify.push(t.elapsed().as_nanos() as f64 / f64::from(N));

            let t = Instant::now();
            for i in 0..N {
                let out = ctx
                    .call::<Wrap, _, _>(u64::from(i), |x| async move { x })
                    .await;
                black_box(out);
            }
            hook.push(t.elapsed().as_nanos() as f64 / f64::from(N));
        }
        println!(
            "notify, 10 listeners:   median {:.0} ns per dispatch",
            median(notify)
        );
        println!(
            "hook, 10 middlewares:   median {:.0} ns per dispatch",
            median(hook)
        );
        black_box(sum.load(Ordering::Relaxed));
        k.dispose().await;
    });
}
