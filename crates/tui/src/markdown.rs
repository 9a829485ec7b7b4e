//! Markdown: an incremental splitter for streamed text and a renderer (pulldown-cmark) to
//! styled lines.
//!
//! [`MarkdownStream`] cuts the text into top-level blocks as they complete (a blank line
//! outside a fence, a heading line, every line of a fenced code block), so each completed block
//! is parsed and rendered once and goes to the scrollback; only the open tail block is
//! re-rendered on a frame. Every byte is scanned once: total work stays linear in the length of
//! the answer (a single paragraph or list without blank lines is the exception: it stays the open
//! block until it ends).

use crate::fence::{fence_open, is_container, is_fence_close, strip_container};
use crate::highlight::CodeHighlighter;
use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use crate::theme::Theme;
use crate::wrap;

/// A completed piece of a streamed message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// A top-level markdown block (paragraph, list, table, heading, quote, …).
    Block(String),
    /// A fenced code block opens (its info string, e.g. `rust`).
    CodeOpen(String),
    /// One line of a fenced code block (without its newline).
    Code(String),
    /// The fenced code block closed.
    CodeClose,
}

/// Splits streamed markdown into completed [`Piece`]s.
#[derive(Debug, Default)]
pub struct MarkdownStream {
    buf: String,
    /// Start of the open block.
    block_start: usize,
    /// Start of the first line not yet scanned (always at a line start).
    scan: usize,
    /// The open fence: its character and length.
    fence: Option<(char, usize)>,
    /// A fence open inside the open block (in a list item or a quote): the block stays open
    /// until it closes (blank lines in it do not end the block).
    nested: Option<(char, usize)>,
}

impl MarkdownStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a delta and returns the pieces it completed.
    pub fn push(&mut self, delta: &str) -> Vec<Piece> {
        self.buf.push_str(delta);
        let mut out = Vec::new();
        while let Some(nl) = self.buf[self.scan..].find('\n') {
            let line_end = self.scan + nl + 1;
            let line = self.buf[self.scan..self.scan + nl]
                .trim_end_matches('\r')
                .to_owned();
            self.line(&line, line_end, &mut out);
            self.scan = line_end;
        }
        self.compact();
        out
    }

    fn line(&mut self, line: &str, line_end: usize, out: &mut Vec<Piece>) {
        if let Some((c, n)) = self.fence {
            if is_fence_close(line, c, n) {
                self.fence = None;
                out.push(Piece::CodeClose);
            } else {
                out.push(Piece::Code(line.to_owned()));
            }
            self.block_start = line_end;
            return;
        }
        if let Some((c, n)) = self.nested {
            if is_fence_close(strip_container(line), c, n) {
                self.nested = None;
            }
            return;
        }
        let block_empty = self.buf[self.block_start..self.scan].trim().is_empty();
        // A fence inside a container (on an item's or a quote's line, or indented under an
        // open list or quote) belongs to that block.
        let in_container = !block_empty && is_container(&self.buf[self.block_start..self.scan]);
        let inner = strip_container(line);
        if (inner.len() < line.trim_start().len() || (in_container && line.starts_with(' ')))
            && let Some((c, n, _)) = fence_open(inner.trim_start())
        {
            self.nested = Some((c, n));
            return;
        }
        if let Some((c, n, info)) = fence_open(line) {
            if !block_empty {
                out.push(Piece::Block(
                    self.buf[self.block_start..self.scan].to_owned(),
                ));
            }
            self.fence = Some((c, n));
            out.push(Piece::CodeOpen(info.to_owned()));
            self.block_start = line_end;
        } else if line.trim().is_empty() {
            if !block_empty {
                out.push(Piece::Block(
                    self.buf[self.block_start..self.scan].to_owned(),
                ));
            }
            self.block_start = line_end;
        } else if block_empty && line.trim_start().starts_with('#') {
            out.push(Piece::Block(line.to_owned()));
            self.block_start = line_end;
        }
    }

    /// Drops the consumed prefix (keeps memory bounded by the open block).
    fn compact(&mut self) {
        if self.block_start > 0 && self.block_start == self.scan {
            self.buf.drain(..self.block_start);
            self.scan = 0;
            self.block_start = 0;
        } else if self.block_start > 4096 {
            self.buf.drain(..self.block_start);
            self.scan -= self.block_start;
            self.block_start = 0;
        }
    }

    /// The open block (text not yet completed), as it would render now.
    pub fn tail(&self) -> &str {
        &self.buf[self.block_start..]
    }

    /// Whether a fenced code block is open.
    pub fn in_code(&self) -> bool {
        self.fence.is_some()
    }

    /// Ends the stream: the open block (or the open code line and fence) as final pieces.
    pub fn finish(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        let tail = std::mem::take(&mut self.buf);
        let rest = &tail[self.block_start..];
        self.nested = None;
        if self.fence.take().is_some() {
            if !rest.is_empty() {
                out.push(Piece::Code(rest.trim_end_matches(['\n', '\r']).to_owned()));
            }
            out.push(Piece::CodeClose);
        } else if !rest.trim().is_empty() {
            out.push(Piece::Block(rest.to_owned()));
        }
        self.block_start = 0;
        self.scan = 0;
        out
    }
}

/// Renders a sequence of pieces to wrapped lines (blank lines between top-level blocks).
#[derive(Debug)]
pub struct PieceRenderer {
    theme: Theme,
    width: u16,
    /// Whether anything was rendered yet (a separator precedes later blocks).
    started: bool,
    /// The open fenced block's highlighter (a known language).
    code: Option<CodeHighlighter>,
}

impl PieceRenderer {
    /// A renderer for `width` columns.
    pub fn new(theme: Theme, width: u16) -> Self {
        PieceRenderer {
            theme,
            width,
            started: false,
            code: None,
        }
    }

    /// The lines of one piece.
    pub fn piece(&mut self, piece: &Piece) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        match piece {
            Piece::Block(src) => {
                if self.started {
                    out.push(Line::default());
                }
                out.extend(render(src, self.theme, self.width));
            }
            Piece::CodeOpen(info) => {
                if self.started {
                    out.push(Line::default());
                }
                out.push(code_header(info, self.theme));
                self.code = CodeHighlighter::for_info(info);
            }
            Piece::Code(line) => match &mut self.code {
                Some(h) => out.extend(code_spans(h.line(line, self.theme), self.width)),
                None => out.extend(code_line(line, self.theme, self.width)),
            },
            Piece::CodeClose => self.code = None,
        }
        self.started = true;
        out
    }

    /// Renders the open tail of a stream (without changing the renderer's state).
    pub fn tail(&self, stream: &MarkdownStream) -> Vec<Line<'static>> {
        let tail = stream.tail();
        if stream.in_code() {
            let line = tail.trim_end_matches('\n');
            return match &self.code {
                // The open line highlighted from a copy of the block's state.
                Some(h) => code_spans(h.clone().line(line, self.theme), self.width),
                None => code_line(line, self.theme, self.width),
            };
        }
        if tail.trim().is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.started {
            out.push(Line::default());
        }
        out.extend(render(tail, self.theme, self.width));
        out
    }
}

/// A whole markdown text as wrapped lines (the same output as streaming it).
pub fn render_all(src: &str, theme: Theme, width: u16) -> Vec<Line<'static>> {
    let mut stream = MarkdownStream::new();
    let mut r = PieceRenderer::new(theme, width);
    let mut out = Vec::new();
    for p in stream.push(src).iter().chain(stream.finish().iter()) {
        out.extend(r.piece(p));
    }
    out
}

fn code_header(info: &str, theme: Theme) -> Line<'static> {
    let lang = info.split_whitespace().next().unwrap_or("");
    Line::from(Span::styled(
        if lang.is_empty() {
            "  ```".to_owned()
        } else {
            format!("  ```{lang}")
        },
        theme.dim(),
    ))
}

fn code_line(line: &str, theme: Theme, width: u16) -> Vec<Line<'static>> {
    let text = line.replace('\t', "    ");
    wrap::wrap(
        vec![Line::from(vec![
            Span::raw("  "),
            Span::styled(text, theme.code()),
        ])],
        width,
        2,
    )
}

fn code_spans(spans: Vec<Span<'static>>, width: u16) -> Vec<Line<'static>> {
    let mut line = vec![Span::raw("  ")];
    line.extend(spans);
    wrap::wrap(vec![Line::from(line)], width, 2)
}

/// Renders one markdown text (one or more blocks) to wrapped lines.
pub fn render(src: &str, theme: Theme, width: u16) -> Vec<Line<'static>> {
    let mut r = Renderer::new(theme);
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for ev in Parser::new_ext(src, opts) {
        r.event(ev);
    }
    r.flush();
    let mut out = Vec::new();
    for (line, indent) in r.lines {
        out.extend(wrap::wrap(vec![line], width, indent));
    }
    out
}

struct Renderer {
    theme: Theme,
    lines: Vec<(Line<'static>, u16)>,
    cur: Vec<Span<'static>>,
    /// Hanging indent of the current line.
    indent: u16,
    styles: Vec<Style>,
    /// Open lists: the next number of an ordered list.
    lists: Vec<Option<u64>>,
    quote: usize,
    in_code: bool,
    /// The text of the open code block (emitted line by line at its end).
    code_text: String,
    /// The open code block's highlighter (a fenced block of a known language).
    code: Option<CodeHighlighter>,
    link: Option<String>,
    table: Option<Table>,
    blocks: usize,
    /// A container just opened: its first block needs no gap.
    fresh: bool,
}

#[derive(Default)]
struct Table {
    rows: Vec<Vec<String>>,
    cell: String,
    header_rows: usize,
    in_head: bool,
}

impl Renderer {
    fn new(theme: Theme) -> Self {
        Renderer {
            theme,
            lines: Vec::new(),
            cur: Vec::new(),
            indent: 0,
            styles: vec![Style::new()],
            lists: Vec::new(),
            quote: 0,
            in_code: false,
            code_text: String::new(),
            code: None,
            link: None,
            table: None,
            blocks: 0,
            fresh: false,
        }
    }

    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, f: impl FnOnce(Style) -> Style) {
        let s = f(self.style());
        self.styles.push(s);
    }

    fn prefix(&self) -> Vec<Span<'static>> {
        let mut p = Vec::new();
        for _ in 0..self.quote {
            p.push(Span::styled("▎ ", self.theme.dim()));
        }
        p
    }

    fn flush(&mut self) {
        if !self.cur.is_empty() {
            let spans = std::mem::take(&mut self.cur);
            self.lines.push((Line::from(spans), self.indent));
        }
    }

    fn text(&mut self, t: &str) {
        if let Some(table) = &mut self.table {
            table.cell.push_str(t);
            return;
        }
        if self.in_code {
            self.code_text.push_str(t);
            return;
        }
        if self.cur.is_empty() {
            self.cur.extend(self.prefix());
        }
        self.cur.push(Span::styled(t.to_owned(), self.style()));
    }

    /// The indentation of the open list item's content (none outside lists).
    fn item_pad(&self) -> String {
        if self.lists.is_empty() {
            String::new()
        } else {
            " ".repeat(usize::from(self.indent))
        }
    }

    /// The lines of the code block that just ended: quote marks, the list item's indentation,
    /// then the code (highlighted when its language is known).
    fn code_lines(&mut self) {
        let text = std::mem::take(&mut self.code_text);
        let mut code = self.code.take();
        let body = text.strip_suffix('\n').unwrap_or(&text);
        let pad = self.item_pad();
        let hang = u16::try_from(pad.len() + 2).unwrap_or(u16::MAX);
        for l in body.split('\n') {
            let mut spans = self.prefix();
            spans.push(Span::raw(format!("{pad}  ")));
            match &mut code {
                Some(h) => spans.extend(h.line(l, self.theme)),
                None => spans.push(Span::styled(l.replace('\t', "    "), self.theme.code())),
            }
            self.lines.push((Line::from(spans), hang));
        }
    }

    fn block_gap(&mut self) {
        self.flush();
        if std::mem::take(&mut self.fresh) {
            self.blocks += 1;
            return;
        }
        if self.blocks > 0 && self.lists.is_empty() {
            self.lines.push((Line::default(), 0));
        }
        self.blocks += 1;
    }

    fn event(&mut self, ev: Event<'_>) {
        match ev {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(t) => {
                if let Some(table) = &mut self.table {
                    table.cell.push_str(&t);
                    return;
                }
                let shown = if self.theme.color {
                    t.to_string()
                } else {
                    format!("`{t}`")
                };
                if self.cur.is_empty() {
                    self.cur.extend(self.prefix());
                }
                self.cur.push(Span::styled(shown, self.theme.code()));
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => {
                self.flush();
            }
            Event::Rule => {
                self.block_gap();
                self.lines
                    .push((Line::from(Span::styled("───", self.theme.dim())), 0));
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            Event::Html(h) | Event::InlineHtml(h) => self.text(h.trim_end_matches('\n')),
            Event::FootnoteReference(f) => self.text(&format!("[^{f}]")),
            Event::InlineMath(m) | Event::DisplayMath(m) => self.text(&m),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph if self.lists.is_empty() => self.block_gap(),
            Tag::Heading { level, .. } => {
                self.block_gap();
                let n = match level {
                    HeadingLevel::H1 => 1,
                    HeadingLevel::H2 => 2,
                    HeadingLevel::H3 => 3,
                    HeadingLevel::H4 => 4,
                    HeadingLevel::H5 => 5,
                    HeadingLevel::H6 => 6,
                };
                let h = self.theme.heading();
                self.styles.push(h);
                self.text(&format!("{} ", "#".repeat(n)));
            }
            Tag::BlockQuote(_) => {
                self.block_gap();
                self.quote += 1;
                self.fresh = true;
            }
            Tag::CodeBlock(kind) => {
                self.block_gap();
                let info = match kind {
                    CodeBlockKind::Fenced(i) => i.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                let mut p = self.prefix();
                p.push(Span::raw(self.item_pad()));
                p.push(code_header(&info, self.theme).spans.remove(0));
                self.lines.push((Line::from(p), 0));
                self.in_code = true;
                self.code_text.clear();
                // Nested in a list item or a quote, a fenced block is highlighted as a
                // top-level one is.
                self.code = CodeHighlighter::for_info(&info);
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.block_gap();
                } else {
                    self.flush();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => "- ".to_owned(),
                };
                let pad = "  ".repeat(depth);
                self.indent = (pad.len() + marker.len()) as u16;
                self.cur.extend(self.prefix());
                self.cur.push(Span::raw(pad));
                self.cur.push(Span::styled(marker, self.theme.dim()));
            }
            Tag::Emphasis => self.push_style(|s| s.add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(|s| s.add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(|s| s.add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } => {
                let l = self.theme.link();
                self.styles.push(l);
                self.link = Some(dest_url.to_string());
            }
            Tag::Image { dest_url, .. } => {
                self.text("[image: ");
                self.link = Some(dest_url.to_string());
            }
            Tag::Table(_) => {
                self.block_gap();
                self.table = Some(Table::default());
            }
            Tag::TableHead => {
                if let Some(t) = &mut self.table {
                    t.in_head = true;
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableRow => {
                if let Some(t) = &mut self.table {
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(t) = &mut self.table {
                    t.cell.clear();
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.flush(),
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.flush();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote = self.quote.saturating_sub(1);
            }
            TagEnd::CodeBlock => {
                self.flush();
                self.in_code = false;
                self.code_lines();
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.indent = 0;
                }
            }
            TagEnd::Item => self.flush(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.styles.pop();
            }
            TagEnd::Link => {
                self.styles.pop();
                if let Some(url) = self.link.take() {
                    let shown: String = self.cur.iter().map(|s| s.content.as_ref()).collect();
                    if !shown.ends_with(url.as_str()) {
                        self.cur
                            .push(Span::styled(format!(" ({url})"), self.theme.dim()));
                    }
                }
            }
            TagEnd::Image => {
                let url = self.link.take().unwrap_or_default();
                self.text(&format!(" {url}]"));
            }
            TagEnd::TableCell => {
                if let Some(t) = &mut self.table {
                    let cell = std::mem::take(&mut t.cell);
                    if let Some(row) = t.rows.last_mut() {
                        row.push(cell.trim().to_owned());
                    }
                }
            }
            TagEnd::TableHead => {
                if let Some(t) = &mut self.table {
                    t.in_head = false;
                    t.header_rows = t.rows.len();
                }
            }
            TagEnd::Table => {
                if let Some(t) = self.table.take() {
                    self.table_lines(t);
                }
            }
            _ => {}
        }
    }

    fn table_lines(&mut self, t: Table) {
        let cols = t.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0usize; cols];
        for row in &t.rows {
            for (i, c) in row.iter().enumerate() {
                widths[i] = widths[i].max(wrap::width(c));
            }
        }
        let sep = Span::styled(" │ ", self.theme.dim());
        for (r, row) in t.rows.iter().enumerate() {
            let mut spans = self.prefix();
            for (i, w) in widths.iter().enumerate() {
                if i > 0 {
                    spans.push(sep.clone());
                }
                let c = row.get(i).map(String::as_str).unwrap_or("");
                let pad = w - wrap::width(c);
                let style = if r < t.header_rows {
                    Style::new().add_modifier(Modifier::BOLD)
                } else {
                    Style::new()
                };
                spans.push(Span::styled(format!("{c}{}", " ".repeat(pad)), style));
            }
            self.lines.push((Line::from(spans), 0));
            if r + 1 == t.header_rows {
                let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
                let mut spans = self.prefix();
                spans.push(Span::styled(rule.join("─┼─"), self.theme.dim()));
                self.lines.push((Line::from(spans), 0));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> String {
        lines
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn stream_completes_blocks_at_blank_lines_headings_and_code_lines() {
        let mut s = MarkdownStream::new();
        assert!(s.push("Hello wor").is_empty());
        assert_eq!(s.tail(), "Hello wor");
        assert!(s.push("ld\n").is_empty());
        assert_eq!(
            s.push("\n# Title\n"),
            [
                Piece::Block("Hello world\n".into()),
                Piece::Block("# Title".into())
            ]
        );
        assert_eq!(
            s.push("```rust\nfn main() {}\n"),
            [
                Piece::CodeOpen("rust".into()),
                Piece::Code("fn main() {}".into())
            ]
        );
        assert!(s.in_code());
        assert_eq!(s.push("```\nafter"), [Piece::CodeClose]);
        assert_eq!(s.finish(), [Piece::Block("after".into())]);
    }

    #[test]
    fn streaming_in_any_split_renders_like_the_whole_text() {
        let text = "# Plan\n\nSome *text* with `code` and a [link](http://x.y).\n\n- one\n- two\n  - nested\n\n1. first\n2. second\n\n| a | b |\n|---|---|\n| 1 | 22 |\n\n```sh\necho hi\n```\n\n> quoted\n";
        let whole = plain(&render_all(text, Theme::PLAIN, 60));
        for step in [1, 2, 3, 7, 13] {
            let mut s = MarkdownStream::new();
            let mut r = PieceRenderer::new(Theme::PLAIN, 60);
            let mut out = Vec::new();
            let chars: Vec<char> = text.chars().collect();
            for chunk in chars.chunks(step) {
                let d: String = chunk.iter().collect();
                for p in s.push(&d) {
                    out.extend(r.piece(&p));
                }
            }
            for p in s.finish() {
                out.extend(r.piece(&p));
            }
            assert_eq!(plain(&out), whole, "split every {step} chars");
        }
        insta::assert_snapshot!(whole);
    }

    #[test]
    fn memory_is_bounded_by_the_open_block() {
        let mut s = MarkdownStream::new();
        for _ in 0..1000 {
            s.push("a paragraph of text\n\n");
        }
        assert!(s.buf.len() < 64, "{}", s.buf.len());
        s.push("```\n");
        for _ in 0..1000 {
            s.push("code line\n");
        }
        assert!(s.buf.len() < 64, "{}", s.buf.len());
    }
}
