//! The page's files, embedded in the binary.

/// One embedded file.
#[derive(Clone, Copy, Debug)]
pub struct Asset {
    /// Its name under `/assets/`.
    pub name: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its text.
    pub body: &'static str,
}

/// The page (served at `/`; `{{ACCESS}}` becomes `full` or `read-only`).
pub(crate) const INDEX: &str = include_str!("../assets/index.html");

/// Every file under `/assets/`.
pub const ASSETS: &[Asset] = &[
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/app.js"),
    },
    Asset {
        name: "render.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/render.js"),
    },
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../assets/app.css"),
    },
];

pub(crate) fn find(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

/// A strong validator of the file's content (FNV-1a, 64 bits).
pub(crate) fn etag(asset: &Asset) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in asset.body.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("\"{h:016x}\"")
}
