//! The `bash-local` plugin provides the `shell` service through the kernel.

use dsh_bash_local::LocalShellPlugin;
use dsh_kernel::{Kernel, PluginRegistry};
use dsh_shell::{ShellExecutor, ShellRequest};

#[tokio::test]
async fn provides_the_shell_service() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = PluginRegistry::new();
    registry.register::<LocalShellPlugin>();
    let kernel = Kernel::new(registry);
    let fiber = kernel
        .mount(
            "bash-local",
            serde_json::json!({"killGraceMs": 100, "streamCaptureBytes": 4, "scrubEnv": ["X"]}),
        )
        .unwrap();
    fiber.ready().await.unwrap();
    let shell = kernel
        .root()
        .get::<dyn ShellExecutor>()
        .expect("shell service");
    assert_eq!(shell.name(), "local");
    let out = shell
        .run(ShellRequest::new("printf 123456", dir.path()))
        .await
        .unwrap();
    assert_eq!(out.stdout.tail, b"3456", "streamCaptureBytes applied");
    assert!(out.stdout.truncated);
    kernel.dispose().await;
    assert!(kernel.root().get::<dyn ShellExecutor>().is_none());
}

#[tokio::test]
async fn rejects_unknown_config_fields() {
    let mut registry = PluginRegistry::new();
    registry.register::<LocalShellPlugin>();
    let kernel = Kernel::new(registry);
    let err = kernel
        .mount("bash-local", serde_json::json!({"killGrace": 5}))
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("killGrace"), "{err}");
    kernel.dispose().await;
}
