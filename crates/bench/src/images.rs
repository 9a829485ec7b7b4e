//! Images: what a ~1 MB PNG costs a request after `read_image`'s downscale on `deepseek-flash`
//! (bytes of the image sent, of the request body, the tool step's time), and the time the
//! DeepSeek adapter takes to build a request body holding one image (reading the store,
//! base64) against the same history as text.

use std::io::Cursor;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use dsh_llm::attachments::{AttachmentStore, fixed_attachments};
use dsh_llm::{ContentBlock, LlmRequest, Message, Modality, PreparedCall};
use dsh_testkit::Completion;

use crate::report::{Group, Row};
use crate::run::{World, run_dsh};

/// A 4000x2000 PNG of about 1 MB: a flat canvas (which compresses to almost nothing) with a
/// block of noise (which does not) sized for the target.
pub fn png_about_1mb() -> Result<Vec<u8>> {
    let (w, h, k) = (4000u32, 2000u32, 470u32);
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        if x < k && y < k {
            let v = x
                .wrapping_mul(2_654_435_761)
                .wrapping_add(y.wrapping_mul(2_246_822_519))
                .rotate_left(13)
                .wrapping_mul(3_266_489_917);
            image::Rgb([(v >> 24) as u8, (v >> 16) as u8, (v >> 8) as u8])
        } else {
            image::Rgb([40, 90, 160])
        }
    });
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut out, image::ImageFormat::Png)
        .context("encoding the benchmark PNG")?;
    Ok(out.into_inner())
}

/// One `dsh exec` on `deepseek-flash` whose model reads the PNG: (image bytes sent, request
/// body bytes, ms from the tool-call response's end to the next request).
fn end_to_end(dsh: &Path, png: &[u8]) -> Result<(usize, usize, f64)> {
    let world = World::new()?;
    std::fs::write(world.work.join("big.png"), png).context("writing big.png")?;
    world.server.push(
        Completion::new()
            .tool_call_with_id(
                "call_00_benchimage",
                "read_image",
                r#"{"file_path":"big.png"}"#,
            )
            .reply(),
    );
    world
        .server
        .push(Completion::new().text("A picture.").reply());
    run_dsh(
        dsh,
        &world,
        &["exec", "--model", "deepseek-flash", "Look at big.png"],
        false,
    )
    .context("the read_image run")?;
    let reqs = world
        .server
        .wait_for_finished_blocking(2, Duration::from_secs(30))
        .context("the read_image run: fewer than 2 responses ended")?;
    let parts = reqs[1].image_parts();
    ensure!(
        parts.len() == 1,
        "the second request carries {} images",
        parts.len()
    );
    let sent = parts[0].bytes.as_ref().map_or(0, Vec::len);
    let step = reqs[0].finished_at.map_or(0.0, |f| {
        reqs[1].arrived_at.duration_since(f).as_secs_f64() * 1e3
    });
    Ok((sent, reqs[1].body.len(), step))
}

/// A store holding one image.
struct One(Vec<u8>, String);

impl AttachmentStore for One {
    fn read(&self, id: &str) -> Result<Vec<u8>, dsh_llm::AttachmentError> {
        if id == self.1 {
            Ok(self.0.clone())
        } else {
            Err(dsh_llm::AttachmentError::NotFound(id.to_owned()))
        }
    }
}

/// Median ms to build the body of a four-message history whose tool result holds `image`,
/// on an image model and (the same history) on a text-only one.
fn build_times(image: &[u8], iterations: usize) -> Result<(f64, f64)> {
    let id = dsh_llm::attachments::content_id(image);
    let attachment = serde_json::from_value(serde_json::json!({
        "attachmentId": id, "mediaType": "image/png", "width": 2048, "height": 1024,
        "bytes": image.len()
    }))?;
    let messages = [
        Message::system("s", "You are dsh."),
        Message::user_text("u", "Look at big.png"),
        Message::new(
            "a",
            dsh_llm::Role::Assistant,
            vec![ContentBlock::tool_call("call_0", "read_image", "{}")],
            dsh_llm::MessageSource::user(),
        ),
        Message::tool_result(
            "t",
            "call_0",
            vec![
                ContentBlock::text("Image big.png (2048x1024, image/png)"),
                ContentBlock::Image {
                    attachment,
                    offloaded: None,
                },
            ],
            false,
        ),
    ];
    let lookup = fixed_attachments(Arc::new(One(image.to_vec(), id)));
    let images = dsh_llm_deepseek::request::Images { lookup: &lookup };
    let time = |vision: bool| -> Result<f64> {
        let model = dsh_llm::ModelInfo {
            id: "deepseek-flash".into(),
            context_window: 1_000_000,
            default_max_tokens: 256_000,
            max_output_tokens: None,
            reasoning_efforts: Vec::new(),
            default_effort: None,
            input_modalities: if vision {
                vec![Modality::Text, Modality::Image]
            } else {
                vec![Modality::Text]
            },
            system_prompt_update: None,
            tool_update: None,
            pricing: None,
        };
        let req = LlmRequest {
            call: PreparedCall::with_defaults("deepseek", model),
            messages: messages.iter().cloned().map(Arc::new).collect(),
            tools: Vec::new(),
            cancel: Default::default(),
        };
        let mut samples = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            let t = Instant::now();
            let body = dsh_llm_deepseek::request::body(&req, Default::default(), images)
                .map_err(|f| anyhow::anyhow!("{}", f.message))?;
            samples.push(t.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(body);
        }
        Ok(crate::stats::Stat::median_of(&samples))
    };
    Ok((time(true)?, time(false)?))
}

/// The rows of the group.
pub fn rows(dsh: &Path, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let png = png_about_1mb()?;
    let mut sent = Vec::new();
    let mut bodies = Vec::new();
    let mut steps = Vec::new();
    for _ in 0..iterations.max(1) {
        let (s, b, t) = end_to_end(dsh, &png)?;
        sent.push(s as f64);
        bodies.push(b as f64);
        steps.push(t);
    }
    let mut g = Group::new(rows, "images");
    g.info("source PNG (4000x2000), bytes", &[png.len() as f64], "B", 0);
    g.info(
        "image bytes sent after read_image's downscale (2048x1024)",
        &sent,
        "B",
        0,
    );
    g.info(
        "request body with the image (base64 data URL)",
        &bodies,
        "B",
        0,
    );
    g.info(
        "read_image step: tool-call response end → next request",
        &steps,
        "ms",
        1,
    );
    let downscaled = {
        let img = image::load_from_memory(&png).context("decoding the benchmark PNG")?;
        let small = img.resize(2048, 2048, image::imageops::FilterType::Triangle);
        let mut out = Cursor::new(Vec::new());
        small
            .write_to(&mut out, image::ImageFormat::Png)
            .context("re-encoding")?;
        out.into_inner()
    };
    let (with_image, text_only) = build_times(&downscaled, 50)?;
    g.info(
        "DeepSeek body build, one image (median of 50)",
        &[with_image],
        "ms",
        3,
    );
    g.info(
        "DeepSeek body build, same history on a text-only model (median of 50)",
        &[text_only],
        "ms",
        3,
    );
    Ok(())
}
