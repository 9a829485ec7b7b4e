//! A kernel with Tools, the fs tools and (optionally) the read-before-write policy.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_kernel::Kernel;
use dsh_kernel::PluginRegistry;
use dsh_tool_fs::{FsToolsPlugin, ReadBeforeWritePlugin};
use dsh_tools::{ToolRequest, ToolResult, ToolTimeoutPlugin, Tools, ToolsPlugin};
use serde_json::Value;

pub struct Env {
    pub _kernel: Kernel,
    pub tools: Arc<dyn Tools>,
    pub dir: tempfile::TempDir,
    pub scratch: tempfile::TempDir,
    pub session: String,
}

pub async fn env_opts(policy: bool) -> Env {
    let kernel = Kernel::new(PluginRegistry::new());
    let mut fibers = vec![
        kernel
            .mount_plugin::<ToolsPlugin>(Default::default())
            .unwrap(),
        kernel
            .mount_plugin::<FsToolsPlugin>(Default::default())
            .unwrap(),
        kernel
            .mount_plugin::<ToolTimeoutPlugin>(Default::default())
            .unwrap(),
    ];
    if policy {
        fibers.push(
            kernel
                .mount_plugin::<ReadBeforeWritePlugin>(Default::default())
                .unwrap(),
        );
    }
    for f in &fibers {
        f.ready().await.unwrap();
    }
    let tools = kernel.root().get::<dyn Tools>().unwrap();
    Env {
        _kernel: kernel,
        tools,
        dir: tempfile::tempdir().unwrap(),
        scratch: tempfile::tempdir().unwrap(),
        session: "sess-fs".into(),
    }
}

pub async fn env() -> Env {
    env_opts(true).await
}

impl Env {
    pub fn cwd(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Create `rel` (and its parents) with `content`.
    pub fn file(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }

    pub async fn call(&self, name: &str, args: Value) -> ToolResult {
        self.call_raw(name, &args.to_string()).await
    }

    pub async fn call_raw(&self, name: &str, args: &str) -> ToolResult {
        let mut req = ToolRequest::new("call_fs", name, args, &self.session, self.cwd());
        req.scratch_dir = Some(self.scratch.path().to_path_buf());
        self.tools.execute(req).await
    }
}

/// `<path>ABS</path>` envelope of `read`.
pub fn envelope(path: &Path, body: &str) -> String {
    format!(
        "<path>{}</path>\n<type>file</type>\n<content>\n{body}\n</content>",
        path.display()
    )
}

/// The spill path named in a footer (`stored at: <path>.`).
pub fn stored_path(text: &str) -> PathBuf {
    let start = text.find("stored at: ").unwrap() + "stored at: ".len();
    let rest = &text[start..];
    let end = rest.find(". Use read").unwrap();
    PathBuf::from(&rest[..end])
}

/// Whether permission bits are enforced for this process (false when running as root).
pub fn permissions_enforced(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let probe = dir.join(".perm-probe");
    std::fs::write(&probe, "x").unwrap();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o000)).unwrap();
    let enforced = std::fs::read(&probe).is_err();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(&probe).unwrap();
    enforced
}
