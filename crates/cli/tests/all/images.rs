//! Images reach the model (issue 22 item 4, issue 17 item 2): `read_image` and MCP image
//! results through the attachment store, as `image_url` parts on `deepseek-flash`, as text on
//! a text-only route, and the same bytes again after a resume.

use std::io::Cursor;

use dsh_testkit::Completion;
use serde_json::Value;
use sha2::Digest as _;

use crate::support::{Env, stderr};

/// A `w`x`h` PNG with a pattern that compresses poorly (so a downscale is visible in bytes).
pub fn png(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        let v = x
            .wrapping_mul(2_654_435_761)
            .wrapping_add(y.wrapping_mul(40_503));
        image::Rgb([(v >> 8) as u8, (v >> 16) as u8, (x ^ y) as u8])
    });
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

fn dimensions(png: &[u8]) -> (u32, u32) {
    let img = image::load_from_memory_with_format(png, image::ImageFormat::Png).unwrap();
    (img.width(), img.height())
}

/// The messages array of a body as its bytes (everything before `],"stream":`).
fn messages_bytes(body: &str) -> String {
    body.split("],\"stream\":").next().unwrap().to_owned()
}

/// The store object of `id` under the test's `DSH_HOME`.
fn stored(env: &Env, id: &str) -> Vec<u8> {
    let hex = id.strip_prefix("sha256:").unwrap();
    std::fs::read(
        env.home
            .path()
            .join("attachments/v1/objects")
            .join(&hex[..2])
            .join(hex),
    )
    .unwrap()
}

fn tool_result_images(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .flat_map(|e| {
            e["data"]["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|b| b["type"] == "image")
        .map(|b| b["attachment"].clone())
        .collect()
}

#[test]
fn read_image_sends_the_downscaled_bytes_on_deepseek_flash_and_resume_rebuilds_them() {
    let env = Env::new();
    let source = png(1024, 512);
    std::fs::write(env.work.path().join("big.png"), &source).unwrap();
    let patch = env.patch(
        "image.yaml",
        "plugins:\n  - id: tool-image\n    name: tool-image\n    config: { maxDimension: 256 }\n",
    );
    env.server().push(
        Completion::new()
            .tool_call_with_id("c1", "read_image", r#"{"file_path":"big.png"}"#)
            .reply(),
    );
    env.server()
        .push(Completion::new().text("A pattern.").reply());
    let out = env.exec(&[
        "--model",
        "deepseek-flash",
        "--patch",
        patch.to_str().unwrap(),
        "Look at big.png",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // The log holds the reference; the store holds the downscaled bytes under its id.
    let refs = tool_result_images(&env.stored_events());
    assert_eq!(refs.len(), 1, "{refs:?}");
    let id = refs[0]["attachmentId"].as_str().unwrap();
    assert_eq!(
        (refs[0]["width"].as_u64(), refs[0]["height"].as_u64()),
        (Some(256), Some(128))
    );
    assert_eq!(
        refs[0]["originalDimensions"],
        serde_json::json!({"width": 1024, "height": 512})
    );
    let bytes = stored(&env, id);
    assert_eq!(
        format!(
            "sha256:{}",
            sha2::Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ),
        id,
        "content-addressed"
    );
    assert_eq!(dimensions(&bytes), (256, 128));
    assert!(
        bytes.len() < source.len() / 4,
        "{} vs {}",
        bytes.len(),
        source.len()
    );

    // The second request carries them as an image part right after the tool message.
    let req = env.server().request(1).unwrap();
    let images = req.image_parts();
    assert_eq!(images.len(), 1, "{}", req.body_text());
    assert!(images[0].after_tool);
    assert_eq!(images[0].media_type, "image/png");
    assert_eq!(images[0].bytes.as_deref(), Some(&bytes[..]));
    assert_eq!(images[0].texts, ["[images returned by tool call c1]"]);
    let body = req.body_json().unwrap();
    let tool = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("(256x128, image/png"),
        "{tool}"
    );
    assert!(
        env.server().dsh_rule_violations().is_empty(),
        "{:?}",
        env.server().dsh_rule_violations()
    );

    // Resume in a new process: the request rebuilt from the log extends the last one sent,
    // image bytes included, byte for byte.
    env.server()
        .push(Completion::new().text("Still a pattern.").reply());
    let id = env.session_id();
    let out = env.exec(&["--resume", &id, "--model", "deepseek-flash", "And now?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let before = messages_bytes(&req.body_text());
    let after = env.server().request(2).unwrap();
    assert!(
        messages_bytes(&after.body_text()).starts_with(&before),
        "the resumed request does not extend the last one"
    );
    assert_eq!(after.image_parts(), images);
}

#[test]
fn read_image_is_refused_on_a_text_only_route_and_no_bytes_are_sent() {
    let env = Env::new();
    std::fs::write(env.work.path().join("shot.png"), png(8, 8)).unwrap();
    env.server().push(
        Completion::new()
            .tool_call("read_image", r#"{"file_path":"shot.png"}"#)
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["--model", "deepseek-v4-pro", "Look"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let body = env.server().request(1).unwrap();
    assert!(body.image_parts().is_empty());
    assert!(
        body.body_text()
            .contains("accepts text only, so it cannot be shown images"),
        "{}",
        body.body_text()
    );
    assert!(tool_result_images(&env.stored_events()).is_empty());
    assert!(!env.home.path().join("attachments/v1/objects").exists());
}

fn mcp_image_run(model: &str) -> Env {
    let env = Env::new();
    std::fs::write(
        env.work.path().join(".mcp.json"),
        serde_json::json!({"mcpServers": {"t": {"command": crate::mcp::test_server()}}})
            .to_string(),
    )
    .unwrap();
    env.server().push(
        Completion::new()
            .tool_call_with_id("call_img", "mcp__t__image", "{}")
            .tool_call_with_id(
                "call_res",
                "read_mcp_resource",
                r#"{"server":"t","uri":"mem://logo.png"}"#,
            )
            .reply(),
    );
    env.server().push(Completion::new().text("DONE").reply());
    let out = env.exec(&["--model", model, "Show me the image"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    env
}

#[test]
fn an_mcp_image_reaches_deepseek_flash_as_an_image_part_and_a_text_only_route_as_text() {
    use base64::Engine as _;
    let env = mcp_image_run("deepseek-flash");
    let png = base64::engine::general_purpose::STANDARD
        .decode(dsh_mcp_testserver::PNG_1X1)
        .unwrap();
    let refs = tool_result_images(&env.stored_events());
    assert_eq!(refs.len(), 2, "{refs:?}");
    assert_eq!(refs[0], refs[1], "the same bytes, one object");
    assert_eq!(refs[0]["mediaType"], "image/png");
    assert_eq!(
        (refs[0]["width"].as_u64(), refs[0]["height"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(stored(&env, refs[0]["attachmentId"].as_str().unwrap()), png);
    let req = env.server().request(1).unwrap();
    let images = req.image_parts();
    assert_eq!(images.len(), 2, "{}", req.body_text());
    assert!(
        images
            .iter()
            .all(|i| i.after_tool && i.bytes.as_deref() == Some(&png[..]))
    );
    assert_eq!(
        images[0].texts,
        [
            "[images returned by tool call call_img]",
            "[images returned by tool call call_res]"
        ]
    );
    let tools: Vec<Value> = req.body_json().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect();
    assert_eq!(tools[0]["content"], "a pixel:");
    assert_eq!(
        tools[1]["content"],
        "[image mem://logo.png (image/png) attached]"
    );
    assert!(env.server().dsh_rule_violations().is_empty());

    let env = mcp_image_run("deepseek-v4-pro");
    let req = env.server().request(1).unwrap();
    assert!(req.image_parts().is_empty());
    let body = req.body_json().unwrap();
    let tool = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(
        tool["content"],
        format!(
            "a pixel:\n[image image/png ({} bytes base64) not shown: the current model deepseek-v4-pro accepts text only]",
            dsh_mcp_testserver::PNG_1X1.len()
        )
    );
    let read = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .nth(1)
        .unwrap()
        .clone();
    assert_eq!(
        read["content"],
        format!(
            "[binary resource (image/png, {} bytes base64) not shown: the current model deepseek-v4-pro accepts text only]",
            dsh_mcp_testserver::PNG_1X1.len()
        )
    );
    assert!(tool_result_images(&env.stored_events()).is_empty());
}
