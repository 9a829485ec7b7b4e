//! Skills: folders of instructions the model loads on demand (`<root>/<name>/SKILL.md` or
//! `<root>/<name>.md`), their roots and ranks, front-matter validation, the catalog reminder and
//! the content the `skill` tool returns.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::frontmatter::{self, flag};
use crate::project::ProjectPaths;

/// The `source.kind` of the catalog reminder.
pub const CATALOG_KIND: &str = "skill-catalog";
/// The `source.kind` of a `/name` invocation.
pub const INVOCATION_KIND: &str = "skill-invocation";
/// Longest description shown in the catalog, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 500;

static NAME: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9]+(-[a-z0-9]+)*$").ok());

/// Whether `name` is a valid skill name (`^[a-z0-9]+(-[a-z0-9]+)*$`).
pub fn valid_name(name: &str) -> bool {
    NAME.as_ref().is_some_and(|r| r.is_match(name))
}

/// One skill root, with its rank (lower wins).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillRoot {
    /// Rank: 100 `.dsh/skills`, 200 `.agents/skills`, 250 `.claude/skills`, 300 custom,
    /// 400 `$DSH_HOME/skills`, 500 `~/.agents/skills`, 600 `~/.claude/skills`.
    pub rank: u32,
    /// The directory.
    pub dir: PathBuf,
}

/// The roots for `paths`, by rank.
pub fn roots(paths: &ProjectPaths, custom: &[PathBuf]) -> Vec<SkillRoot> {
    let mut out = vec![
        SkillRoot {
            rank: 100,
            dir: paths.root.join(".dsh/skills"),
        },
        SkillRoot {
            rank: 200,
            dir: paths.root.join(".agents/skills"),
        },
        SkillRoot {
            rank: 250,
            dir: paths.root.join(".claude/skills"),
        },
    ];
    for c in custom {
        let dir = if c.is_absolute() {
            c.clone()
        } else {
            paths.root.join(c)
        };
        out.push(SkillRoot { rank: 300, dir });
    }
    out.push(SkillRoot {
        rank: 400,
        dir: paths.dsh_home.join("skills"),
    });
    if let Some(a) = &paths.agents_home {
        out.push(SkillRoot {
            rank: 500,
            dir: a.join("skills"),
        });
    }
    if let Some(h) = &paths.user_home {
        out.push(SkillRoot {
            rank: 600,
            dir: h.join(".claude/skills"),
        });
    }
    out
}

/// A loaded skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    /// Its name.
    pub name: String,
    /// What it is for (required).
    pub description: String,
    /// When to use it, if given.
    pub when_to_use: Option<String>,
    /// The model may load it (`disable-model-invocation` not set).
    pub model_invocable: bool,
    /// The user may invoke it as `/name` (`user-invocable`, default true).
    pub user_invocable: bool,
    /// Its `SKILL.md` (or `<name>.md`).
    pub file: PathBuf,
    /// Its folder (`None` for a single-file skill).
    pub dir: Option<PathBuf>,
    /// Rank of its root.
    pub rank: u32,
}

/// A skill file that was not loaded, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillProblem {
    /// The file.
    pub file: PathBuf,
    /// Why.
    pub reason: SkillError,
}

/// Why a skill file was not loaded or read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    /// The file could not be read (the I/O error's text).
    #[error("cannot read: {0}")]
    Read(String),
    /// The file could not be re-read when the skill was invoked.
    #[error("skill \"{name}\" cannot be read: {reason}")]
    Reread {
        /// The skill.
        name: String,
        /// The I/O error's text.
        reason: String,
    },
    /// Its front matter is malformed.
    #[error(transparent)]
    FrontMatter(#[from] frontmatter::FrontMatterError),
    /// A front-matter key that must be a string is not.
    #[error("`{0}` must be a string")]
    NotString(String),
    /// The front matter has no `name`.
    #[error("front matter has no `name`")]
    NoName,
    /// The name is not a valid skill name.
    #[error("invalid name \"{0}\" (lowercase letters, digits and single hyphens)")]
    InvalidName(String),
    /// The front matter has no (or an empty) `description`.
    #[error("front matter has no `description`")]
    NoDescription,
    /// A front-matter flag is not a boolean.
    #[error("`{key}` must be true or false, not {value}")]
    NotBool {
        /// The key.
        key: String,
        /// Its value.
        value: Value,
    },
}

/// Every skill visible from a working directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkillSet {
    /// Loaded skills, sorted by name (the best-ranked of each name).
    pub skills: Vec<Skill>,
    /// Invalid skills (reported, skipped).
    pub problems: Vec<SkillProblem>,
    /// Skills hidden by a better-ranked one of the same name.
    pub shadowed: Vec<Skill>,
}

impl SkillSet {
    /// The skill called `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }
}

/// Loads the skills of every root (one level: `<name>/SKILL.md` or `<name>.md`).
pub fn discover(roots: &[SkillRoot]) -> SkillSet {
    let mut set = SkillSet::default();
    let mut all: Vec<Skill> = Vec::new();
    for root in roots {
        let Ok(rd) = std::fs::read_dir(&root.dir) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.starts_with('.') {
                continue; // `.system` and other hidden folders
            }
            let (file, dir) = if p.is_dir() {
                let f = p.join("SKILL.md");
                if !f.is_file() {
                    continue;
                }
                (f, Some(p.clone()))
            } else if p.extension().is_some_and(|e| e == "md") {
                (p.clone(), None)
            } else {
                continue;
            };
            match load(&file, dir, root.rank) {
                Ok(s) => all.push(s),
                Err(reason) => set.problems.push(SkillProblem { file, reason }),
            }
        }
    }
    all.sort_by(|a, b| a.name.cmp(&b.name).then(a.rank.cmp(&b.rank)));
    for s in all {
        if set.skills.last().is_some_and(|l: &Skill| l.name == s.name) {
            set.shadowed.push(s);
        } else {
            set.skills.push(s);
        }
    }
    set
}

fn string(meta: &serde_json::Map<String, Value>, key: &str) -> Result<Option<String>, SkillError> {
    match meta.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_owned())),
        Some(_) => Err(SkillError::NotString(key.to_owned())),
    }
}

/// Reads and validates one skill file.
pub fn load(file: &Path, dir: Option<PathBuf>, rank: u32) -> Result<Skill, SkillError> {
    let text = std::fs::read_to_string(file).map_err(|e| SkillError::Read(e.to_string()))?;
    let doc = frontmatter::parse(&text)?;
    let name = string(&doc.meta, "name")?.ok_or(SkillError::NoName)?;
    if !valid_name(&name) {
        return Err(SkillError::InvalidName(name));
    }
    let description = string(&doc.meta, "description")?
        .filter(|d| !d.is_empty())
        .ok_or(SkillError::NoDescription)?;
    let when_to_use = string(&doc.meta, "whenToUse")?.or(string(&doc.meta, "when_to_use")?);
    let bool_key = |key: &str, default: bool| -> Result<bool, SkillError> {
        match doc.meta.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => flag(v).ok_or_else(|| SkillError::NotBool {
                key: key.to_owned(),
                value: v.clone(),
            }),
        }
    };
    let disabled = bool_key("disable-model-invocation", false)?;
    let user_invocable = bool_key("user-invocable", true)?;
    Ok(Skill {
        name,
        description,
        when_to_use,
        model_invocable: !disabled,
        user_invocable,
        file: file.to_path_buf(),
        dir,
        rank,
    })
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

/// The catalog reminder of the model-invocable skills, `None` when there are none.
pub fn catalog(set: &SkillSet) -> Option<(String, Vec<String>)> {
    let skills: Vec<&Skill> = set.skills.iter().filter(|s| s.model_invocable).collect();
    if skills.is_empty() {
        return None;
    }
    let mut text = String::from(
        "<system-reminder>\nSkills are available: each holds instructions for one kind of task. \
         When a task matches a skill's description, load it with the skill tool before acting \
         and follow its instructions.\n\n<available_skills>",
    );
    for s in &skills {
        let mut d = s.description.clone();
        if let Some(w) = &s.when_to_use {
            d.push_str(" Use when: ");
            d.push_str(w);
        }
        text.push_str(&format!(
            "\n- `{}`: {}",
            s.name,
            escape(&one_line(&d, MAX_DESCRIPTION_CHARS))
        ));
    }
    text.push_str("\n</available_skills>\n</system-reminder>");
    Some((text, skills.iter().map(|s| s.name.clone()).collect()))
}

/// The files of a skill's folder other than its `SKILL.md` (sorted, at most 50, 3 levels).
pub fn resources(skill: &Skill) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Some(dir) = &skill.dir else {
        return out;
    };
    let mut stack = vec![(dir.clone(), 0)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            {
                continue;
            }
            if p.is_dir() {
                if depth < 2 {
                    stack.push((p, depth + 1));
                }
            } else if p != skill.file {
                out.push(p);
            }
        }
    }
    out.sort();
    out.truncate(50);
    out
}

/// The block the `skill` tool and a `/name` invocation return: the body (re-read now) and the
/// skill's resources.
pub fn content(skill: &Skill) -> Result<String, SkillError> {
    let text = std::fs::read_to_string(&skill.file).map_err(|e| SkillError::Reread {
        name: skill.name.clone(),
        reason: e.to_string(),
    })?;
    let doc = frontmatter::parse(&text)?;
    let mut out = format!("<skill_content name=\"{}\">\n<skill_resources>", skill.name);
    let res = resources(skill);
    if let Some(dir) = &skill.dir {
        out.push_str(&format!("\nBase directory: {}", dir.display()));
    }
    for r in res {
        out.push_str(&format!("\n- {}", r.display()));
    }
    out.push_str(&format!(
        "\n</skill_resources>\n<skill_instructions>\n{}\n</skill_instructions>\n</skill_content>",
        doc.body.trim()
    ));
    Ok(out)
}

/// The `/name` tokens of `text` (start of text or after whitespace), in order, without repeats.
pub fn slash_tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        if let Some(n) = word.strip_prefix('/') {
            let n = n.trim_end_matches([',', '.', ';', ':', '!', '?']);
            if valid_name(n) && !out.iter().any(|o| o == n) {
                out.push(n.to_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_tokens() {
        assert!(valid_name("pdf-tools"));
        assert!(!valid_name("Bad_Name"));
        assert!(!valid_name("a--b"));
        assert_eq!(
            slash_tokens("use /pdf-tools, then /pdf-tools and /x/y"),
            ["pdf-tools"]
        );
    }

    #[test]
    fn descriptions_are_escaped_flattened_and_capped() {
        let long = "x".repeat(600);
        assert_eq!(one_line(&long, 500).chars().count(), 500);
        assert_eq!(escape("a<b>&"), "a&lt;b&gt;&amp;");
        assert_eq!(one_line("a\n  b", 10), "a b");
    }
}
