//! The inline-size policy: an accepted all-text result over the cap is saved to a
//! session-private file and replaced by a head+tail preview plus a notice naming the file.
//! Skipped for `read` (no read → spill → read loop), for failures, and when saving fails.

use std::io::Write;

use dsh_llm::ContentBlock;

use crate::def::{ToolResult, create_private_file, dir_size};
use crate::registry::Registry;
use crate::vocab::ToolRequest;

/// Apply the policy to `result` (returned unchanged when it does not apply).
pub(crate) fn apply(registry: &Registry, req: &ToolRequest, result: ToolResult) -> ToolResult {
    let cap = registry.max_inline_bytes;
    if cap == 0 || result.is_error || result.name == "read" {
        return result;
    }
    let Some(texts) = result
        .content
        .iter()
        .map(ContentBlock::as_text)
        .collect::<Option<Vec<&str>>>()
    else {
        return result;
    };
    let total: usize = texts.iter().map(|t| t.len()).sum();
    if total <= cap {
        return result;
    }
    let full = texts.concat();
    let Some(dir) = registry.scratch_dir(req) else {
        tracing::warn!(tool = %result.name, "no scratch directory for an oversized tool result; kept inline");
        return result;
    };
    if let Some(session_cap) = req.scratch_cap
        && dir_size(&dir).saturating_add(full.len() as u64) > session_cap
    {
        tracing::warn!(tool = %result.name, session_cap, "session spill storage full; oversized result not saved");
        let preview = preview(&full, cap, |omitted| {
            format!(
                "(Omitted {omitted} bytes. The full result was not saved: this session's spill files reached their cap of {session_cap} bytes.)"
            )
        });
        return ToolResult {
            content: vec![ContentBlock::text(preview)],
            ..result
        };
    }
    let saved =
        create_private_file(&dir, "result", &req.call_id, "txt").and_then(|(mut f, path)| {
            f.write_all(full.as_bytes())?;
            f.flush()?;
            Ok(path)
        });
    let path = match saved {
        Ok(path) => path,
        Err(e) => {
            tracing::warn!(tool = %result.name, error = %e, "could not save an oversized tool result; kept inline");
            return result;
        }
    };
    let path = path.display().to_string();
    let preview = preview(&full, cap, |omitted| {
        format!(
            "(Omitted {omitted} bytes. Full formatted result stored at: {path}. Use read with offset/limit, or grep this path to search within it.)"
        )
    });
    ToolResult {
        content: vec![ContentBlock::text(preview)],
        ..result
    }
}

/// Head and tail of `full` (budget split evenly, cut on char boundaries) around the notice
/// `notice(omitted bytes)`, the whole within `cap` bytes.
pub(crate) fn preview(full: &str, cap: usize, notice: impl Fn(usize) -> String) -> String {
    // The notice with the largest possible count bounds its own length.
    let reserve = notice(full.len()).len() + 4;
    let budget = cap.saturating_sub(reserve);
    let mut head = budget / 2;
    while !full.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = full.len() - (budget - budget / 2);
    while !full.is_char_boundary(tail) {
        tail += 1;
    }
    let omitted = tail - head;
    format!(
        "{}\n\n{}\n\n{}",
        &full[..head],
        notice(omitted),
        &full[tail..]
    )
}

#[cfg(test)]
mod tests {
    use super::preview;

    #[test]
    fn preview_stays_within_the_cap_on_char_boundaries() {
        let full = "é".repeat(40_000);
        let p = preview(&full, 50_000, |omitted| {
            format!(
                "(Omitted {omitted} bytes. Full formatted result stored at: /tmp/x.txt. Use read with offset/limit, or grep this path to search within it.)"
            )
        });
        assert!(p.len() <= 50_000, "{}", p.len());
        assert!(p.starts_with("éé"));
        assert!(p.ends_with("éé"));
        assert!(p.contains("\n\n(Omitted "));
        assert!(p.contains(" bytes. Full formatted result stored at: /tmp/x.txt. Use read with offset/limit, or grep this path to search within it.)\n\n"));
    }
}
