//! The report: rows of (figure, budget, measured, verdict), rendered as markdown and JSON, and the
//! `cargo bench` figures collected from the crate READMEs.

use std::path::Path;

use serde::Serialize;

use crate::stats::Stat;

/// A budget missed by more than this factor fails the run (timing noise aside).
pub const WIDE_MARGIN: f64 = 2.0;

/// How a measured figure compares with its budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// Within budget.
    Pass,
    /// Over a timing or memory budget, but within [`WIDE_MARGIN`] of it (likely noise).
    Over,
    /// Over a timing budget by more than [`WIDE_MARGIN`], or an exact budget missed.
    Fail,
    /// No budget: reported for information.
    Info,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Over => "over (< 2×)",
            Verdict::Fail => "**FAIL**",
            Verdict::Info => "—",
        }
    }
}

/// One line of the report.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// Which scenario or group the figure belongs to.
    pub group: String,
    /// What is measured.
    pub figure: String,
    /// The budget as text (empty when none).
    pub budget: String,
    /// The measurement as text.
    pub measured: String,
    /// Median, min and max when the figure is a statistic.
    pub stat: Option<Stat>,
    /// Unit of `stat`.
    pub unit: String,
    /// The comparison with the budget.
    pub verdict: Verdict,
    /// Whether the budget is exact (missing it at all fails) rather than a noisy timing.
    pub exact: bool,
}

/// Builds rows for one group.
pub struct Group<'a> {
    rows: &'a mut Vec<Row>,
    name: String,
}

/// Renders a statistic: `median (min–max) unit`.
pub fn fmt_stat(s: &Stat, unit: &str, decimals: usize) -> String {
    if s.n == 1 || s.min == s.max {
        format!("{:.*} {unit}", decimals, s.median)
    } else {
        format!(
            "{:.*} {unit} ({:.*}–{:.*})",
            decimals, s.median, decimals, s.min, decimals, s.max
        )
    }
}

impl<'a> Group<'a> {
    /// Rows added through this value belong to group `name`.
    pub fn new(rows: &'a mut Vec<Row>, name: impl Into<String>) -> Self {
        Self {
            rows,
            name: name.into(),
        }
    }

    /// A statistic with an upper budget `limit` (timing/memory: "over" up to 2×, then fail).
    pub fn limit(
        &mut self,
        figure: &str,
        samples: &[f64],
        unit: &str,
        decimals: usize,
        limit: f64,
    ) {
        let Some(s) = Stat::of(samples) else {
            return self.missing(figure, &format!("under {limit} {unit}"));
        };
        let verdict = if s.median <= limit {
            Verdict::Pass
        } else if s.median <= limit * WIDE_MARGIN {
            Verdict::Over
        } else {
            Verdict::Fail
        };
        self.push(Row {
            group: self.name.clone(),
            figure: figure.into(),
            budget: format!("under {limit} {unit} (median)"),
            measured: fmt_stat(&s, unit, decimals),
            stat: Some(s),
            unit: unit.into(),
            verdict,
            exact: false,
        });
    }

    /// A statistic with an upper budget `limit` stated as `budget` (e.g. a computed limit).
    pub fn limit_as(
        &mut self,
        figure: &str,
        samples: &[f64],
        unit: &str,
        decimals: usize,
        limit: f64,
        budget: &str,
    ) {
        let before = self.rows.len();
        self.limit(figure, samples, unit, decimals, limit);
        if let Some(row) = self.rows.get_mut(before) {
            row.budget = budget.to_owned();
        }
    }

    /// A statistic without a budget.
    pub fn info(&mut self, figure: &str, samples: &[f64], unit: &str, decimals: usize) {
        let Some(s) = Stat::of(samples) else {
            return self.text(figure, "no samples");
        };
        self.push(Row {
            group: self.name.clone(),
            figure: figure.into(),
            budget: String::new(),
            measured: fmt_stat(&s, unit, decimals),
            stat: Some(s),
            unit: unit.into(),
            verdict: Verdict::Info,
            exact: false,
        });
    }

    /// A text figure without a budget.
    pub fn text(&mut self, figure: &str, measured: &str) {
        self.push(Row {
            group: self.name.clone(),
            figure: figure.into(),
            budget: String::new(),
            measured: measured.into(),
            stat: None,
            unit: String::new(),
            verdict: Verdict::Info,
            exact: false,
        });
    }

    /// An exact budget (correctness): pass or fail, no margin.
    pub fn exact(&mut self, figure: &str, budget: &str, measured: &str, ok: bool) {
        self.push(Row {
            group: self.name.clone(),
            figure: figure.into(),
            budget: budget.into(),
            measured: measured.into(),
            stat: None,
            unit: String::new(),
            verdict: if ok { Verdict::Pass } else { Verdict::Fail },
            exact: true,
        });
    }

    fn missing(&mut self, figure: &str, budget: &str) {
        self.exact(figure, budget, "not measured", false);
    }

    fn push(&mut self, row: Row) {
        self.rows.push(row);
    }
}

/// The markdown table of `rows`; with `budgets_only`, only rows that have a budget.
pub fn table(rows: &[Row], budgets_only: bool) -> String {
    let mut out =
        String::from("| group | figure | budget | measured | result |\n|---|---|---|---|---|\n");
    for r in rows
        .iter()
        .filter(|r| !budgets_only || !r.budget.is_empty())
    {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.group,
            r.figure,
            if r.budget.is_empty() {
                "—"
            } else {
                &r.budget
            },
            r.measured,
            r.verdict.label()
        ));
    }
    out
}

/// The `cargo bench` sections of every crate README under `crates/` (headings mentioning
/// benchmarks, cost or performance), verbatim, each with its source path.
pub fn micro_sections(root: &Path) -> String {
    let mut dirs: Vec<_> = std::fs::read_dir(root.join("crates"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.sort();
    let mut out = String::new();
    for dir in dirs {
        let Some(name) = dir.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name == "bench" {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(dir.join("README.md")) else {
            continue;
        };
        let mut section: Option<(String, String)> = None;
        let flush = |s: &mut Option<(String, String)>, out: &mut String| {
            if let Some((heading, body)) = s.take() {
                out.push_str(&format!(
                    "### dsh-{name}: {heading}\n\nFrom `crates/{name}/README.md`, section \"{heading}\":\n\n{}\n\n",
                    body.trim()
                ));
            }
        };
        let mut in_code = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
            }
            if !in_code && line.starts_with("## ") {
                flush(&mut section, &mut out);
                let heading = line[3..].trim();
                let lower = heading.to_lowercase();
                if ["bench", "cost", "performance"]
                    .iter()
                    .any(|w| lower.contains(w))
                {
                    section = Some((heading.to_owned(), String::new()));
                }
                continue;
            }
            if let Some((_, body)) = section.as_mut() {
                let line = if !in_code && line.starts_with('#') {
                    format!("##{line}")
                } else {
                    line.to_owned()
                };
                body.push_str(&line);
                body.push('\n');
            }
        }
        flush(&mut section, &mut out);
    }
    if out.is_empty() {
        out.push_str("No crate README has a benchmark section.\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_verdicts_use_the_wide_margin() {
        let mut rows = Vec::new();
        let mut g = Group::new(&mut rows, "g");
        g.limit("a", &[1.0, 2.0, 3.0], "ms", 1, 2.0);
        g.limit("b", &[3.0], "ms", 1, 2.0);
        g.limit("c", &[5.0], "ms", 1, 2.0);
        g.limit("d", &[], "ms", 1, 2.0);
        let v: Vec<Verdict> = rows.iter().map(|r| r.verdict).collect();
        assert_eq!(
            v,
            [Verdict::Pass, Verdict::Over, Verdict::Fail, Verdict::Fail]
        );
        assert_eq!(rows[0].measured, "2.0 ms (1.0–3.0)");
        assert!(
            table(&rows, true).contains("| g | b | under 2 ms (median) | 3.0 ms | over (< 2×) |")
        );
    }

    #[test]
    fn micro_sections_are_taken_from_the_readmes() {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("crates/foo");
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(
            c.join("README.md"),
            "# foo\n\n## API\n\nx\n\n## Benchmarks\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n### Sub\n\n```sh\n## not a heading\n```\n\n## Known limitations\n\nnone\n",
        )
        .unwrap();
        let s = micro_sections(dir.path());
        assert!(s.starts_with("### dsh-foo: Benchmarks\n"), "{s}");
        assert!(s.contains("| 1 | 2 |"));
        assert!(s.contains("##### Sub"));
        assert!(s.contains("## not a heading"));
        assert!(!s.contains("Known limitations"));
        assert!(!s.contains("API"));
    }
}
