//! Custom slash commands: Markdown files in `.dsh/commands`, `.claude/commands` and the
//! user-level folders, expanded with `$ARGUMENTS` and `$1`…`$9`.

use std::path::{Path, PathBuf};

use crate::frontmatter;
use crate::project::ProjectPaths;

/// One custom command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// Its name: the file stem, prefixed by its sub-folders (`a/b.md` is `a:b`); typed as
    /// `/name`.
    pub name: String,
    /// The front matter's `description`, else the body's first line.
    pub description: String,
    /// The front matter's `argument-hint`, if any.
    pub argument_hint: Option<String>,
    /// The file.
    pub file: PathBuf,
    /// The prompt template.
    pub body: String,
}

/// A command file that was not loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandProblem {
    /// The file.
    pub file: PathBuf,
    /// Why.
    pub reason: CommandError,
}

/// Why a command file was not loaded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The file could not be read (the I/O error's text).
    #[error("cannot read: {0}")]
    Read(String),
    /// Its front matter is malformed.
    #[error(transparent)]
    FrontMatter(#[from] frontmatter::FrontMatterError),
}

/// Every command visible from a working directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandSet {
    /// Sorted by name; a nearer folder wins a name.
    pub commands: Vec<Command>,
    /// Unreadable files.
    pub problems: Vec<CommandProblem>,
}

impl CommandSet {
    /// The command called `name`.
    pub fn get(&self, name: &str) -> Option<&Command> {
        self.commands.iter().find(|c| c.name == name)
    }
}

/// The folders, best first: `<root>/.dsh/commands`, `<root>/.claude/commands`,
/// `$DSH_HOME/commands`, `~/.claude/commands`.
pub fn folders(paths: &ProjectPaths) -> Vec<PathBuf> {
    let mut out = vec![
        paths.root.join(".dsh/commands"),
        paths.root.join(".claude/commands"),
        paths.dsh_home.join("commands"),
    ];
    if let Some(h) = &paths.user_home {
        out.push(h.join(".claude/commands"));
    }
    out
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == ':')
}

/// How deep sub-folders are searched (`a/b/c.md` is depth 3).
pub const MAX_DEPTH: usize = 8;

/// The `*.md` files under `dir` (sub-folders too, hidden ones skipped, at most [`MAX_DEPTH`]
/// levels) with their command names: `a/b.md` is `a:b`, as Claude Code names them.
fn command_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack: Vec<(PathBuf, Vec<String>)> = vec![(dir.to_path_buf(), Vec::new())];
    while let Some((d, prefix)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in rd.flatten() {
            let path = entry.path();
            let Some(file_name) = path.file_name().and_then(|s| s.to_str()) else {
                continue;
            };
            if file_name.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                if prefix.len() + 1 < MAX_DEPTH {
                    let mut p = prefix.clone();
                    p.push(file_name.to_owned());
                    stack.push((path, p));
                }
                continue;
            }
            if !path.is_file() || path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            let mut parts = prefix.clone();
            parts.push(stem.to_owned());
            out.push((parts.join(":"), path));
        }
    }
    // Top-level files first, then by path: a stable order for "first wins".
    out.sort_by(|a, b| {
        let depth = |p: &PathBuf| p.components().count();
        depth(&a.1).cmp(&depth(&b.1)).then_with(|| a.1.cmp(&b.1))
    });
    out
}

/// Loads the `*.md` files of each folder and its sub-folders (`a/b.md` → `/a:b`). A nearer
/// folder wins a name.
pub fn discover(folders: &[PathBuf]) -> CommandSet {
    let mut set = CommandSet::default();
    for folder in folders {
        for (name, file) in command_files(folder) {
            if !valid_name(&name) || set.get(&name).is_some() {
                continue;
            }
            match load(&file, name) {
                Ok(c) => set.commands.push(c),
                Err(reason) => set.problems.push(CommandProblem { file, reason }),
            }
        }
    }
    set.commands.sort_by(|a, b| a.name.cmp(&b.name));
    set
}

fn load(file: &Path, name: String) -> Result<Command, CommandError> {
    let text = std::fs::read_to_string(file).map_err(|e| CommandError::Read(e.to_string()))?;
    let doc = frontmatter::parse(&text)?;
    let get = |k: &str| {
        doc.meta
            .get(k)
            .and_then(|v| v.as_str())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let body = doc.body.trim().to_owned();
    let description = get("description").unwrap_or_else(|| {
        body.lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches('#')
            .trim()
            .chars()
            .take(80)
            .collect()
    });
    Ok(Command {
        name,
        description,
        argument_hint: get("argument-hint"),
        file: file.to_path_buf(),
        body,
    })
}

/// Splits arguments on whitespace; `"…"` and `'…'` group words.
pub fn split_args(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut has = false;
    for c in args.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                has = true;
            }
            (None, c) if c.is_whitespace() => {
                if has || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if has || !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl Command {
    /// The prompt for `/name args`: `$ARGUMENTS` becomes `args`, `$1`…`$9` the positional
    /// words (missing ones empty). A template using neither gets `ARGUMENTS: args` appended
    /// when `args` is not empty.
    pub fn expand(&self, args: &str) -> String {
        let args = args.trim();
        let words = split_args(args);
        let uses_args = self.body.contains("$ARGUMENTS")
            || (1..=9).any(|i| self.body.contains(&format!("${i}")));
        let mut out = String::with_capacity(self.body.len() + args.len());
        let mut chars = self.body.char_indices().peekable();
        let bytes = self.body.as_bytes();
        while let Some((i, c)) = chars.next() {
            if c == '$' {
                if self.body[i + 1..].starts_with("ARGUMENTS") {
                    out.push_str(args);
                    for _ in 0.."ARGUMENTS".len() {
                        chars.next();
                    }
                    continue;
                }
                if let Some(d) = bytes.get(i + 1).filter(|b| (b'1'..=b'9').contains(b)) {
                    let n = usize::from(d - b'0');
                    out.push_str(words.get(n - 1).map(String::as_str).unwrap_or_default());
                    chars.next();
                    continue;
                }
            }
            out.push(c);
        }
        if !uses_args && !args.is_empty() {
            out.push_str("\n\nARGUMENTS: ");
            out.push_str(args);
        }
        out
    }
}

/// `/name rest` at the start of `text`: the name and the rest.
pub fn parse_invocation(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let (name, args) = rest.split_at(end);
    valid_name(name).then_some((name, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(body: &str) -> Command {
        Command {
            name: "c".into(),
            description: String::new(),
            argument_hint: None,
            file: PathBuf::new(),
            body: body.into(),
        }
    }

    #[test]
    fn arguments_and_positions_are_substituted() {
        let c = cmd("Fix issue $1 in $2; all: $ARGUMENTS; missing: [$3]");
        assert_eq!(
            c.expand("42 \"src/a b.rs\""),
            "Fix issue 42 in src/a b.rs; all: 42 \"src/a b.rs\"; missing: []"
        );
        assert_eq!(cmd("Review.").expand("now"), "Review.\n\nARGUMENTS: now");
        assert_eq!(cmd("Review.").expand(""), "Review.");
        assert_eq!(cmd("cost $5 $").expand("a"), "cost  $");
    }

    #[test]
    fn sub_folders_name_commands_with_colons() {
        let dir = tempfile::tempdir().unwrap();
        let near = dir.path().join("near");
        let far = dir.path().join("far");
        std::fs::create_dir_all(near.join("git/deep")).unwrap();
        std::fs::create_dir_all(near.join(".hidden")).unwrap();
        std::fs::create_dir_all(far.join("git")).unwrap();
        std::fs::write(near.join("top.md"), "Top.").unwrap();
        std::fs::write(near.join("git/commit.md"), "Commit $ARGUMENTS").unwrap();
        std::fs::write(near.join("git/deep/x.md"), "Deep.").unwrap();
        std::fs::write(near.join(".hidden/h.md"), "Hidden.").unwrap();
        std::fs::write(near.join("git/notes.txt"), "not a command").unwrap();
        std::fs::write(far.join("git/commit.md"), "Far commit.").unwrap();
        std::fs::write(far.join("git/push.md"), "Push.").unwrap();
        let set = discover(&[near.clone(), far]);
        let names: Vec<&str> = set.commands.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["git:commit", "git:deep:x", "git:push", "top"]);
        let commit = set.get("git:commit").unwrap();
        assert_eq!(
            commit.file,
            near.join("git/commit.md"),
            "the nearer folder wins"
        );
        assert_eq!(commit.expand("now"), "Commit now");
        assert_eq!(
            parse_invocation("/git:commit now"),
            Some(("git:commit", " now"))
        );
    }

    #[test]
    fn invocations_parse() {
        assert_eq!(parse_invocation("/fix 1 2"), Some(("fix", " 1 2")));
        assert_eq!(parse_invocation("/fix"), Some(("fix", "")));
        assert_eq!(parse_invocation("fix"), None);
        assert_eq!(parse_invocation("/ x"), None);
    }
}
