//! Splitting a bash command line into the simple commands it would run, with a real shell
//! parser (`brush-parser`), so that a rule is judged against every command of `a | b`,
//! `a && b`, `a; b`, newlines, subshells and brace groups, never against the string's prefix.
//!
//! What cannot be judged statically makes the whole line [`Unjudgeable`]: command
//! substitution (`$(...)`, backticks), process substitution, a command name that is an
//! expansion (`$CMD`), function definitions, loops and conditionals. Such a line is never
//! allowed by a rule: it is asked about (or denied).

use brush_parser::ast::{
    Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, IoFileRedirectTarget,
    IoRedirect, Program, SimpleCommand,
};
use brush_parser::{Parser, ParserOptions};

/// One simple command: its words, unquoted (`env` and leading assignments stripped).
pub type Argv = Vec<String>;

/// Why a command line cannot be judged by rules.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the command cannot be judged by rules: {0}")]
pub struct Unjudgeable(pub String);

/// The deepest nesting of `(` and `{` outside quotes that a line may have. `brush-parser`'s
/// time grows exponentially with the nesting of unclosed parentheses (found by fuzzing: 57
/// of them took minutes), and no command a person would allow by a rule nests this deep.
pub const MAX_NESTING: usize = 16;

/// The simple commands `line` runs, in order.
pub fn simple_commands(line: &str) -> Result<Vec<Argv>, Unjudgeable> {
    let depth = nesting(line);
    if depth > MAX_NESTING {
        return Err(Unjudgeable(format!(
            "it nests {depth} levels of parentheses or braces (more than {MAX_NESTING})"
        )));
    }
    let mut parser = Parser::new(
        std::io::Cursor::new(line.as_bytes()),
        &ParserOptions::default(),
    );
    let program: Program = parser
        .parse_program()
        .map_err(|e| Unjudgeable(format!("it does not parse ({e})")))?;
    let mut out = Vec::new();
    for list in &program.complete_commands {
        walk_list(list, &mut out)?;
    }
    if out.is_empty() {
        return Err(Unjudgeable("it runs no command".into()));
    }
    Ok(out)
}

/// The deepest nesting of `(` and `{` in `line`, not counting quoted or escaped ones (an
/// unclosed one counts, which is what makes the parser slow).
fn nesting(line: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut chars = line.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => {
                chars.next();
            }
            (Some('"'), '"') => quote = None,
            (Some('"'), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (None, ')' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

fn walk_list(list: &CompoundList, out: &mut Vec<Argv>) -> Result<(), Unjudgeable> {
    for item in &list.0 {
        let and_or = &item.0;
        let pipelines =
            std::iter::once(&and_or.first).chain(and_or.additional.iter().map(|a| match a {
                brush_parser::ast::AndOr::And(p) | brush_parser::ast::AndOr::Or(p) => p,
            }));
        for pipeline in pipelines {
            for command in &pipeline.seq {
                walk_command(command, out)?;
            }
        }
    }
    Ok(())
}

fn walk_command(command: &Command, out: &mut Vec<Argv>) -> Result<(), Unjudgeable> {
    match command {
        Command::Simple(simple) => {
            if let Some(argv) = simple_argv(simple)? {
                out.push(argv);
            }
            Ok(())
        }
        Command::Compound(compound, redirects) => {
            if let Some(list) = redirects {
                for r in &list.0 {
                    check_redirect(r)?;
                }
            }
            match compound {
                CompoundCommand::Subshell(s) => walk_list(&s.list, out),
                CompoundCommand::BraceGroup(b) => walk_list(&b.list, out),
                _ => Err(Unjudgeable(
                    "it uses a loop, a conditional or arithmetic".into(),
                )),
            }
        }
        Command::Function(_) => Err(Unjudgeable("it defines a function".into())),
        Command::ExtendedTest(..) => Err(Unjudgeable("it uses [[ ... ]]".into())),
    }
}

fn check_redirect(r: &IoRedirect) -> Result<(), Unjudgeable> {
    match r {
        IoRedirect::File(_, _, IoFileRedirectTarget::ProcessSubstitution(..)) => {
            Err(Unjudgeable("it uses process substitution".into()))
        }
        IoRedirect::File(_, _, IoFileRedirectTarget::Filename(w))
        | IoRedirect::OutputAndError(w, _)
        | IoRedirect::HereString(_, w) => unquote(&w.value).map(|_| ()),
        _ => Ok(()),
    }
}

/// The words of a simple command, or `None` for a bare assignment / redirection.
fn simple_argv(simple: &SimpleCommand) -> Result<Option<Argv>, Unjudgeable> {
    let mut words = Vec::new();
    let items = simple
        .prefix
        .iter()
        .flat_map(|p| p.0.iter())
        .map(Some)
        .chain(std::iter::once(None))
        .chain(simple.suffix.iter().flat_map(|s| s.0.iter()).map(Some));
    for item in items {
        match item {
            None => {
                if let Some(name) = &simple.word_or_name {
                    words.push(unquote(&name.value)?);
                }
            }
            Some(CommandPrefixOrSuffixItem::Word(w)) => words.push(unquote(&w.value)?),
            Some(CommandPrefixOrSuffixItem::AssignmentWord(_, w)) => {
                // `X=$(cmd) ls` runs `cmd`: judge the value too.
                unquote(&w.value)?;
            }
            Some(CommandPrefixOrSuffixItem::IoRedirect(r)) => check_redirect(r)?,
            Some(CommandPrefixOrSuffixItem::ProcessSubstitution(..)) => {
                return Err(Unjudgeable("it uses process substitution".into()));
            }
        }
    }
    // `env [-i] [NAME=VALUE]... cmd ...` runs `cmd`.
    while words.first().is_some_and(|w| w == "env") {
        let mut i = 1;
        while i < words.len() && (words[i].starts_with('-') || is_assignment(&words[i])) {
            i += 1;
        }
        words.drain(..i);
    }
    if words.is_empty() {
        return Ok(None);
    }
    Ok(Some(words))
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// The literal text of a word: quotes removed, backslash escapes resolved. A word with an
/// expansion that runs code or whose value is unknown (`$(`, backticks, `$VAR`, `${...}`,
/// `<(`) is unjudgeable.
fn unquote(raw: &str) -> Result<String, Unjudgeable> {
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    let mut in_single = false;
    let mut in_double = false;
    while let Some(c) = chars.next() {
        match c {
            '\'' if !in_double => in_single = !in_single,
            '"' if !in_single => in_double = !in_double,
            '\\' if !in_single => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '`' if !in_single => {
                return Err(Unjudgeable(
                    "it uses command substitution (backticks)".into(),
                ));
            }
            '$' if !in_single => {
                return Err(Unjudgeable(if chars.peek() == Some(&'(') {
                    "it uses command substitution ($(...))".into()
                } else {
                    "it expands a variable".into()
                }));
            }
            '<' | '>' if !in_single && !in_double && chars.peek() == Some(&'(') => {
                return Err(Unjudgeable("it uses process substitution".into()));
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmds(line: &str) -> Vec<Vec<&'static str>> {
        simple_commands(line)
            .unwrap()
            .into_iter()
            .map(|argv| {
                argv.into_iter()
                    .map(|w| &*Box::leak(w.into_boxed_str()))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn splits_per_simple_command() {
        assert_eq!(
            cmds("ls; rm -rf x"),
            vec![vec!["ls"], vec!["rm", "-rf", "x"]]
        );
        assert_eq!(cmds("cat a | sh"), vec![vec!["cat", "a"], vec!["sh"]]);
        assert_eq!(
            cmds("git status && git push\nmake"),
            vec![vec!["git", "status"], vec!["git", "push"], vec!["make"]]
        );
        assert_eq!(
            cmds("(cd x && rm y) || { echo no; }"),
            vec![vec!["cd", "x"], vec!["rm", "y"], vec!["echo", "no"]]
        );
        assert_eq!(
            cmds("env X=1 FOO=bar rm -rf /"),
            vec![vec!["rm", "-rf", "/"]]
        );
        assert_eq!(cmds("X=1 ls 'a b' > out.txt 2>&1"), vec![vec!["ls", "a b"]]);
        assert_eq!(
            cmds("echo \"hi there\" \\; done"),
            vec![vec!["echo", "hi there", ";", "done"]]
        );
    }

    #[test]
    fn substitutions_and_control_flow_are_unjudgeable() {
        for line in [
            "echo $(rm -rf x)",
            "echo `rm -rf x`",
            "X=$(rm x) ls",
            "ls > $(echo f)",
            "diff <(ls) <(ls b)",
            "$CMD arg",
            "for f in *; do rm $f; done",
            "f() { rm x; }; f",
            "if true; then rm x; fi",
            "",
            "echo 'unterminated",
        ] {
            assert!(simple_commands(line).is_err(), "{line:?} was judged");
        }
    }

    /// Runs `f` on a thread and fails the test when it does not return within a generous
    /// bound (a hang fails instead of stalling the suite).
    fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(30))
            .expect("the parse did not end")
    }

    /// fuzz (approval_rules, cargo-fuzz 600 s): a line of 57 unclosed `(` kept brush-parser
    /// busy for minutes (its time grows exponentially with the nesting): a model's command line
    /// hung the approval rules and plan mode's read-only check. Found as
    /// `(((((…(((((n[`; now refused at once as too deeply nested.
    #[test]
    fn deep_nesting_is_refused_without_parsing() {
        let line = format!("{}n[", "(".repeat(60));
        let err = bounded(move || simple_commands(&line)).unwrap_err();
        assert!(err.0.contains("nests 60 levels"), "{err}");
        // At the limit the parser still answers within the bound.
        for open in ["(", "{ "] {
            let line = format!("{}echo hi", open.repeat(MAX_NESTING));
            // (unclosed, so it does not parse: what matters is that it returns)
            assert!(bounded(move || simple_commands(&line)).is_err());
        }
        // Quoted parentheses are text, not nesting.
        let quoted = format!("echo '{}' \"{}\"", "(".repeat(40), "(".repeat(40));
        assert_eq!(cmds(&quoted).len(), 1);
        assert_eq!(cmds("(cd a && (ls; (pwd)))").len(), 3);
    }
}
