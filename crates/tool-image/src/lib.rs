//! `dsh-tool-image`: the `read_image` tool (plugin `tool-image`).
//!
//! `read_image {file_path}` reads a local PNG, JPEG, WebP or GIF (sniffed from its bytes, not
//! its name), refuses it clearly when the calling agent's route does not accept images (the
//! route's catalog entry, `ModelInfo::input_modalities`), downscales it when its longer side
//! passes `maxDimension` or its size passes `maxBytes` (re-encoded as PNG, JPEG for JPEG
//! sources), puts the normalised bytes in the `attachments` service (content-addressed; without
//! one, a copy goes to the session's artefact directory, `images/<sha256>.<ext>`), and answers an `image` content block (`ImageRef`: `sha256:` id,
//! media type, dimensions, bytes, name, original dimensions when downscaled) after a one-line
//! text description.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_agent::Agents;
use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_llm::Modality;
use dsh_llm::attachments::AttachmentStore;
use dsh_llm::service::Llm;
use dsh_llm::{ContentBlock, Dimensions, ImageRef};
use dsh_tools::{
    Concurrency, DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolErrorCode, ToolKind,
    ToolOutput, Tools,
};
use futures::future::BoxFuture;
use image::{GenericImageView, ImageFormat};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The route of the calling agent accepts text only.
pub const IMAGE_UNSUPPORTED_ROUTE: ToolErrorCode =
    ToolErrorCode::tool_defined("IMAGE_UNSUPPORTED_ROUTE");
/// Not a PNG, JPEG, WebP or GIF (or it does not decode).
pub const IMAGE_INVALID: ToolErrorCode = ToolErrorCode::tool_defined("IMAGE_INVALID");
/// The file is missing, unreadable or over the input cap.
pub const IMAGE_UNREADABLE: ToolErrorCode = ToolErrorCode::tool_defined("IMAGE_UNREADABLE");

const DESCRIPTION: &str = "Look at a local PNG, JPEG, WebP or GIF image (downscaled if large).";

/// Config of the `tool-image` plugin.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageToolConfig {
    /// Files larger than this are refused before decoding (default 20 MiB).
    #[serde(default = "default_input")]
    pub max_input_bytes: u64,
    /// The longer side of the image sent, in pixels (default 2048).
    #[serde(default = "default_dimension")]
    pub max_dimension: u32,
    /// An image above this size after normalisation is downscaled further (default 4 MiB).
    #[serde(default = "default_bytes")]
    pub max_bytes: u64,
}

fn default_input() -> u64 {
    20 * 1024 * 1024
}
fn default_dimension() -> u32 {
    2048
}
fn default_bytes() -> u64 {
    4 * 1024 * 1024
}

impl Default for ImageToolConfig {
    fn default() -> Self {
        Self {
            max_input_bytes: default_input(),
            max_dimension: default_dimension(),
            max_bytes: default_bytes(),
        }
    }
}

/// A normalised image.
#[derive(Debug)]
pub struct Normalized {
    /// The bytes to send.
    pub bytes: Vec<u8>,
    /// Their media type.
    pub media_type: &'static str,
    /// Their extension.
    pub ext: &'static str,
    /// Their dimensions.
    pub width: u32,
    /// Their dimensions.
    pub height: u32,
    /// The source's dimensions, when it was downscaled.
    pub original: Option<(u32, u32)>,
}

fn media(format: ImageFormat) -> Option<(&'static str, &'static str)> {
    match format {
        ImageFormat::Png => Some(("image/png", "png")),
        ImageFormat::Jpeg => Some(("image/jpeg", "jpg")),
        ImageFormat::WebP => Some(("image/webp", "webp")),
        ImageFormat::Gif => Some(("image/gif", "gif")),
        _ => None,
    }
}

/// Why [`normalize`] refused an image.
#[derive(Debug, thiserror::Error)]
pub enum NormalizeError {
    /// The bytes are not an image format this crate recognises.
    #[error("not a PNG, JPEG, WebP or GIF image")]
    NotAnImage,
    /// A recognised format the tool does not take.
    #[error("{0:?} images are not supported (PNG, JPEG, WebP or GIF only)")]
    Unsupported(ImageFormat),
    /// The image does not decode.
    #[error("the image does not decode: {0}")]
    Decode(#[source] image::ImageError),
    /// The downscaled image could not be encoded.
    #[error("cannot re-encode the image: {0}")]
    Encode(#[source] image::ImageError),
}

/// Sniffs, decodes and (when over the limits) downscales `bytes`.
pub fn normalize(bytes: Vec<u8>, config: &ImageToolConfig) -> Result<Normalized, NormalizeError> {
    let format = image::guess_format(&bytes).map_err(|_| NormalizeError::NotAnImage)?;
    let (media_type, ext) = media(format).ok_or(NormalizeError::Unsupported(format))?;
    let img =
        image::load_from_memory_with_format(&bytes, format).map_err(NormalizeError::Decode)?;
    let (w, h) = img.dimensions();
    let max = config.max_dimension.max(1);
    if w.max(h) <= max && (bytes.len() as u64) <= config.max_bytes {
        return Ok(Normalized {
            bytes,
            media_type,
            ext,
            width: w,
            height: h,
            original: None,
        });
    }
    let mut side = max.min(w.max(h));
    loop {
        let small = img.resize(side, side, image::imageops::FilterType::Triangle);
        let (out_format, out_media, out_ext) = if format == ImageFormat::Jpeg {
            (ImageFormat::Jpeg, "image/jpeg", "jpg")
        } else {
            (ImageFormat::Png, "image/png", "png")
        };
        let mut out = Cursor::new(Vec::new());
        let small = if out_format == ImageFormat::Jpeg {
            image::DynamicImage::ImageRgb8(small.to_rgb8())
        } else {
            small
        };
        small
            .write_to(&mut out, out_format)
            .map_err(NormalizeError::Encode)?;
        let encoded = out.into_inner();
        if (encoded.len() as u64) <= config.max_bytes || side <= 64 {
            let (sw, sh) = small.dimensions();
            return Ok(Normalized {
                bytes: encoded,
                media_type: out_media,
                ext: out_ext,
                width: sw,
                height: sh,
                original: Some((w, h)),
            });
        }
        side = side * 3 / 4;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `read_image` tool.
pub struct ReadImageTool {
    ctx: Ctx,
    config: ImageToolConfig,
    parameters: Value,
}

impl std::fmt::Debug for ReadImageTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadImageTool")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ReadImageTool {
    /// The tool; it reaches the `agents` and `llm` services of `ctx` for the route check.
    pub fn new(ctx: Ctx, config: ImageToolConfig) -> Self {
        Self {
            ctx,
            config,
            parameters: json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string"}
                },
                "required": ["file_path"]
            }),
        }
    }

    /// Refuses when the calling agent's route takes text only.
    fn check_route(&self, session_id: &str) -> Result<(), ToolError> {
        let agent = self
            .ctx
            .get::<dyn Agents>()
            .and_then(|a| a.get(session_id))
            .ok_or_else(|| ToolError::failed("read_image requires an owning agent session"))?;
        let options = agent.options();
        let route = options.provider.clone().unwrap_or_default();
        let adapter = self
            .ctx
            .get::<dyn Llm>()
            .and_then(|l| l.adapter(&route))
            .ok_or_else(|| ToolError::failed(format!("no model route `{route}` to check")))?;
        let model = options.model.unwrap_or_else(|| adapter.default_model());
        let info = adapter.resolve_model(&model);
        if !info.input_modalities.contains(&Modality::Image) {
            return Err(ToolError::new(
                IMAGE_UNSUPPORTED_ROUTE,
                format!(
                    "the current model {model} (route {route}) accepts text only, so it cannot be \
                     shown images; describe what you need from the image another way"
                ),
            ));
        }
        Ok(())
    }
}

fn store(dir: Option<&Path>, id_hex: &str, n: &Normalized) -> Option<PathBuf> {
    let dir = dir?.join("images");
    let path = dir.join(format!("{id_hex}.{}", n.ext));
    if path.is_file() {
        return Some(path);
    }
    let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &n.bytes));
    match written {
        Ok(()) => Some(path),
        Err(e) => {
            tracing::warn!(path = %path.display(), "cannot store the image: {e}");
            None
        }
    }
}

/// The arguments of `read_image` (the schema checked their shape).
#[derive(Default, Deserialize)]
struct ImageArgs {
    #[serde(default)]
    file_path: String,
}

/// The display of a `read_image` call: the image's path.
pub fn display(call: &DisplayInput<'_>) -> ToolDisplay {
    let mut d = ToolDisplay::new(ToolKind::Read, "read_image");
    if let Some(a) = call.parse::<ImageArgs>() {
        let path = a.file_path.trim().to_owned();
        d = d.with_location(path.clone(), None).with_subject(path);
    }
    d
}

impl Tool for ReadImageTool {
    fn name(&self) -> &str {
        "read_image"
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        display(call)
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }

    fn read_only(&self) -> bool {
        true
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let args: ImageArgs = serde_json::from_value(args).unwrap_or_default();
            let raw = args.file_path.trim();
            if raw.is_empty() {
                return Err(ToolError::invalid_args(
                    "`file_path` must be a non-empty path",
                ));
            }
            self.check_route(ctx.session_id())?;
            let path = ctx.cwd().join(raw);
            let meta = std::fs::metadata(&path).map_err(|e| {
                ToolError::new(
                    IMAGE_UNREADABLE,
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            if !meta.is_file() {
                return Err(ToolError::new(
                    IMAGE_UNREADABLE,
                    format!("{} is not a file", path.display()),
                ));
            }
            if meta.len() > self.config.max_input_bytes {
                return Err(ToolError::new(
                    IMAGE_UNREADABLE,
                    format!(
                        "{} is {} bytes, over the {}-byte limit for images",
                        path.display(),
                        meta.len(),
                        self.config.max_input_bytes
                    ),
                ));
            }
            let bytes = std::fs::read(&path).map_err(|e| {
                ToolError::new(
                    IMAGE_UNREADABLE,
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            let config = self.config.clone();
            let n = tokio::task::spawn_blocking(move || normalize(bytes, &config))
                .await
                .map_err(|e| ToolError::failed(format!("image decoding failed: {e}")))?
                .map_err(|m| ToolError::new(IMAGE_INVALID, format!("{}: {m}", path.display())))?;
            let id_hex = hex(&Sha256::digest(&n.bytes));
            // The attachment store (where adapters read the bytes from) when one is mounted;
            // else a copy in the session's artefact directory.
            let stored = match self.ctx.get::<dyn AttachmentStore>() {
                Some(attachments) => {
                    attachments.put(&n.bytes).map_err(|e| {
                        ToolError::new(IMAGE_UNREADABLE, format!("cannot store the image: {e}"))
                    })?;
                    None
                }
                None => store(ctx.scratch_dir(), &id_hex, &n),
            };
            let name = path.file_name().map(|f| f.to_string_lossy().into_owned());
            let attachment = ImageRef {
                attachment_id: format!("sha256:{id_hex}"),
                media_type: n.media_type.to_owned(),
                width: u64::from(n.width),
                height: u64::from(n.height),
                bytes: n.bytes.len() as u64,
                name,
                original_dimensions: n.original.map(|(w, h)| Dimensions {
                    width: u64::from(w),
                    height: u64::from(h),
                }),
                extra: Default::default(),
            };
            let mut line = format!(
                "Image {} ({}x{}, {}, {} bytes)",
                path.display(),
                n.width,
                n.height,
                n.media_type,
                n.bytes.len()
            );
            if let Some((w, h)) = n.original {
                line.push_str(&format!(", downscaled from {w}x{h}"));
            }
            let value = json!({"text": line, "image": attachment});
            let mut meta = json!({"path": path.display().to_string()});
            if let Some(p) = stored {
                meta["stored"] = Value::from(p.display().to_string());
            }
            Ok(ToolOutput::json(value).with_meta(meta))
        })
    }

    fn render(&self, output: &ToolOutput) -> Vec<ContentBlock> {
        let text = output.value["text"].as_str().unwrap_or("").to_owned();
        let mut blocks = vec![ContentBlock::text(text)];
        if let Ok(attachment) = serde_json::from_value::<ImageRef>(output.value["image"].clone()) {
            blocks.push(ContentBlock::Image {
                attachment,
                offloaded: None,
            });
        }
        blocks
    }
}

/// Registers `read_image`.
#[derive(Debug)]
pub struct ImageToolPlugin;

impl Plugin for ImageToolPlugin {
    const NAME: &'static str = "tool-image";
    type Config = ImageToolConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>()]
    }

    async fn apply(ctx: Ctx, config: ImageToolConfig) -> Result<(), BoxError> {
        let tools = ctx.dep::<dyn Tools>()?;
        tools.register(&ctx, Arc::new(ReadImageTool::new(ctx.clone(), config)))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let img = image::RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 7])
        });
        let mut out = Cursor::new(Vec::new());
        image::DynamicImage::ImageRgb8(img)
            .write_to(&mut out, ImageFormat::Png)
            .unwrap();
        out.into_inner()
    }

    #[test]
    fn small_images_pass_unchanged_and_large_ones_are_downscaled() {
        let small = png(40, 20);
        let n = normalize(small.clone(), &ImageToolConfig::default()).unwrap();
        assert_eq!((n.width, n.height, n.original), (40, 20, None));
        assert_eq!(n.bytes, small);
        let n = normalize(
            png(400, 200),
            &ImageToolConfig {
                max_dimension: 100,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!((n.width, n.height), (100, 50));
        assert_eq!(n.original, Some((400, 200)));
        assert_eq!(n.media_type, "image/png");
        assert!(normalize(b"GIF89a-not-really".to_vec(), &ImageToolConfig::default()).is_err());
        let err = normalize(b"hello".to_vec(), &ImageToolConfig::default()).unwrap_err();
        assert!(matches!(err, NormalizeError::NotAnImage));
        assert_eq!(err.to_string(), "not a PNG, JPEG, WebP or GIF image");
    }
}
