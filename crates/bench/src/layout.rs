//! The binary's code layout: whether the measured `dsh` follows its link order file.
//!
//! `crates/cli/hot-functions.txt` lists the functions dsh's common runs execute; an optimised
//! x86_64 Linux build links them first (see `crates/cli/build.rs`), so the code a session runs
//! is a few contiguous megabytes instead of a scatter over all of `.text`. The file lists keys:
//! v0-mangled names without their build-specific parts (`scripts/order-key.awk`; [`order_key`]
//! is the same in Rust), which the linker wrapper resolves to the link's names. A key outlives
//! dependency, feature and build-shape changes, not code changes: a function renamed, added to
//! the hot path or inlined away is missing until the file is regenerated. These rows say how
//! many listed keys the binary's functions have and how far apart they ended up; the
//! fresh-session RSS rows show what that costs.
//!
//! A binary linked with the file (it carries the absolute symbol `DSH_LINK_ORDER_FILE`, defined
//! by the link) fails the run when under 80 % of the listed keys are found: the file went stale
//! (the hot code changed, or the toolchain did) and the RSS rows would regress silently. A binary
//! the file does not apply to (a debug build, another linker, `DSH_LINK_ORDER=off`) gets the
//! rows without the budget.

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::Path;

use anyhow::{Context, Result};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

use crate::figures::MB;
use crate::report::{Group, Row};

/// The order file, as the build links it.
const ORDER: &str = include_str!("../../cli/hot-functions.txt");
/// Below this share of listed names found, the file no longer matches the build: the run fails.
const MIN_FOUND: f64 = 0.80;
/// The absolute symbol a link with the order file defines (`crates/cli/build.rs`).
const MARKER: &str = "DSH_LINK_ORDER_FILE";
/// The figure of the first row, also when the binary cannot be read.
const FOUND: &str = "functions of `crates/cli/hot-functions.txt` in this binary";

/// What the binary's symbol table says of the order file.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Function keys the order file lists.
    pub listed: usize,
    /// Of those, keys of functions the binary defines.
    pub found: usize,
    /// Bytes from the first to the end of the last listed function in the binary.
    pub span: u64,
    /// Bytes of the found functions themselves.
    pub hot: u64,
    /// Bytes of `.text`.
    pub text: u64,
    /// Whether the binary was linked with the order file (it defines [`MARKER`]).
    pub ordered: bool,
}

/// The keys of `order` (one per line; `#` starts a comment, as for the linker).
fn listed(order: &str) -> HashSet<&str> {
    order
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The key of a symbol name in the order file: `scripts/order-key.awk`'s `order_key`, the same
/// text changes in the same order (a test runs the awk file to keep the two equal):
/// - a trailing `.llvm.<digits>` (ThinLTO's suffix of a promoted local) is dropped;
/// - `Cs<base-62>_` (a crate's disambiguator) becomes `C_`;
/// - then `B<base-62>_` (a back-reference, an offset into the name) becomes `B_`.
pub fn order_key(name: &str) -> Cow<'_, str> {
    let mut s = name;
    if let Some(at) = s.rfind(".llvm.") {
        let digits = &s[at + ".llvm.".len()..];
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            s = &s[..at];
        }
    }
    let s = replace_runs(s, "Cs", 1, "C_");
    let s = replace_runs(&s, "B", 0, "B_");
    if s == name {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(s)
    }
}

/// Replaces, left to right, each `prefix` followed by at least `min` ASCII alphanumerics and
/// a `_` with `with` (the awk `gsub(/prefix[0-9A-Za-z]{min,}_/, with)` of [`order_key`]).
fn replace_runs(s: &str, prefix: &str, min: usize, with: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        if b[i..].starts_with(prefix.as_bytes()) {
            let start = i + prefix.len();
            let run = b[start..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric())
                .count();
            if run >= min && b.get(start + run) == Some(&b'_') {
                out.push_str(&s[copied..i]);
                out.push_str(with);
                i = start + run + 1;
                copied = i;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&s[copied..]);
    out
}

/// Reads `dsh`'s symbol table and compares it with the order file.
pub fn measure(dsh: &Path) -> Result<Layout> {
    let data = std::fs::read(dsh).with_context(|| format!("reading {}", dsh.display()))?;
    of(&data, ORDER).with_context(|| format!("reading the symbols of {}", dsh.display()))
}

/// [`measure`] on the bytes of a binary and the text of an order file.
fn of(binary: &[u8], order: &str) -> Result<Layout> {
    let file = object::File::parse(binary)?;
    let names = listed(order);
    let text = file.section_by_name(".text").map_or(0, |s| s.size());
    let mut seen = HashSet::new();
    let (mut lo, mut hi, mut hot) = (u64::MAX, 0u64, 0u64);
    let mut ordered = false;
    for sym in file.symbols() {
        let Ok(name) = sym.name() else { continue };
        if name == MARKER {
            ordered = true;
        }
        if sym.kind() != SymbolKind::Text || sym.size() == 0 {
            continue;
        }
        let key = order_key(name);
        if names.contains(key.as_ref()) {
            lo = lo.min(sym.address());
            hi = hi.max(sym.address() + sym.size());
            hot += sym.size();
            seen.insert(key.into_owned());
        }
    }
    Ok(Layout {
        listed: names.len(),
        found: seen.len(),
        span: hi.saturating_sub(lo),
        hot,
        text,
        ordered,
    })
}

/// The layout rows (group "binary layout") of the binary at `dsh`; a file that is no binary
/// (a wrapper script, say) gets a row saying so instead of failing the run.
pub fn rows(rows: &mut Vec<Row>, dsh: &Path) {
    let mut g = Group::new(rows, "binary layout (link order file)");
    match measure(dsh) {
        Ok(layout) => layout_rows(&mut g, &layout),
        Err(e) => g.text(FOUND, &format!("not measured: {e:#}")),
    }
}

fn layout_rows(g: &mut Group<'_>, layout: &Layout) {
    let share = layout.found as f64 / layout.listed.max(1) as f64;
    let measured = format!(
        "{} of {} ({:.1} %){}",
        layout.found,
        layout.listed,
        share * 100.0,
        if share < MIN_FOUND {
            ": the file does not match this build (a release build of `-p dsh-cli` alone \
             follows it; after a dependency, feature or toolchain change run scripts/hot-functions)"
        } else {
            ""
        }
    );
    if layout.ordered {
        g.exact(
            FOUND,
            &format!("at least {:.0} %", MIN_FOUND * 100.0),
            &measured,
            share >= MIN_FOUND,
        );
    } else {
        g.text(
            FOUND,
            &format!("{measured} (not linked with the order file: not checked)"),
        );
    }
    g.text(
        "where they lie: span in `.text` (their own size)",
        &format!(
            "{:.1} MB of {:.1} MB ({:.1} MB)",
            layout.span as f64 / MB,
            layout.text as f64 / MB,
            layout.hot as f64 / MB
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_file_lines_are_names_and_comments_are_not() {
        let names = listed("# header\n_ZN3foo3bar17h0123456789abcdefE\n\n  main  \n# tail\n");
        assert_eq!(
            names,
            HashSet::from(["_ZN3foo3bar17h0123456789abcdefE", "main"])
        );
    }

    fn layout(found: usize, ordered: bool) -> Layout {
        Layout {
            listed: 1000,
            found,
            span: 1 << 20,
            hot: 1 << 19,
            text: 1 << 24,
            ordered,
        }
    }

    fn verdict(l: &Layout) -> (crate::report::Verdict, bool) {
        let mut rows = Vec::new();
        layout_rows(&mut Group::new(&mut rows, "binary layout"), l);
        let row = rows.iter().find(|r| r.figure == FOUND).unwrap();
        (row.verdict, row.exact)
    }

    /// v0 names as the linker sees them: crate disambiguators, back-references, ThinLTO
    /// suffixes, and names that are none of these.
    const NAMES: [&str; 7] = [
        "_RINvMNtNtCsjrHSEGnQ3l9_3std4sync9once_lockINtB3_8OnceLockINtNtB5_14reentrant_lock13ReentrantLockjEE10initializeNCINvB2_11get_or_initNCNvB2V_6stdout0E0zEB7_.llvm.3643936799275306673",
        "_RNvCs1Ab_7dsh_cli4main",
        "_RNvNtCs0_5Build_8Builder_3new",
        "sqlite3VdbeExec",
        "ZSTD_compressStream2",
        "name.llvm.notdigits",
        "_RNvCsz_3fooB_.llvm.",
    ];

    #[test]
    fn keys_drop_crate_hashes_back_references_and_lto_suffixes() {
        assert_eq!(
            order_key(NAMES[0]),
            "_RINvMNtNtC_3std4sync9once_lockINtB_8OnceLockINtNtB_14reentrant_lock13ReentrantLockjEE10initializeNCINvB_11get_or_initNCNvB_6stdout0E0zEB_"
        );
        assert_eq!(order_key(NAMES[1]), "_RNvC_7dsh_cli4main");
        assert!(matches!(order_key(NAMES[3]), Cow::Borrowed(_)));
        assert_eq!(order_key(NAMES[5]), "name.llvm.notdigits");
        // Two builds' names of one function have one key.
        assert_eq!(
            order_key("_RNvCs1Ab_7dsh_cli4main.llvm.1"),
            order_key("_RNvCsQQQQQQQQQQQ_7dsh_cli4main.llvm.2")
        );
    }

    /// The linker wrapper and the generator compute keys with `scripts/order-key.awk`; this is
    /// the same function or the bench would count keys the link never resolved.
    #[test]
    fn keys_are_those_of_the_awk_the_link_uses() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/order-key.awk");
        let mut child = std::process::Command::new("awk")
            .args(["-v", "mode=key", "-f"])
            .arg(&script)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("awk runs");
        let input = NAMES.join("\n") + "\n";
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), input.as_bytes()).unwrap();
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let theirs: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        let ours: Vec<String> = NAMES.iter().map(|n| order_key(n).into_owned()).collect();
        assert_eq!(ours, theirs);
    }

    #[test]
    fn a_binary_linked_with_the_file_fails_under_80_percent_found() {
        use crate::report::Verdict;
        assert_eq!(verdict(&layout(799, true)), (Verdict::Fail, true));
        assert_eq!(verdict(&layout(800, true)), (Verdict::Pass, true));
        assert_eq!(verdict(&layout(950, true)), (Verdict::Pass, true));
        // A debug build or another linker: reported, not checked.
        assert_eq!(verdict(&layout(0, false)), (Verdict::Info, false));
    }

    #[test]
    fn the_committed_order_file_is_one_symbol_per_line() {
        let names = listed(ORDER);
        assert!(names.len() > 1000, "{} names", names.len());
        for n in &names {
            assert!(!n.contains(char::is_whitespace), "{n:?}");
        }
    }

    #[test]
    fn this_test_binary_is_measured_against_a_file_naming_its_functions() {
        let me = std::env::current_exe().unwrap();
        let data = std::fs::read(&me).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let all: Vec<(String, u64, u64)> = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
            .filter_map(|s| Some((s.name().ok()?.to_owned(), s.address(), s.size())))
            .collect();
        let once = |n: &str| {
            all.iter()
                .filter(|(m, _, _)| order_key(m) == order_key(n))
                .count()
                == 1
        };
        let fns: Vec<_> = all.iter().filter(|(n, _, _)| once(n)).take(3).collect();
        assert_eq!(fns.len(), 3);
        let order = format!(
            "{}\n{}\nnot_in_this_binary\n",
            order_key(&fns[0].0),
            order_key(&fns[1].0)
        );
        let l = of(&data, &order).unwrap();
        assert_eq!((l.listed, l.found), (3, 2));
        // A test binary is not linked with the order file.
        assert!(!l.ordered);
        assert_eq!(l.hot, fns[0].2 + fns[1].2);
        let lo = fns[0].1.min(fns[1].1);
        let hi = (fns[0].1 + fns[0].2).max(fns[1].1 + fns[1].2);
        assert_eq!(l.span, hi - lo);
        assert!(l.text >= l.span);
    }
}
