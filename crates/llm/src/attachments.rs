//! Image bytes for adapters: messages hold [`ImageRef`]s (a content address, never the bytes);
//! an adapter whose route accepts images reads the bytes from the [`AttachmentStore`] service
//! and encodes them for its wire (a `data:` URL, a base64 source).
//!
//! What every route sends instead of an image it cannot carry is here too
//! ([`image_placeholder`], [`file_placeholder`], `session-format.md` §9.7), so the three
//! adapters word it the same way.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use dsh_kernel::Service;

use crate::chunk::{LlmFailure, codes};
use crate::message::{FileRef, ImageRef};

/// Why an attachment's bytes cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum AttachmentError {
    /// The id is not a content address this store understands.
    #[error("attachment id `{0}` is not `sha256:<64 hex>`")]
    BadId(String),
    /// Nothing is stored under the id.
    #[error("attachment {0} is not in the store")]
    NotFound(String),
    /// This store only reads.
    #[error("this attachment store is read-only")]
    ReadOnly,
    /// The bytes cannot be stored.
    #[error("cannot store an attachment under {path}: {source}")]
    Write {
        /// Where the store tried to write.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The stored bytes cannot be read.
    #[error("attachment {id} cannot be read: {source}")]
    Io {
        /// The attachment id.
        id: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Where attachment bytes live, by content address (`sha256:<64 hex>`).
pub trait AttachmentStore: Send + Sync + 'static {
    /// The bytes stored under `attachment_id`.
    fn read(&self, attachment_id: &str) -> Result<Vec<u8>, AttachmentError>;

    /// Stores `bytes` under their content address and returns it (`sha256:<64 hex>`). Storing
    /// the same bytes twice is one object. The default refuses ([`AttachmentError::ReadOnly`]).
    fn put(&self, bytes: &[u8]) -> Result<String, AttachmentError> {
        let _ = bytes;
        Err(AttachmentError::ReadOnly)
    }
}

/// The content address of `bytes`: `sha256:<64 lowercase hex>`.
pub fn content_id(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(bytes);
    let mut id = String::with_capacity(71);
    id.push_str("sha256:");
    for b in digest {
        id.push_str(&format!("{b:02x}"));
    }
    id
}

impl Service for dyn AttachmentStore {
    const NAME: &'static str = "attachments";
}

/// How an adapter finds the store when a request holds an image (a soft service lookup, so a
/// store mounted after the adapter is still found; `None` = none mounted).
pub type AttachmentLookup = Arc<dyn Fn() -> Option<Arc<dyn AttachmentStore>> + Send + Sync>;

/// The soft lookup of the [`AttachmentStore`] service in `ctx`'s realm (what adapter plugins
/// give their adapters).
pub fn service_lookup(ctx: &dsh_kernel::Ctx) -> AttachmentLookup {
    let ctx = ctx.clone();
    Arc::new(move || ctx.get::<dyn AttachmentStore>())
}

/// A lookup that never finds a store.
pub fn no_attachments() -> AttachmentLookup {
    Arc::new(|| None)
}

/// A lookup that always gives `store`.
pub fn fixed_attachments(store: Arc<dyn AttachmentStore>) -> AttachmentLookup {
    Arc::new(move || Some(store.clone()))
}

/// A content-addressed directory: the bytes of `sha256:<hex>` are the file `<root>/<hex>`.
#[derive(Clone, Debug)]
pub struct DirAttachments {
    root: PathBuf,
}

impl DirAttachments {
    /// The store rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file of `attachment_id` (only well-formed ids: no path can escape the root).
    pub fn path_of(&self, attachment_id: &str) -> Result<PathBuf, AttachmentError> {
        let hex = attachment_id
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| AttachmentError::BadId(attachment_id.to_owned()))?;
        Ok(self.root.join(hex.to_ascii_lowercase()))
    }
}

/// Reads the stored object of `attachment_id` at `path` (a missing file is
/// [`AttachmentError::NotFound`]): the read of every file-backed store.
pub(crate) fn read_object(
    path: &std::path::Path,
    attachment_id: &str,
) -> Result<Vec<u8>, AttachmentError> {
    std::fs::read(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => AttachmentError::NotFound(attachment_id.to_owned()),
        _ => AttachmentError::Io {
            id: attachment_id.to_owned(),
            source,
        },
    })
}

impl AttachmentStore for DirAttachments {
    fn read(&self, attachment_id: &str) -> Result<Vec<u8>, AttachmentError> {
        read_object(&self.path_of(attachment_id)?, attachment_id)
    }
}

pub use crate::attachment_local::{AttachmentLocalConfig, AttachmentLocalPlugin, LocalAttachments};

/// The media types every image route takes.
pub const IMAGE_MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/webp", "image/gif"];

/// The base64 of `image`'s bytes, read through `lookup`. `UNSUPPORTED_CONTENT` when no store is
/// mounted, the bytes are missing or unreadable, or the media type is not one of
/// [`IMAGE_MEDIA_TYPES`]; the message names the attachment and the route's `label`.
pub fn image_base64(
    lookup: &AttachmentLookup,
    image: &ImageRef,
    label: &str,
) -> Result<String, LlmFailure> {
    let refuse = |why: String| {
        LlmFailure::new(
            codes::UNSUPPORTED_CONTENT,
            format!(
                "image {} cannot be sent to {label}: {why}",
                image.attachment_id
            ),
        )
    };
    if !IMAGE_MEDIA_TYPES.contains(&image.media_type.as_str()) {
        return Err(refuse(format!(
            "media type `{}` is not one of {}",
            image.media_type,
            IMAGE_MEDIA_TYPES.join(", ")
        )));
    }
    let store = lookup().ok_or_else(|| refuse("no attachment store is mounted".to_owned()))?;
    let bytes = store
        .read(&image.attachment_id)
        .map_err(|e| refuse(e.to_string()))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// `data:<media type>;base64,<bytes>` of `image` (OpenAI-compatible `image_url`).
pub fn image_data_url(
    lookup: &AttachmentLookup,
    image: &ImageRef,
    label: &str,
) -> Result<String, LlmFailure> {
    let data = image_base64(lookup, image, label)?;
    Ok(format!("data:{};base64,{data}", image.media_type))
}

/// `sha256:<8 hex>` identity of an attachment (characters 7..15 of its id).
pub fn short_hash(attachment_id: &str) -> &str {
    attachment_id.get(7..15).unwrap_or(attachment_id)
}

/// The text an image becomes where it is not sent (`session-format.md` §9.7): `offloaded` ones
/// on every route, the others on text-only routes.
pub fn image_placeholder(image: &ImageRef, offloaded: bool) -> String {
    if offloaded {
        let identity = match &image.name {
            Some(n) => format!(
                "{} ({})",
                serde_json::to_string(n).unwrap_or_default(),
                image.attachment_id
            ),
            None => image.attachment_id.clone(),
        };
        format!(
            "[image omitted to fit request image limits; {identity}. No local normalized image path is available; ask the user to attach it again if needed.]"
        )
    } else {
        format!(
            "[image omitted because this model accepts text only; attachment sha256:{}]",
            short_hash(&image.attachment_id)
        )
    }
}

/// The text a file attachment becomes on every route (`session-format.md` §9.7).
pub fn file_placeholder(file: &FileRef) -> String {
    format!(
        "[File \"{}\" ({} bytes, sha256:{}) was uploaded, but the current execution environment cannot access a readable path. Report that limitation if its contents are needed; do not claim to have read it.]",
        file.name,
        file.bytes,
        short_hash(&file.attachment_id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(id: &str, media: &str) -> ImageRef {
        serde_json::from_value(serde_json::json!({
            "attachmentId": id, "mediaType": media, "width": 1, "height": 1, "bytes": 3
        }))
        .unwrap()
    }

    #[test]
    fn a_directory_store_by_content_address() {
        let dir = std::env::temp_dir().join(format!("dsh-llm-att-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let hex = "ab".repeat(32);
        std::fs::write(dir.join(&hex), b"PNG").unwrap();
        let store: Arc<dyn AttachmentStore> = Arc::new(DirAttachments::new(&dir));
        let lookup = fixed_attachments(store);
        let id = format!("sha256:{hex}");
        assert_eq!(
            image_data_url(&lookup, &image(&id, "image/png"), "X").unwrap(),
            "data:image/png;base64,UE5H"
        );
        let missing = format!("sha256:{}", "cd".repeat(32));
        let f = image_base64(&lookup, &image(&missing, "image/png"), "Acme").unwrap_err();
        assert_eq!(f.code, codes::UNSUPPORTED_CONTENT);
        assert!(
            f.message.contains("cannot be sent to Acme") && f.message.contains("not in the store"),
            "{}",
            f.message
        );
        let f =
            image_base64(&lookup, &image("sha256:../../etc/passwd", "image/png"), "X").unwrap_err();
        assert!(
            f.message.contains("is not `sha256:<64 hex>`"),
            "{}",
            f.message
        );
        let f = image_base64(&lookup, &image(&id, "image/bmp"), "X").unwrap_err();
        assert!(
            f.message.contains("media type `image/bmp`"),
            "{}",
            f.message
        );
        let f = image_base64(&no_attachments(), &image(&id, "image/png"), "X").unwrap_err();
        assert!(f.message.contains("no attachment store"), "{}", f.message);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn placeholders_follow_the_session_format() {
        let id = format!("sha256:{}", "0123456789abcdef".repeat(4));
        assert_eq!(
            image_placeholder(&image(&id, "image/png"), false),
            "[image omitted because this model accepts text only; attachment sha256:01234567]"
        );
        assert!(
            image_placeholder(&image(&id, "image/png"), true).starts_with(&format!(
                "[image omitted to fit request image limits; {id}."
            ))
        );
    }
}
