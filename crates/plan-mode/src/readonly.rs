//! Which `bash` commands plan mode lets run: every simple command of the line (split by a real
//! shell parser, `dsh_shell_parse`) must be a known read-only program, used without its
//! writing options, and the line must not redirect output into a file.

use dsh_shell_parse::{Unjudgeable, simple_commands};

/// Programs that only read (with the exceptions [`bash_is_read_only`] checks per program).
const READ_ONLY_PROGRAMS: &[&str] = &[
    "[",
    "basename",
    "cat",
    "cd",
    "cmp",
    "column",
    "comm",
    "cut",
    "date",
    "df",
    "diff",
    "dirname",
    "du",
    "echo",
    "egrep",
    "false",
    "fgrep",
    "file",
    "find",
    "git",
    "grep",
    "head",
    "hexdump",
    "hostname",
    "id",
    "jq",
    "ls",
    "md5sum",
    "nl",
    "od",
    "printenv",
    "printf",
    "pwd",
    "readlink",
    "realpath",
    "rg",
    "sed",
    "sha1sum",
    "sha256sum",
    "sort",
    "stat",
    "tail",
    "test",
    "tr",
    "tree",
    "true",
    "type",
    "uname",
    "uniq",
    "wc",
    "which",
    "whoami",
    "xxd",
];

/// `git` subcommands that only read.
const READ_ONLY_GIT: &[&str] = &[
    "blame",
    "describe",
    "diff",
    "grep",
    "log",
    "ls-files",
    "ls-tree",
    "rev-parse",
    "shortlog",
    "show",
    "status",
];

/// Why a command line is not read-only (the text completes "refused because …").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotReadOnly {
    /// An output redirection into a file (`>f`).
    #[error("it redirects output into a file ({0})")]
    Redirect(String),
    /// The line cannot be judged statically.
    #[error("{}", .0.0)]
    Unjudgeable(#[from] Unjudgeable),
    /// A program that is not known to only read.
    #[error("`{0}` is not a known read-only command")]
    Program(String),
    /// A `git` subcommand that is not known to only read.
    #[error("`git {0}` is not a read-only git command")]
    GitSubcommand(String),
    /// A known program with a flag that makes it write.
    #[error("`{program} {flag}` writes")]
    Writes {
        /// The program.
        program: String,
        /// The flag.
        flag: String,
    },
}

/// Why a command line is not read-only, or `Ok(())`.
pub fn bash_is_read_only(line: &str) -> Result<(), NotReadOnly> {
    if let Some(r) = output_redirect(line) {
        return Err(NotReadOnly::Redirect(r));
    }
    let commands = simple_commands(line)?;
    for argv in &commands {
        let Some(program) = argv.first() else {
            continue;
        };
        let name = program.rsplit('/').next().unwrap_or(program);
        if !READ_ONLY_PROGRAMS.contains(&name) {
            return Err(NotReadOnly::Program(name.to_owned()));
        }
        let args = &argv[1..];
        let refused = match name {
            "find" => args.iter().find(|a| {
                matches!(
                    a.as_str(),
                    "-exec"
                        | "-execdir"
                        | "-ok"
                        | "-okdir"
                        | "-delete"
                        | "-fprint"
                        | "-fprint0"
                        | "-fprintf"
                        | "-fls"
                )
            }),
            "sed" => args
                .iter()
                .find(|a| a.starts_with("-i") || a.starts_with("--in-place")),
            "sort" => args
                .iter()
                .find(|a| a.starts_with("-o") || a.starts_with("--output")),
            "git" => {
                let sub = args.iter().find(|a| !a.starts_with('-'));
                match sub {
                    Some(s) if READ_ONLY_GIT.contains(&s.as_str()) => {
                        args.iter().find(|a| a.starts_with("--output"))
                    }
                    Some(s) => return Err(NotReadOnly::GitSubcommand(s.clone())),
                    None => None,
                }
            }
            _ => None,
        };
        if let Some(flag) = refused {
            return Err(NotReadOnly::Writes {
                program: name.to_owned(),
                flag: flag.clone(),
            });
        }
    }
    Ok(())
}

/// The first output redirection into a file outside quotes (`>`/`>>` not to `/dev/null` and
/// not a descriptor duplication such as `2>&1`).
fn output_redirect(line: &str) -> Option<String> {
    let chars: Vec<char> = line.chars().collect();
    let (mut single, mut double) = (false, false);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if !single => i += 1,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '>' if !single && !double => {
                let mut j = i + 1;
                if chars.get(j) == Some(&'>') || chars.get(j) == Some(&'|') {
                    j += 1;
                }
                if chars.get(j) == Some(&'&') || chars.get(j) == Some(&'(') {
                    // `2>&1`, `>&2`; `>(…)` is process substitution, refused by the parser.
                    i = j + 1;
                    continue;
                }
                while chars.get(j).is_some_and(|c| c.is_whitespace()) {
                    j += 1;
                }
                let target: String = chars[j..]
                    .iter()
                    .take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '|' | '&' | ')'))
                    .collect();
                if target != "/dev/null" {
                    return Some(format!(">{target}"));
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_lines_pass() {
        for line in [
            "ls -la",
            "cat a.txt | grep x | wc -l",
            "git status && git log --oneline -5",
            "cd src && rg -n foo 2>/dev/null",
            "find . -name '*.rs' | head",
            "grep -r 'a > b' .",
            "sed -n 1,20p file",
            "echo hi 2>&1",
        ] {
            assert_eq!(bash_is_read_only(line), Ok(()), "{line}");
        }
    }

    #[test]
    fn writing_lines_are_refused_with_a_reason() {
        let cases = [
            ("echo x > f", "redirects output into a file (>f)"),
            ("cat a >> b", "redirects output into a file (>b)"),
            ("rm -rf x", "`rm` is not a known read-only command"),
            ("ls && touch y", "`touch` is not a known read-only command"),
            ("find . -delete", "`find -delete` writes"),
            ("sed -i s/a/b/ f", "`sed -i` writes"),
            (
                "git commit -m x",
                "`git commit` is not a read-only git command",
            ),
            ("ls $(rm x)", "command substitution"),
            ("python3 -c 1", "`python3` is not a known read-only command"),
        ];
        for (line, want) in cases {
            let e = bash_is_read_only(line).unwrap_err().to_string();
            assert!(e.contains(want), "{line}: {e}");
        }
    }
}
