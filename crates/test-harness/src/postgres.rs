//! The private PostgreSQL cluster of the tests (started by `scripts/postgres-setup`, which
//! `scripts/test` runs): found through `DSH_TEST_POSTGRES_URL`. Without it a test skips with the
//! reason printed, except under `CI=true`, where it fails.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// The test cluster.
#[derive(Debug, Clone)]
pub struct TestCluster {
    /// The URL of its `postgres` database (`postgresql://postgres@/postgres?host=DIR`).
    pub url: String,
    /// Its temporary directory (the socket's and the server log's).
    pub dir: Option<PathBuf>,
    /// Its data directory.
    pub data: Option<PathBuf>,
    /// The directory of `pg_ctl` and `createdb`.
    pub bin: Option<PathBuf>,
}

/// The cluster, or `None` with the reason printed when `DSH_TEST_POSTGRES_URL` is not set.
///
/// # Panics
/// Under `CI=true` when the cluster is missing: CI must run these tests.
pub fn cluster(test: &str) -> Option<TestCluster> {
    let Some(url) = std::env::var("DSH_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        let reason = "DSH_TEST_POSTGRES_URL is not set (run the tests through scripts/test, or \
                      `eval \"$(scripts/postgres-setup start)\"` first)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test} needs the test PostgreSQL cluster under CI=true: {reason}"
        );
        // A test helper: the skip is reported where the test output shows it.
        #[allow(clippy::print_stderr)]
        {
            eprintln!("skipped: {test} needs a PostgreSQL cluster: {reason}");
        }
        return None;
    };
    let path = |v: &str| {
        std::env::var_os(v)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    };
    Some(TestCluster {
        url,
        dir: path("DSH_TEST_POSTGRES_DIR"),
        data: path("DSH_TEST_POSTGRES_DATA"),
        bin: path("DSH_TEST_POSTGRES_BIN"),
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// Runs a PostgreSQL program of the cluster as its owner (`postgres` when we are root).
fn as_owner(program: PathBuf, args: &[&str]) -> std::process::Output {
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&program);
        c
    } else {
        Command::new(&program)
    };
    match cmd.args(args).output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run {}: {e}", program.display()),
    }
}

impl TestCluster {
    fn program(&self, name: &str) -> PathBuf {
        match &self.bin {
            Some(b) => b.join(name),
            None => PathBuf::from(name),
        }
    }

    /// A new, empty database of the cluster (tests run in parallel: each gets its own) and its
    /// URL.
    ///
    /// # Panics
    /// When `createdb` fails.
    pub fn fresh_database(&self) -> String {
        static N: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "dsh_test_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut args = vec!["-U", "postgres"];
        let host = self.dir.as_ref().map(|d| d.display().to_string());
        if let Some(h) = &host {
            args.extend(["-h", h.as_str()]);
        }
        args.push(&name);
        let out = as_owner(self.program("createdb"), &args);
        assert!(
            out.status.success(),
            "createdb {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // postgresql://user@/DB?host=DIR: the database is the path.
        match self.url.split_once("@/") {
            Some((user, rest)) => {
                let query = rest.split_once('?').map(|(_, q)| q);
                match query {
                    Some(q) => format!("{user}@/{name}?{q}"),
                    None => format!("{user}@/{name}"),
                }
            }
            None => panic!(
                "DSH_TEST_POSTGRES_URL must look like postgresql://user@/db?host=DIR, not {}",
                self.url
            ),
        }
    }

    /// Runs SQL on the database at `url` with `psql` (what a test changes behind a store's
    /// back, e.g. another host taking a lease) and returns its unaligned output.
    ///
    /// # Panics
    /// When `psql` fails.
    pub fn psql(&self, url: &str, sql: &str) -> String {
        let out = match Command::new(self.program("psql"))
            .args([
                "-X",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                url,
                "-c",
                sql,
            ])
            .output()
        {
            Ok(o) => o,
            Err(e) => panic!("cannot run psql: {e}"),
        };
        assert!(
            out.status.success(),
            "psql failed on {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Restarts the server (`pg_ctl restart -m fast`): every connection is cut, and the server
    /// accepts new ones once this returns.
    ///
    /// # Panics
    /// When the cluster's data directory is unknown or `pg_ctl` fails.
    pub fn restart(&self) {
        let (Some(data), Some(dir)) = (&self.data, &self.dir) else {
            panic!("restart needs DSH_TEST_POSTGRES_DATA and DSH_TEST_POSTGRES_DIR");
        };
        let data = data.display().to_string();
        let log = dir.join("server.log").display().to_string();
        let out = as_owner(
            self.program("pg_ctl"),
            &[
                "-D", &data, "-l", &log, "-m", "fast", "-w", "-t", "60", "restart",
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl restart failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A cluster of one test's own (for a test that restarts the server: the shared cluster's other
/// users must not see that), started by `scripts/postgres-setup start` and stopped when dropped.
#[derive(Debug)]
pub struct PrivateCluster {
    /// The cluster.
    pub cluster: TestCluster,
}

impl PrivateCluster {
    /// Starts one, or `None` (reason printed) where the shared cluster is missing too.
    ///
    /// # Panics
    /// When the setup script fails although the shared cluster runs.
    pub fn start(test: &str) -> Option<Self> {
        cluster(test)?;
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres-setup");
        let out = match Command::new(script).arg("start").output() {
            Ok(o) => o,
            Err(e) => panic!("cannot run {script}: {e}"),
        };
        assert!(
            out.status.success(),
            "{script} start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let var = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}='")))
                .and_then(|v| v.strip_suffix('\''))
                .map(str::to_owned)
        };
        let Some(url) = var("DSH_TEST_POSTGRES_URL") else {
            panic!("{script} printed no URL: {text}");
        };
        Some(PrivateCluster {
            cluster: TestCluster {
                url,
                dir: var("DSH_TEST_POSTGRES_DIR").map(PathBuf::from),
                data: var("DSH_TEST_POSTGRES_DATA").map(PathBuf::from),
                bin: var("DSH_TEST_POSTGRES_BIN").map(PathBuf::from),
            },
        })
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        if let Some(dir) = &self.cluster.dir {
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres-setup");
            let _ = Command::new(script).arg("stop").arg(dir).output();
        }
    }
}
