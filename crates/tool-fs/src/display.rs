//! How the fs tools' calls look to a person: the path (or pattern), the diff of an edit or a
//! write, and once they ended a one-line result (`3 lines`, `created, 2 lines`, `7 matches in
//! 3 files`).

use dsh_tools::{DisplayInput, FileDiff, OutputSummary, ToolDisplay, ToolKind};
use serde::Deserialize;
use serde_json::Value;

use crate::plugin::FsTool;

/// What a display reads of the arguments (leniently: a malformed call shows what it can).
#[derive(Default, Deserialize)]
#[serde(default)]
struct Shown {
    file_path: Option<String>,
    path: Option<String>,
    pattern: Option<String>,
    content: Option<String>,
    old_string: Option<String>,
    new_string: Option<String>,
}

/// The display of a call of `tool`.
pub fn display(tool: FsTool, call: &DisplayInput<'_>) -> ToolDisplay {
    use dsh_tools::Tool;
    let args: Shown = call.parse().unwrap_or_default();
    let meta_u64 = |key: &str| call.meta_field(key).and_then(Value::as_u64);
    let kind = match tool {
        FsTool::Read => ToolKind::Read,
        FsTool::Write => ToolKind::Write,
        FsTool::Edit => ToolKind::Edit,
        FsTool::Glob | FsTool::Grep => ToolKind::Search,
    };
    let mut d = ToolDisplay::new(kind, tool.name());
    let ok = call.succeeded();
    let headline = match tool {
        FsTool::Read | FsTool::Write | FsTool::Edit => {
            let path = match tool {
                FsTool::Read => args.file_path.or(args.path),
                _ => args.file_path,
            }
            .unwrap_or_default();
            if !path.is_empty() {
                d = d.with_location(path.clone(), None);
            }
            d.subject = Some(path.clone());
            match tool {
                FsTool::Read => ok.map(|r| format!("{} lines", r.text.lines().count())),
                FsTool::Write => {
                    let content = args.content.unwrap_or_default();
                    let n = content.lines().count();
                    d.diff = Some(FileDiff {
                        path,
                        old_text: None,
                        new_text: content,
                    });
                    ok.map(|_| {
                        let verb = match call.meta_field("created").and_then(Value::as_bool) {
                            Some(true) => "created",
                            Some(false) => "replaced",
                            None => "written",
                        };
                        format!("{verb}, {n} lines")
                    })
                }
                _ => {
                    d.diff = Some(FileDiff {
                        path,
                        old_text: Some(args.old_string.unwrap_or_default()),
                        new_text: args.new_string.unwrap_or_default(),
                    });
                    meta_u64("replacements")
                        .filter(|&n| n > 1)
                        .map(|n| format!("{n} replacements"))
                }
            }
        }
        FsTool::Glob => {
            d.subject = Some(args.pattern.unwrap_or_default());
            meta_u64("count").map(|n| format!("{n} files"))
        }
        FsTool::Grep => {
            d.subject = Some(args.pattern.unwrap_or_default());
            match (meta_u64("matches"), meta_u64("files")) {
                (Some(m), Some(f)) => Some(format!("{m} matches in {f} files")),
                _ => None,
            }
        }
    };
    if ok.is_some() {
        d.output = Some(OutputSummary {
            headline: headline.filter(|_| ok.is_some()),
            truncated: call.meta_field("truncated").and_then(Value::as_bool) == Some(true),
            ..Default::default()
        });
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_tools::DisplayResult;
    use serde_json::json;

    fn ended(tool: FsTool, args: Value, text: &str, meta: Value) -> ToolDisplay {
        let args = args.to_string();
        display(
            tool,
            &DisplayInput::new("x", &args)
                .with_result(DisplayResult::ok(text).with_meta(Some(&meta))),
        )
    }

    #[test]
    fn each_tool_shows_its_path_or_pattern_and_a_one_line_result() {
        let read = ended(
            FsTool::Read,
            json!({"file_path": "src/main.rs"}),
            "1\n2\n3\n",
            json!({}),
        );
        assert_eq!((read.kind, read.title.as_str()), (ToolKind::Read, "read"));
        assert_eq!(read.subject.as_deref(), Some("src/main.rs"));
        assert_eq!(read.locations[0].path, "src/main.rs");
        assert_eq!(read.output.unwrap().headline.as_deref(), Some("3 lines"));

        let grep = ended(
            FsTool::Grep,
            json!({"pattern": "TODO"}),
            "a:1",
            json!({"matches": 7, "files": 3}),
        );
        assert_eq!(grep.kind, ToolKind::Search);
        assert_eq!(grep.subject.as_deref(), Some("TODO"));
        assert_eq!(
            grep.output.unwrap().headline.as_deref(),
            Some("7 matches in 3 files")
        );

        let glob = ended(
            FsTool::Glob,
            json!({"pattern": "**/*.rs"}),
            "a.rs",
            json!({"count": 12}),
        );
        assert_eq!(glob.output.unwrap().headline.as_deref(), Some("12 files"));

        let write = ended(
            FsTool::Write,
            json!({"file_path": "new.txt", "content": "hello\nworld\n"}),
            "Created",
            json!({"created": true}),
        );
        assert_eq!(write.kind, ToolKind::Write);
        assert_eq!(
            write.output.unwrap().headline.as_deref(),
            Some("created, 2 lines")
        );
        let diff = write.diff.unwrap();
        assert_eq!(
            (diff.old_text, diff.new_text.as_str()),
            (None, "hello\nworld\n")
        );
    }

    #[test]
    fn an_edit_carries_its_diff_from_the_call_and_counts_replacements() {
        let args = json!({"file_path": "x.rs", "old_string": "a", "new_string": "b"}).to_string();
        let call = DisplayInput::new("edit", &args);
        let running = display(FsTool::Edit, &call);
        assert_eq!(running.kind, ToolKind::Edit);
        let diff = running.diff.unwrap();
        assert_eq!(diff.path, "x.rs");
        assert_eq!(diff.old_text.as_deref(), Some("a"));
        assert_eq!(diff.new_text, "b");
        assert!(running.output.is_none());
        let meta = json!({"replacements": 3});
        let all = display(
            FsTool::Edit,
            &call.with_result(DisplayResult::ok("ok").with_meta(Some(&meta))),
        );
        assert_eq!(
            all.output.unwrap().headline.as_deref(),
            Some("3 replacements")
        );
        let failed = display(
            FsTool::Edit,
            &call.with_result(DisplayResult::error(
                "must read first",
                Some("FS_NOT_OBSERVED"),
            )),
        );
        assert!(failed.output.is_none());
    }
}
