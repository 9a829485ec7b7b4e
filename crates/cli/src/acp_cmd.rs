//! `dsh acp`: dsh as an Agent Client Protocol agent on stdio (`dsh-acp`), over the headless
//! composition (preset, `$DSH_HOME/dsh.yaml`, `--config`, `--patch`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use dsh_kernel::{Composer, Kernel};

use crate::compose::{compose, registry};
use crate::{ComposeArgs, Failure};

/// Options of `dsh acp`.
#[derive(Debug, Args)]
pub(crate) struct AcpArgs {
    /// Model id of new sessions (default: the provider's default model).
    #[arg(long, value_name = "M")]
    pub(crate) model: Option<String>,
    /// Provider route of new sessions.
    #[arg(long, value_name = "P", default_value = "deepseek")]
    pub(crate) provider: String,
    /// Run `bash` in the client's terminal (`terminal/*`) when the client offers one; the
    /// commands then run outside dsh's sandbox.
    #[arg(long)]
    pub(crate) client_terminal: bool,
    /// Keep `read`, `write` and `edit` on the local disk even when the client offers its files
    /// (`fs/read_text_file`, `fs/write_text_file`; used by default).
    #[arg(long)]
    pub(crate) local_fs: bool,
    #[command(flatten)]
    pub(crate) compose: ComposeArgs,
}

/// Runs `dsh acp` on its own runtime, shut down without waiting for a blocked stdin read.
pub(crate) fn main(args: AcpArgs) -> Result<u8, Failure> {
    crate::init_logging();
    let rt = crate::runtime()?;
    let code = rt.block_on(serve(args));
    rt.shutdown_timeout(Duration::from_millis(200));
    code
}

async fn serve(args: AcpArgs) -> Result<u8, Failure> {
    let registry = registry();
    let composition = compose(&args.compose, None, &registry)?;
    let kernel = Kernel::new(registry);
    let composer = Arc::new(tokio::sync::Mutex::new(Composer::new(kernel.root())));
    {
        let mut c = composer.lock().await;
        c.apply(&composition).await.map_err(Failure::usage)?;
        c.ready().await.map_err(Failure::usage)?;
    }
    let options = dsh_acp::AcpOptions {
        provider: Some(args.provider),
        model: args.model,
        version: env!("CARGO_PKG_VERSION").into(),
        client_terminal: args.client_terminal,
        client_fs: !args.local_fs,
    };
    let served = dsh_acp::serve(kernel.root(), options, agent_client_protocol::Stdio::new()).await;
    kernel.dispose().await;
    served.map(|()| 0).map_err(|e| Failure::run(anyhow!(e)))
}
