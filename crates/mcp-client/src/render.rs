//! Rendering of a `tools/call` result as the model-visible text (upstream §4.5).

use dsh_llm::ImageRef;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use crate::images::{ImageSink, SinkRefusal};

/// The model-visible text of `result` for the tool the model knows as `tool`, with no image
/// store: [`render_with`] describing every image.
pub fn render_result(tool: &str, result: &CallToolResult) -> String {
    render_with(tool, result, &ImageSink::refusing(SinkRefusal::NoStore)).0
}

/// The model-visible text of `result` for the tool the model knows as `tool`, and the images
/// `images` admitted (in order; they follow the text as image blocks): text blocks joined by
/// `\n`; `Resource link: <name> (<uri>)` for links; an image, or an embedded image resource,
/// the sink refuses as `[image <type> (<n> bytes base64) not shown: <why>]`; bracketed
/// diagnostics for audio and other embedded resources (their text, when they have one); the
/// structured content as JSON text when there is no other content; and
/// `(<tool> returned no model-visible content)` when nothing is left.
pub fn render_with(
    tool: &str,
    result: &CallToolResult,
    images: &ImageSink,
) -> (String, Vec<ImageRef>) {
    let mut parts: Vec<String> = Vec::with_capacity(result.content.len());
    let mut sent = Vec::new();
    let mut image = |mime: &str, data: &str, parts: &mut Vec<String>| match images.admit(mime, data)
    {
        Ok(r) => sent.push(r),
        Err(why) => parts.push(format!(
            "[image {mime} ({} bytes base64) not shown: {why}]",
            data.len()
        )),
    };
    for block in &result.content {
        parts.push(match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::ResourceLink(r) => format!("Resource link: {} ({})", r.name, r.uri),
            ContentBlock::Image(i) => {
                image(&i.mime_type, &i.data, &mut parts);
                continue;
            }
            ContentBlock::Audio(a) => format!(
                "[audio {} ({} bytes base64) not shown: audio is not supported]",
                a.mime_type,
                a.data.len()
            ),
            ContentBlock::Resource(e) => match &e.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    format!("[embedded resource {uri}]\n{text}")
                }
                ResourceContents::BlobResourceContents {
                    mime_type: Some(mime),
                    blob,
                    ..
                } if mime.starts_with("image/") => {
                    image(mime, blob, &mut parts);
                    continue;
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => format!(
                    "[embedded resource {uri} ({}, {} bytes base64) not shown: binary]",
                    mime_type.as_deref().unwrap_or("unknown type"),
                    blob.len()
                ),
                _ => "[embedded resource of an unknown kind not shown]".to_owned(),
            },
            _ => "[content of an unknown type not shown]".to_owned(),
        });
    }
    if parts.is_empty()
        && sent.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(serde_json::to_string(structured).unwrap_or_default());
    }
    if parts.is_empty() && sent.is_empty() {
        return (format!("({tool} returned no model-visible content)"), sent);
    }
    (parts.join("\n"), sent)
}

/// Whether the server flagged the result as an error (`isError: true`).
pub fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(v: serde_json::Value) -> CallToolResult {
        match serde_json::from_value(v) {
            Ok(r) => r,
            Err(e) => panic!("bad fixture: {e}"),
        }
    }

    #[test]
    fn text_blocks_join_with_newlines() {
        let r = result(json!({"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}));
        assert_eq!(render_result("t", &r), "a\nb");
        assert!(!is_error(&r));
    }

    #[test]
    fn links_images_and_audio() {
        let r = result(json!({"content":[
            {"type":"resource_link","name":"readme","uri":"file:///r.md"},
            {"type":"image","data":"AAAA","mimeType":"image/png"},
            {"type":"audio","data":"AA","mimeType":"audio/wav"},
            {"type":"resource","resource":{"uri":"mem://x","text":"hello"}}
        ]}));
        assert_eq!(
            render_result("t", &r),
            "Resource link: readme (file:///r.md)\n\
             [image image/png (4 bytes base64) not shown: this route has no image attachment store]\n\
             [audio audio/wav (2 bytes base64) not shown: audio is not supported]\n\
             [embedded resource mem://x]\nhello"
        );
    }

    #[test]
    fn structured_only_and_empty() {
        let r = result(json!({"content":[],"structuredContent":{"n":1}}));
        assert_eq!(render_result("t", &r), r#"{"n":1}"#);
        let r = result(json!({"content":[]}));
        assert_eq!(
            render_result("mcp__s__t", &r),
            "(mcp__s__t returned no model-visible content)"
        );
        let r = result(json!({"content":[{"type":"text","text":"bad"}],"isError":true}));
        assert!(is_error(&r));
    }
}

#[cfg(test)]
mod image_tests {
    use std::sync::Arc;

    use super::*;
    use serde_json::json;

    const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

    #[test]
    fn a_storing_sink_turns_images_into_references_and_describes_bad_ones() {
        let dir = std::env::temp_dir().join(format!("dsh-mcp-images-{}", std::process::id()));
        let store = Arc::new(dsh_llm::LocalAttachments::new(&dir));
        let sink = ImageSink::storing(store.clone());
        let r: CallToolResult = serde_json::from_value(json!({"content":[
            {"type":"text","text":"two:"},
            {"type":"image","data":PNG_1X1,"mimeType":"image/png"},
            {"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},
            {"type":"image","data":"not base64!","mimeType":"image/png"}
        ]}))
        .unwrap();
        let (text, images) = render_with("t", &r, &sink);
        assert_eq!(images.len(), 1);
        assert_eq!((images[0].width, images[0].height), (1, 1));
        assert_eq!(images[0].media_type, "image/png");
        use dsh_llm::AttachmentStore as _;
        assert_eq!(
            store.read(&images[0].attachment_id).unwrap().len() as u64,
            images[0].bytes
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "two:");
        assert!(
            lines[1]
                .starts_with("[image image/png (12 bytes base64) not shown: it does not decode"),
            "{text}"
        );
        assert!(
            lines[2].contains("not shown: its data is not valid base64"),
            "{text}"
        );
        // An image-only result is not "no model-visible content".
        let r: CallToolResult = serde_json::from_value(
            json!({"content":[{"type":"image","data":PNG_1X1,"mimeType":"image/png"}]}),
        )
        .unwrap();
        let (text, images) = render_with("t", &r, &sink);
        assert_eq!((text.as_str(), images.len()), ("", 1));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
