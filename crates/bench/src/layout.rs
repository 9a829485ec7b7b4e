//! The binary's code layout: whether the measured `dsh` follows its link order file.
//!
//! `crates/cli/hot-functions.txt` lists the functions dsh's common runs execute; an optimised
//! x86_64 Linux build links them first (see `crates/cli/build.rs`), so the code a session runs
//! is a few contiguous megabytes instead of a scatter over all of `.text`. The order is only as
//! good as its names: they carry the hashes of the exact build (dependency versions, features,
//! toolchain), so a dependency bump or a build of another shape (`-p dsh-cli -p dsh-bench` in
//! one invocation unifies features differently) leaves names the binary lacks. These rows say
//! how many listed names the binary has and how far apart they ended up; the fresh-session RSS
//! rows show what that costs.
//!
//! A binary linked with the file (it carries the absolute symbol `DSH_LINK_ORDER_FILE`, defined
//! by the link) fails the run when under 80 % of the listed names are found: the file went stale
//! (a dependency, feature or toolchain change) and the RSS rows would regress silently. A binary
//! the file does not apply to (a debug build, another linker, `DSH_LINK_ORDER=off`) gets the
//! rows without the budget.

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
    /// Function names the order file lists.
    pub listed: usize,
    /// Of those, names the binary defines.
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

/// The names of `order` (one per line; `#` starts a comment, as for the linker).
fn listed(order: &str) -> HashSet<&str> {
    order
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .collect()
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
        if names.contains(name) && seen.insert(name) {
            lo = lo.min(sym.address());
            hi = hi.max(sym.address() + sym.size());
            hot += sym.size();
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
        let once = |n: &str| all.iter().filter(|(m, _, _)| m == n).count() == 1;
        let fns: Vec<_> = all.iter().filter(|(n, _, _)| once(n)).take(3).collect();
        assert_eq!(fns.len(), 3);
        let order = format!("{}\n{}\nnot_in_this_binary\n", fns[0].0, fns[1].0);
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
