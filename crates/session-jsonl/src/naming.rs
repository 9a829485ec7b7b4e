//! Directory and file naming (format §1.2–§1.4).

/// `projectKey(cwd)` (format §1.2): lossy, ASCII, at most 251 characters.
pub fn project_key(cwd: &str) -> String {
    let mut out = String::new();
    let mut prev_sep = false;
    for unit in cwd.encode_utf16() {
        let sep = matches!(unit, 0x2F | 0x5C | 0x3A); // / \ :
        if sep {
            if !prev_sep {
                out.push('-');
            }
            prev_sep = true;
            continue;
        }
        prev_sep = false;
        push_unit(&mut out, unit);
    }
    let trimmed = out.trim_start_matches('-');
    let key = if trimmed.is_empty() { "root" } else { trimmed };
    key.chars().take(251).collect()
}

/// The project directory name: `--<key>--`, or `_no-cwd` without a cwd.
pub fn project_dir(cwd: Option<&str>) -> String {
    match cwd {
        Some(c) if !c.is_empty() => format!("--{}--", project_key(c)),
        _ => "_no-cwd".to_string(),
    }
}

fn push_unit(out: &mut String, unit: u16) {
    let keep = unit < 0x80 && {
        let c = unit as u8 as char;
        c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
    };
    if keep {
        out.push(unit as u8 as char);
    } else {
        out.push_str(&format!("~{unit:04X}"));
    }
}

/// `encodeSegment(id)` (format §1.3): injective, no traversal.
pub fn encode_segment(id: &str) -> String {
    if id == "." {
        return "~002E".into();
    }
    if id == ".." {
        return "~002E~002E".into();
    }
    let mut out = String::new();
    for unit in id.encode_utf16() {
        push_unit(&mut out, unit);
    }
    out
}

/// Parses a canonical generation file name (format §1.4): `(version, zstd)`.
pub fn parse_generation(name: &str) -> Option<(u64, bool)> {
    let (base, zstd) = match name.strip_suffix(".zstd") {
        Some(b) => (b, true),
        None => (name, false),
    };
    let stem = base.strip_prefix("session")?.strip_suffix(".jsonl")?;
    if stem.is_empty() {
        return Some((0, zstd));
    }
    let digits = stem.strip_prefix(".v")?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(|n| (n, zstd))
}

/// The plain file name of generation `n`.
pub fn generation_file(n: u64) -> String {
    if n == 0 {
        "session.jsonl".into()
    } else {
        format!("session.v{n}.jsonl")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_keys_of_the_reference() {
        let cases = [
            ("/home/u/proj", "--home-u-proj--"),
            ("/", "--root--"),
            ("/srv/my app", "--srv-my~0020app--"),
            ("/données", "--donn~00E9es--"),
            ("/srv/~x", "--srv-~007Ex--"),
            ("/a-/b", "--a--b--"),
            ("C:\\Users\\me\\x", "--C-Users-me-x--"),
        ];
        for (cwd, dir) in cases {
            assert_eq!(project_dir(Some(cwd)), dir, "{cwd}");
        }
        assert_eq!(project_dir(None), "_no-cwd");
        assert_eq!(project_key(&"/a".repeat(300)).len(), 251);
    }

    #[test]
    fn segments_of_the_reference() {
        let cases = [
            (
                "session-0190d0a2-7c1e-7b3a-9f3e-2d1c4b5a6e7f",
                "session-0190d0a2-7c1e-7b3a-9f3e-2d1c4b5a6e7f",
            ),
            ("main-session-1", "main-session-1"),
            ("a/b", "a~002Fb"),
            ("a b", "a~0020b"),
            ("~x", "~007Ex"),
            ("é", "~00E9"),
            ("😀", "~D83D~DE00"),
            ("..", "~002E~002E"),
            (".", "~002E"),
        ];
        for (id, dir) in cases {
            assert_eq!(encode_segment(id), dir, "{id}");
        }
    }

    #[test]
    fn generation_names() {
        assert_eq!(parse_generation("session.jsonl"), Some((0, false)));
        assert_eq!(parse_generation("session.v4.jsonl"), Some((4, false)));
        assert_eq!(parse_generation("session.v12.jsonl.zstd"), Some((12, true)));
        assert_eq!(parse_generation("session.v03.jsonl"), None);
        assert_eq!(parse_generation("session.v0.jsonl"), None);
        assert_eq!(parse_generation("session.lock"), None);
        assert_eq!(parse_generation("session.V4.jsonl"), None);
        assert_eq!(generation_file(4), "session.v4.jsonl");
    }
}
