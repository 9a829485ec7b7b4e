//! One run in a warm sandbox (see `warm.rs`): the executor's side of the supervisor protocol.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::pin::pin;
use std::process::ExitStatus;
use std::time::Duration;

use dsh_shell::supervisor::{FromSupervisor, ToSupervisor};
use dsh_shell::{CapturedStream, InvalidRequest, ShellError, ShellOutcome, ShellRequest};
use rustix::pipe::{PipeFlags, pipe_with};
use tokio::net::unix::pipe::Receiver;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::executor::{KILL_WAIT, LocalShell, read_pipe, termination};
use crate::warm::Warm;

/// How a warm run went.
pub(crate) enum WarmRun {
    /// It ran (or the command could not be spawned): this is the run's result.
    Done(Box<Result<ShellOutcome, ShellError>>),
    /// The sandbox did not take the command (nothing ran): run it cold.
    Lost,
}

/// The raw wait status of a process killed by SIGKILL (used when the supervisor vanished
/// before reporting the main process).
const KILLED: i32 = 9;

enum Ending {
    Exited(i32),
    TimedOut,
    Cancelled,
    /// The supervisor went away mid-run (it was killed from inside): under bwrap its namespace,
    /// and every process of the run, went with it.
    Lost,
}

/// Cancels the output readers if the run is abandoned (its future dropped). The sandbox is
/// dropped with the future too: its socket closes and the supervisor kills what is left.
struct StopGuard(CancellationToken);

impl Drop for StopGuard {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

fn pipes() -> std::io::Result<(OwnedFd, OwnedFd)> {
    pipe_with(PipeFlags::CLOEXEC).map_err(|e| std::io::Error::from_raw_os_error(e.raw_os_error()))
}

impl LocalShell {
    /// Runs the encoded `run` message in `warm`; gives the sandbox back to the pool when the
    /// run ended cleanly.
    pub(crate) async fn run_warm(
        &self,
        warm: Warm,
        run: &[u8],
        request: &ShellRequest,
        timeout: Duration,
    ) -> WarmRun {
        let process_error =
            |context, source| WarmRun::Done(Box::new(Err(ShellError::Process { context, source })));
        let (out_r, out_w) = match pipes() {
            Ok(p) => p,
            Err(e) => return process_error("creating the output pipes", e),
        };
        let (err_r, err_w) = match pipes() {
            Ok(p) => p,
            Err(e) => return process_error("creating the output pipes", e),
        };
        let null = match std::fs::File::open("/dev/null") {
            Ok(f) => OwnedFd::from(f),
            Err(e) => return process_error("opening /dev/null", e),
        };
        if let Err(error) = warm.send(run, &[&null, &out_w, &err_w]).await {
            tracing::debug!(%error, "the warm sandbox did not take the command");
            return WarmRun::Lost;
        }
        // Only the command holds the write ends now: the pipes close when it (and whatever
        // it left behind) is gone.
        drop((null, out_w, err_w));
        let started = Instant::now();
        let started_pid = match warm.recv().await {
            Ok(Some(FromSupervisor::Started { pid })) => Some(pid),
            Ok(Some(FromSupervisor::SpawnFailed { errno, message })) => {
                tracing::debug!(errno, %message, "the warm sandbox could not spawn the command");
                self.pool.give(warm);
                let error = if errno == rustix::io::Errno::TOOBIG.raw_os_error() {
                    ShellError::InvalidRequest(InvalidRequest::TooLong {
                        bytes: request.command.len(),
                    })
                } else {
                    ShellError::Spawn {
                        program: self.options.program.display().to_string(),
                        source: std::io::Error::from_raw_os_error(errno),
                    }
                };
                return WarmRun::Done(Box::new(Err(error)));
            }
            other => {
                // The command may have started (and killed its supervisor at once): never run
                // it a second time; report the run as killed.
                tracing::warn!(?other, "the warm sandbox went away as the command started");
                None
            }
        };
        let (stdout, stderr) = match (
            Receiver::from_owned_fd(out_r),
            Receiver::from_owned_fd(err_r),
        ) {
            (Ok(o), Ok(e)) => (o, e),
            (Err(e), _) | (_, Err(e)) => {
                // The command runs but we cannot read it: end it (dropping the sandbox kills
                // everything in it) and report.
                return process_error("reading the output pipes", e);
            }
        };
        let stop = CancellationToken::new();
        let _guard = StopGuard(stop.clone());
        let (out_target, err_target) = self.spill_targets(request);
        let cap = self.options.stream_capture_bytes;
        let stdout = tokio::spawn(read_pipe(Some(stdout), cap, out_target, stop.clone()));
        let stderr = tokio::spawn(read_pipe(Some(stderr), cap, err_target, stop.clone()));
        let mut readers = pin!(futures::future::join(stdout, stderr));
        tracing::debug!(pid = ?started_pid, cwd = %request.cwd.display(), "bash started in a warm sandbox");

        let deadline = started + timeout;
        let pid = started_pid.unwrap_or(0);
        let ending = if started_pid.is_none() {
            Ending::Lost
        } else {
            tokio::select! {
            biased;
            () = request.cancel.cancelled() => Ending::Cancelled,
            msg = warm.recv() => match msg {
                Ok(Some(FromSupervisor::Exited { status })) => Ending::Exited(status),
                other => {
                    tracing::warn!(?other, pid, "the warm sandbox went away during the run");
                    Ending::Lost
                }
            },
            () = tokio::time::sleep_until(deadline) => Ending::TimedOut,
            }
        };
        let grace = self.options.kill_grace;
        let mut status = None;
        let mut collected = None;
        let (timed_out, cancelled) = match ending {
            Ending::Exited(raw) => {
                status = Some(raw);
                // Background processes may still hold the pipes: give them the drain window.
                collected = tokio::time::timeout(self.options.drain_window, &mut readers)
                    .await
                    .ok();
                (false, false)
            }
            Ending::TimedOut => (true, false),
            Ending::Cancelled => (false, true),
            Ending::Lost => (false, false),
        };
        // End the run: whatever is left gets SIGTERM, the grace, then SIGKILL.
        let reusable = if matches!(ending, Ending::Lost) {
            false
        } else {
            let (raw, clean) = reset(&warm, grace).await;
            status = status.or(raw);
            clean
        };
        let collected = match collected {
            Some(done) => Ok(done),
            None => tokio::time::timeout(KILL_WAIT, &mut readers).await,
        };
        let (stdout, stderr) = match collected {
            Ok(done) => done,
            Err(_) => {
                tracing::warn!(
                    pid,
                    "output pipes still open; keeping the output read so far"
                );
                stop.cancel();
                readers.await
            }
        };
        if reusable {
            self.pool.give(warm);
        }
        let stream = |r: Result<CapturedStream, tokio::task::JoinError>, name: &str| {
            r.unwrap_or_else(|error| {
                tracing::warn!(%error, "{name} reader failed");
                CapturedStream::default()
            })
        };
        let outcome = ShellOutcome {
            stdout: stream(stdout, "stdout"),
            stderr: stream(stderr, "stderr"),
            termination: termination(ExitStatus::from_raw(status.unwrap_or(KILLED))),
            timed_out,
            cancelled,
            timeout,
            elapsed: started.elapsed(),
            pid,
        };
        tracing::debug!(pid, termination = %outcome.termination, timed_out, cancelled, "bash finished (warm)");
        WarmRun::Done(Box::new(Ok(outcome)))
    }
}

/// Sends `Reset` and waits for `ResetDone`: returns the main process's raw status if it was
/// reported meanwhile, and whether the sandbox is clean (reusable).
async fn reset(warm: &Warm, grace: Duration) -> (Option<i32>, bool) {
    let message = ToSupervisor::Reset { grace }.encode();
    if let Err(error) = warm.send(&message, &[]).await {
        tracing::warn!(%error, "the warm sandbox did not take the reset");
        return (None, false);
    }
    let mut status = None;
    let wait = async {
        loop {
            match warm.recv().await {
                Ok(Some(FromSupervisor::Exited { status: raw })) => status = Some(raw),
                Ok(Some(FromSupervisor::ResetDone { leftovers })) => {
                    if leftovers > 0 {
                        tracing::debug!(leftovers, "terminated what the run left behind");
                    }
                    return true;
                }
                other => {
                    tracing::warn!(?other, "the warm sandbox failed its reset");
                    return false;
                }
            }
        }
    };
    let clean = tokio::time::timeout(grace + KILL_WAIT, wait)
        .await
        .unwrap_or_else(|_| {
            tracing::warn!("the warm sandbox did not finish its reset in time; dropping it");
            false
        });
    (status, clean)
}
