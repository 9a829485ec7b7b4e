//! Line-level fence and container recognition for the markdown stream: a fenced block's
//! opening and closing lines, and the quote / list markers in front of a nested one.

/// A fence opening line (at most 3 spaces of indentation): its character, length and info.
pub(crate) fn fence_open(line: &str) -> Option<(char, usize, &str)> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 {
        return None;
    }
    let c = t.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = t.chars().take_while(|&x| x == c).count();
    if n < 3 {
        return None;
    }
    let info = t[n..].trim();
    if c == '`' && info.contains('`') {
        return None;
    }
    Some((c, n, info))
}

/// `line` without its leading container markers: indentation, `>` quote marks, list markers
/// (`-`, `*`, `+`, `1.`, `1)`) followed by a space.
pub(crate) fn strip_container(line: &str) -> &str {
    let mut rest = line.trim_start();
    loop {
        if let Some(r) = rest.strip_prefix('>') {
            rest = r.trim_start();
            continue;
        }
        if let Some(r) = list_marker(rest) {
            rest = r.trim_start();
            continue;
        }
        return rest;
    }
}

/// The text after a list marker and its space, when `s` starts with one.
fn list_marker(s: &str) -> Option<&str> {
    if let Some(r) = s.strip_prefix(['-', '*', '+'])
        && r.starts_with(' ')
    {
        return Some(r);
    }
    let digits = s.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    let r = s[digits..].strip_prefix(['.', ')'])?;
    r.starts_with(' ').then_some(r)
}

/// Whether the block `text` is a list or a quote (its first line starts with a marker).
pub(crate) fn is_container(text: &str) -> bool {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let t = first.trim_start();
    t.starts_with('>') || list_marker(t).is_some()
}

/// Whether `line` closes a fence of `n` or more `c`.
pub(crate) fn is_fence_close(line: &str, c: char, n: usize) -> bool {
    let t = line.trim();
    t.len() >= n && t.chars().all(|x| x == c)
}
