//! Word wrapping of styled lines to a width (display columns, not bytes), so the height of a
//! cell is known before it is inserted into the scrollback.

use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Wraps each line to `width` columns: at spaces where possible, inside a word when a word is
/// longer than the line. Continuation lines start with `indent` spaces.
pub fn wrap(lines: Vec<Line<'static>>, width: u16, indent: u16) -> Vec<Line<'static>> {
    let width = usize::from(width.max(4));
    let indent = usize::from(indent).min(width / 2);
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        wrap_line(line, width, indent, &mut out);
    }
    out
}

fn wrap_line(line: Line<'static>, width: usize, indent: usize, out: &mut Vec<Line<'static>>) {
    let total: usize = line.spans.iter().map(|s| s.width()).sum();
    if total <= width {
        out.push(line);
        return;
    }
    let style = line.style;
    // Split into (text, style) words keeping separators attached to the preceding word.
    let mut cur: Vec<Span<'static>> = Vec::new();
    let mut cur_w = 0usize;
    let push_line = |cur: &mut Vec<Span<'static>>, out: &mut Vec<Line<'static>>| {
        let mut spans = std::mem::take(cur);
        let n = spans.len();
        while let Some(last) = spans.last_mut() {
            let t = last.content.trim_end_matches(' ').to_owned();
            if t.is_empty() && n > 1 {
                spans.pop();
                if spans.len() <= 1 {
                    break;
                }
                continue;
            }
            if t.len() != last.content.len() {
                last.content = t.into();
            }
            break;
        }
        out.push(Line::from(spans).style(style));
    };
    let mut first = true;
    for span in line.spans {
        let s_style = span.style;
        let text = span.content.into_owned();
        for word in split_words(&text) {
            let w: usize = word.chars().map(|c| c.width().unwrap_or(0)).sum();
            let avail = width;
            if cur_w + w <= avail {
                cur.push(Span::styled(word.to_owned(), s_style));
                cur_w += w;
                continue;
            }
            let trimmed = word.trim_end();
            let tw: usize = trimmed.chars().map(|c| c.width().unwrap_or(0)).sum();
            if cur_w + tw <= avail && !trimmed.is_empty() {
                cur.push(Span::styled(trimmed.to_owned(), s_style));
                push_line(&mut cur, out);
                first = false;
                cur.push(Span::raw(" ".repeat(indent)));
                cur_w = indent;
                continue;
            }
            if cur_w > if first { 0 } else { indent } {
                push_line(&mut cur, out);
                first = false;
                cur.push(Span::raw(" ".repeat(indent)));
                cur_w = indent;
            }
            // The word alone: hard-split when it does not fit a line.
            let mut piece = String::new();
            for c in word.chars() {
                let cw = c.width().unwrap_or(0);
                let avail = width;
                if cur_w + cw > avail {
                    cur.push(Span::styled(std::mem::take(&mut piece), s_style));
                    push_line(&mut cur, out);
                    first = false;
                    cur.push(Span::raw(" ".repeat(indent)));
                    cur_w = indent;
                }
                piece.push(c);
                cur_w += cw;
            }
            if !piece.is_empty() {
                cur.push(Span::styled(piece, s_style));
            }
        }
    }
    if !cur.is_empty() {
        push_line(&mut cur, out);
    }
}

/// Words with their trailing spaces.
fn split_words(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest
            .find(' ')
            .map(|i| {
                let after = &rest[i..];
                i + (after.len() - after.trim_start_matches(' ').len())
            })
            .unwrap_or(rest.len());
        let (word, tail) = rest.split_at(end);
        rest = tail;
        Some(word)
    })
}

/// Display width of a string.
pub fn width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// `s` cut to at most `max` columns, with `…` when cut.
pub fn truncate(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_owned();
    }
    let mut out = String::new();
    let mut w = 0;
    for c in s.chars() {
        let cw = c.width().unwrap_or(0);
        if w + cw + 1 > max {
            break;
        }
        out.push(c);
        w += cw;
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn wraps_at_spaces_and_splits_long_words() {
        let out = wrap(vec![Line::from("alpha beta gamma delta")], 11, 0);
        assert_eq!(text(&out), ["alpha beta", "gamma delta"]);
        let out = wrap(vec![Line::from("abcdefghijklmnop")], 6, 0);
        assert_eq!(text(&out), ["abcdef", "ghijkl", "mnop"]);
        let out = wrap(vec![Line::from("- one two three")], 8, 2);
        assert_eq!(text(&out), ["- one", "  two", "  three"]);
    }

    #[test]
    fn wide_characters_count_two_columns() {
        let out = wrap(vec![Line::from("日本語のテキスト")], 6, 0);
        assert_eq!(text(&out), ["日本語", "のテキ", "スト"]);
        assert_eq!(truncate("日本語", 5), "日本…");
    }
}
