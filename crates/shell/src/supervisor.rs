//! The wire protocol between an executor and a **warm sandbox supervisor**.
//!
//! Starting a confinement (a bubblewrap namespace set, a Landlock launcher) costs several
//! milliseconds per command. An executor may instead start a supervisor once inside the
//! confinement and hand it one command at a time over a `SOCK_SEQPACKET` socket: the supervisor
//! spawns the command with the call's program, arguments, working directory and environment,
//! on the three descriptors (stdin, stdout, stderr) passed with the request (`SCM_RIGHTS`),
//! reports its exit, and after each call kills every process the call left behind (it is the
//! child subreaper of everything it started), so the next call starts clean.
//!
//! This module is only the vocabulary and its byte encoding (no I/O): one datagram per
//! message, a tag byte, then fixed-width little-endian integers and length-prefixed byte
//! strings. Byte strings, not UTF-8, because paths and environment variables are `OsString`s.
//!
//! A conversation: the supervisor sends [`FromSupervisor::Ready`] once; then per call the
//! executor sends [`ToSupervisor::Run`] (with the descriptors), receives
//! [`FromSupervisor::Started`] (or [`FromSupervisor::SpawnFailed`]) and later
//! [`FromSupervisor::Exited`]; it ends the call — after the exit, or at once on a deadline or a
//! cancellation — with [`ToSupervisor::Reset`], answered by an `Exited` if the main process had
//! not been reported yet and then [`FromSupervisor::ResetDone`] once no process of the call is
//! left. End of file on the socket makes the supervisor kill what is left and
//! exit.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::time::Duration;

/// Largest request an executor sends through the socket. Bigger ones (a command near the
/// 128 KiB argument limit) run on the cold path instead: a `SOCK_SEQPACKET` datagram must fit
/// the socket's send buffer (about 208 KiB by default on Linux, less on some hosts).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// Largest message a supervisor sends (error texts are cut to fit).
pub const MAX_REPLY_BYTES: usize = 4 * 1024;

/// How many descriptors travel with a [`ToSupervisor::Run`]: stdin, stdout, stderr.
pub const RUN_FDS: usize = 3;

/// One command for the supervisor to spawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSpec {
    /// The program (a path: the executor resolves it in the command's `PATH`).
    pub program: PathBuf,
    /// Its arguments (without `argv[0]`).
    pub args: Vec<OsString>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The complete environment (the supervisor's own is not inherited).
    pub env: Vec<(OsString, OsString)>,
}

/// Executor → supervisor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToSupervisor {
    /// Spawn this command (in its own process group) on the three passed descriptors.
    Run(RunSpec),
    /// End the call: SIGTERM to what is left, up to `grace` for it to exit, then SIGKILL until
    /// no process of the call remains.
    Reset {
        /// Time between SIGTERM and SIGKILL (zero: SIGKILL at once).
        grace: Duration,
    },
}

/// Supervisor → executor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FromSupervisor {
    /// The supervisor runs and waits for commands.
    Ready,
    /// The command was spawned; its process id as seen inside the confinement.
    Started {
        /// The process id.
        pid: u32,
    },
    /// The command could not be spawned (nothing runs).
    SpawnFailed {
        /// The OS error number (`E2BIG`, `ENOENT`, ...), 0 when there is none.
        errno: i32,
        /// What failed.
        message: String,
    },
    /// The command's main process ended with this raw wait status.
    Exited {
        /// The `waitpid` status word (`ExitStatus::from_raw`).
        status: i32,
    },
    /// No process of the call is left; the supervisor takes the next command.
    ResetDone {
        /// How many processes were still running when the reset began.
        leftovers: u32,
    },
}

/// A message that cannot be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The message ended inside a field.
    #[error("truncated supervisor message")]
    Truncated,
    /// An unknown tag byte.
    #[error("unknown supervisor message tag {0}")]
    UnknownTag(u8),
    /// Bytes left over after the last field.
    #[error("{0} trailing bytes after a supervisor message")]
    Trailing(usize),
    /// A text field that is not UTF-8.
    #[error("a supervisor message text is not UTF-8")]
    NotUtf8,
}

const RUN: u8 = 1;
const RESET: u8 = 3;
const READY: u8 = 101;
const STARTED: u8 = 102;
const SPAWN_FAILED: u8 = 103;
const EXITED: u8 = 104;
const RESET_DONE: u8 = 105;

struct Writer(Vec<u8>);

impl Writer {
    fn tag(tag: u8) -> Self {
        Self(vec![tag])
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        // Lengths beyond u32 cannot occur: messages are capped far below.
        self.u32(u32::try_from(b.len()).unwrap_or(u32::MAX));
        self.0.extend_from_slice(b);
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn os(&mut self) -> Result<OsString, DecodeError> {
        Ok(OsString::from_vec(self.bytes()?.to_vec()))
    }
    fn text(&mut self) -> Result<String, DecodeError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| DecodeError::NotUtf8)
    }
    fn end(self) -> Result<(), DecodeError> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl ToSupervisor {
    /// The datagram for this message.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            ToSupervisor::Run(spec) => {
                let mut w = Writer::tag(RUN);
                w.bytes(spec.program.as_os_str().as_bytes());
                w.u32(count(spec.args.len()));
                for arg in &spec.args {
                    w.bytes(arg.as_bytes());
                }
                w.bytes(spec.cwd.as_os_str().as_bytes());
                w.u32(count(spec.env.len()));
                for (name, value) in &spec.env {
                    w.bytes(name.as_bytes());
                    w.bytes(value.as_bytes());
                }
                w.0
            }
            ToSupervisor::Reset { grace } => {
                let mut w = Writer::tag(RESET);
                w.u64(u64::try_from(grace.as_millis()).unwrap_or(u64::MAX));
                w.0
            }
        }
    }

    /// Decodes one datagram.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader(bytes);
        let [tag] = r.array()?;
        let msg = match tag {
            RUN => {
                let program = PathBuf::from(r.os()?);
                let n = r.u32()?;
                let mut args = Vec::new();
                for _ in 0..n {
                    args.push(r.os()?);
                }
                let cwd = PathBuf::from(r.os()?);
                let n = r.u32()?;
                let mut env = Vec::new();
                for _ in 0..n {
                    let name = r.os()?;
                    env.push((name, r.os()?));
                }
                ToSupervisor::Run(RunSpec {
                    program,
                    args,
                    cwd,
                    env,
                })
            }
            RESET => ToSupervisor::Reset {
                grace: Duration::from_millis(r.u64()?),
            },
            other => return Err(DecodeError::UnknownTag(other)),
        };
        r.end()?;
        Ok(msg)
    }
}

impl FromSupervisor {
    /// The datagram for this message (at most [`MAX_REPLY_BYTES`]).
    pub fn encode(&self) -> Vec<u8> {
        match self {
            FromSupervisor::Ready => vec![READY],
            FromSupervisor::Started { pid } => {
                let mut w = Writer::tag(STARTED);
                w.u32(*pid);
                w.0
            }
            FromSupervisor::SpawnFailed { errno, message } => {
                let mut w = Writer::tag(SPAWN_FAILED);
                w.i32(*errno);
                let mut cut = message.len().min(MAX_REPLY_BYTES - 16);
                while !message.is_char_boundary(cut) {
                    cut -= 1;
                }
                w.bytes(&message.as_bytes()[..cut]);
                w.0
            }
            FromSupervisor::Exited { status } => {
                let mut w = Writer::tag(EXITED);
                w.i32(*status);
                w.0
            }
            FromSupervisor::ResetDone { leftovers } => {
                let mut w = Writer::tag(RESET_DONE);
                w.u32(*leftovers);
                w.0
            }
        }
    }

    /// Decodes one datagram.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader(bytes);
        let [tag] = r.array()?;
        let msg = match tag {
            READY => FromSupervisor::Ready,
            STARTED => FromSupervisor::Started { pid: r.u32()? },
            SPAWN_FAILED => {
                let errno = r.i32()?;
                FromSupervisor::SpawnFailed {
                    errno,
                    message: r.text()?,
                }
            }
            EXITED => FromSupervisor::Exited { status: r.i32()? },
            RESET_DONE => FromSupervisor::ResetDone {
                leftovers: r.u32()?,
            },
            other => return Err(DecodeError::UnknownTag(other)),
        };
        r.end()?;
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    #[test]
    fn every_message_round_trips() {
        let run = ToSupervisor::Run(RunSpec {
            program: "/bin/bash".into(),
            args: vec!["-c".into(), OsString::from_vec(vec![b'e', 0xff, b'x'])],
            cwd: "/w s/ü".into(),
            env: vec![("A".into(), "1".into()), ("EMPTY".into(), "".into())],
        });
        for msg in [
            run,
            ToSupervisor::Reset {
                grace: Duration::from_millis(3000),
            },
        ] {
            assert_eq!(ToSupervisor::decode(&msg.encode()), Ok(msg));
        }
        for msg in [
            FromSupervisor::Ready,
            FromSupervisor::Started { pid: 7 },
            FromSupervisor::SpawnFailed {
                errno: 7,
                message: "Argument list too long".into(),
            },
            FromSupervisor::Exited { status: 0x0100 },
            FromSupervisor::ResetDone { leftovers: 2 },
        ] {
            assert_eq!(FromSupervisor::decode(&msg.encode()), Ok(msg));
        }
    }

    #[test]
    fn bad_bytes_are_errors() {
        assert_eq!(ToSupervisor::decode(&[]), Err(DecodeError::Truncated));
        assert_eq!(
            ToSupervisor::decode(&[99]),
            Err(DecodeError::UnknownTag(99))
        );
        assert_eq!(
            ToSupervisor::decode(&[RESET, 1, 0]),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            FromSupervisor::decode(&[READY, 0]),
            Err(DecodeError::Trailing(1))
        );
        let mut run = ToSupervisor::Run(RunSpec {
            program: "/p".into(),
            args: vec!["a".into()],
            cwd: "/".into(),
            env: vec![],
        })
        .encode();
        run.truncate(run.len() - 1);
        assert_eq!(ToSupervisor::decode(&run), Err(DecodeError::Truncated));
        // A length prefix claiming more than is there.
        assert_eq!(
            FromSupervisor::decode(&[SPAWN_FAILED, 0, 0, 0, 0, 255, 255, 255, 255]),
            Err(DecodeError::Truncated)
        );
        let long = "é".repeat(MAX_REPLY_BYTES);
        let bytes = FromSupervisor::SpawnFailed {
            errno: 1,
            message: long,
        }
        .encode();
        assert!(bytes.len() <= MAX_REPLY_BYTES);
        assert!(FromSupervisor::decode(&bytes).is_ok());
    }
}
