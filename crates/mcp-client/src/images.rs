//! MCP images to the model: on a route whose model accepts images, with an attachment store
//! mounted, an image a server returns is put in the store and becomes an `image` block (its
//! `ImageRef`); anywhere else it stays a bracketed description (upstream §4.5).

use std::io::Cursor;
use std::sync::Arc;

use base64::Engine as _;
use dsh_agent::Agents;
use dsh_kernel::Ctx;
use dsh_llm::attachments::{AttachmentError, AttachmentStore, IMAGE_MEDIA_TYPES};
use dsh_llm::service::Llm;
use dsh_llm::{ImageRef, Modality};
use image::ImageFormat;

/// Why a call's sink refuses every image.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SinkRefusal {
    /// No attachment store is mounted (or no context to find one).
    #[error("this route has no image attachment store")]
    NoStore,
    /// The call has no owning agent session.
    #[error("no agent session to check the model's image input")]
    NoAgent,
    /// The agent's route names no adapter.
    #[error("no model route `{0}` to check")]
    NoRoute(String),
    /// The agent's model takes text only.
    #[error("the current model {0} accepts text only")]
    TextOnly(String),
    /// The call failed, so its images are not sent.
    #[error("the call failed")]
    CallFailed,
}

/// Why an image is described instead of sent (the text completes "not shown: …").
#[derive(Debug, thiserror::Error)]
pub enum ImageRefused {
    /// The call's sink refuses every image (a text-only route, no store).
    #[error(transparent)]
    Refused(SinkRefusal),
    /// The data is not base64.
    #[error("its data is not valid base64 ({0})")]
    Base64(base64::DecodeError),
    /// The bytes are no image format dsh knows.
    #[error("its bytes are not a PNG, JPEG, WebP or GIF image")]
    UnknownFormat,
    /// An image format the model APIs do not take.
    #[error("{0:?} images are not supported")]
    Unsupported(ImageFormat),
    /// The header does not decode.
    #[error("it does not decode ({0})")]
    Decode(#[source] image::ImageError),
    /// Zero width or height.
    #[error("it has no pixels")]
    Empty,
    /// The store could not write it.
    #[error("it cannot be stored ({0})")]
    Store(#[from] AttachmentError),
}

/// Where a call's images go: the store, or the reason they are described instead.
#[derive(Clone)]
pub struct ImageSink {
    store: Result<Arc<dyn AttachmentStore>, SinkRefusal>,
}

impl std::fmt::Debug for ImageSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageSink")
            .field("refusal", &self.store.as_ref().err())
            .finish()
    }
}

impl ImageSink {
    /// A sink that describes every image for `why`.
    pub fn refusing(why: SinkRefusal) -> Self {
        Self { store: Err(why) }
    }

    /// A sink that stores every well-formed image in `store`.
    pub fn storing(store: Arc<dyn AttachmentStore>) -> Self {
        Self { store: Ok(store) }
    }

    /// The sink of a call in `session_id`: the `attachments` service of `ctx` when the calling
    /// agent's model accepts images (its route's catalog entry), else the reason it does not.
    pub fn for_call(ctx: Option<&Ctx>, session_id: &str) -> Self {
        let Some(ctx) = ctx else {
            return Self::refusing(SinkRefusal::NoStore);
        };
        let Some(store) = ctx.get::<dyn AttachmentStore>() else {
            return Self::refusing(SinkRefusal::NoStore);
        };
        let Some(agent) = ctx.get::<dyn Agents>().and_then(|a| a.get(session_id)) else {
            return Self::refusing(SinkRefusal::NoAgent);
        };
        let options = agent.options();
        let route = options.provider.clone().unwrap_or_default();
        let Some(adapter) = ctx.get::<dyn Llm>().and_then(|l| l.adapter(&route)) else {
            return Self::refusing(SinkRefusal::NoRoute(route));
        };
        let model = options.model.unwrap_or_else(|| adapter.default_model());
        if !adapter
            .resolve_model(&model)
            .input_modalities
            .contains(&Modality::Image)
        {
            return Self::refusing(SinkRefusal::TextOnly(model));
        }
        Self::storing(store)
    }

    /// Stores the base64 image `data` (declared `mime_type`) and gives its reference, or why it
    /// is not sent (a text-only route, no store, not a PNG/JPEG/WebP/GIF, bad base64, a store
    /// that cannot write).
    pub fn admit(&self, mime_type: &str, data: &str) -> Result<ImageRef, ImageRefused> {
        let store = self
            .store
            .as_ref()
            .map_err(|why| ImageRefused::Refused(why.clone()))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(ImageRefused::Base64)?;
        let format = image::guess_format(&bytes).map_err(|_| ImageRefused::UnknownFormat)?;
        let media_type = match format {
            ImageFormat::Png => "image/png",
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::WebP => "image/webp",
            ImageFormat::Gif => "image/gif",
            other => return Err(ImageRefused::Unsupported(other)),
        };
        debug_assert!(IMAGE_MEDIA_TYPES.contains(&media_type));
        if media_type != mime_type {
            tracing::debug!(
                declared = mime_type,
                sniffed = media_type,
                "MCP image type corrected from its bytes"
            );
        }
        let (width, height) = image::ImageReader::with_format(Cursor::new(&bytes), format)
            .into_dimensions()
            .map_err(ImageRefused::Decode)?;
        if width == 0 || height == 0 {
            return Err(ImageRefused::Empty);
        }
        let attachment_id = store.put(&bytes)?;
        Ok(ImageRef {
            attachment_id,
            media_type: media_type.to_owned(),
            width: u64::from(width),
            height: u64::from(height),
            bytes: bytes.len() as u64,
            name: None,
            original_dimensions: None,
            extra: Default::default(),
        })
    }
}
