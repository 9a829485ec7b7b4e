//! `dsh stats`: sessions, turns, tokens, cache-hit ratio and cost from the catalog, by day,
//! model or project; with `--store URL` / `DSH_STORE`, from a PostgreSQL store's catalog.

use anyhow::anyhow;
use dsh_catalog_api::{Filter, GroupBy, StatRow};

use crate::Failure;
use crate::config_cmd::write_stdout;

/// How `dsh stats` groups.
#[derive(Clone, Copy, Debug, Default, clap::ValueEnum)]
pub(crate) enum By {
    /// UTC day of the usage.
    #[default]
    Day,
    /// Route and model.
    Model,
    /// Project root of the session's directory.
    Project,
}

/// Options of `dsh stats`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatsArgs {
    /// Group by day, model or project.
    #[arg(long, value_enum, default_value_t = By::Day)]
    pub(crate) by: By,
    /// Usage within this long: `30m`, `12h`, `7d`, `2w`.
    #[arg(long, value_name = "AGE", default_value = "30d",
          value_parser = crate::sessions_cmd::parse_age)]
    pub(crate) since: i64,
    /// JSON output.
    #[arg(long)]
    pub(crate) json: bool,
    /// The store: a `postgres://` URL, or `jsonl` (the default: $DSH_HOME/sessions).
    #[arg(long, value_name = "URL", env = "DSH_STORE")]
    pub(crate) store: Option<String>,
}

fn tokens(n: u64) -> String {
    match n {
        n if n >= 10_000_000 => format!("{:.0}M", n as f64 / 1e6),
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n if n >= 10_000 => format!("{:.0}k", n as f64 / 1e3),
        n if n >= 1_000 => format!("{:.1}k", n as f64 / 1e3),
        n => n.to_string(),
    }
}

/// `dsh stats`.
pub(crate) async fn run(args: StatsArgs) -> Result<u8, Failure> {
    let by = match args.by {
        By::Day => GroupBy::Day,
        By::Model => GroupBy::Model,
        By::Project => GroupBy::Project,
    };
    let filter = Filter {
        since_ms: Some(dsh_session::now_ms() - args.since),
        ..Default::default()
    };
    let catalog = crate::store_cmd::catalog(args.store.as_deref())?;
    let rows = catalog
        .stats(by, &filter)
        .map_err(|e| Failure::run(anyhow!("{e}")))?;
    // A session active on several days counts once in the total.
    let sum = catalog
        .stats(GroupBy::Total, &filter)
        .map_err(|e| Failure::run(anyhow!("{e}")))?
        .pop()
        .unwrap_or_else(|| StatRow {
            key: "total".into(),
            ..Default::default()
        });
    if args.json {
        let row = |r: &StatRow| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            v["cacheHitRatio"] = serde_json::json!(r.cache_hit_ratio());
            v
        };
        let out = serde_json::json!({
            "by": format!("{:?}", args.by).to_lowercase(),
            "groups": rows.iter().map(row).collect::<Vec<_>>(),
            "total": row(&sum),
        });
        return write_stdout(&(serde_json::to_string_pretty(&out).unwrap_or_default() + "\n"));
    }
    let head = match args.by {
        By::Day => "DAY",
        By::Model => "MODEL",
        By::Project => "PROJECT",
    };
    let mut table = vec![[
        head.to_owned(),
        "SESSIONS".into(),
        "TURNS".into(),
        "INPUT".into(),
        "OUTPUT".into(),
        "CACHE-HIT".into(),
        "COST".into(),
    ]];
    for r in rows.iter().chain(std::iter::once(&sum)) {
        table.push([
            r.key.clone(),
            r.sessions.to_string(),
            r.turns.to_string(),
            tokens(r.tokens_in),
            tokens(r.tokens_out),
            format!("{:.1}%", r.cache_hit_ratio() * 100.0),
            format!("${:.4}", r.cost_usd),
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in &table {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                if c == 0 {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    write_stdout(&out)
}

#[cfg(test)]
mod tests {
    use super::tokens;

    #[test]
    fn token_counts_are_short() {
        assert_eq!(tokens(999), "999");
        assert_eq!(tokens(1_234), "1.2k");
        assert_eq!(tokens(56_789), "57k");
        assert_eq!(tokens(1_500_000), "1.5M");
        assert_eq!(tokens(25_000_000), "25M");
    }
}
