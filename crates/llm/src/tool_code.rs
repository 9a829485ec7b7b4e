//! The machine code of a failed tool call ([`ToolErrorCode`]): what `tool/result.error.code`
//! carries in the session log and what the tools pipeline, the tools and crash repair produce.
//!
//! It lives in the LLM seam because both sides of a tool result depend on this crate: the
//! tools service (`dsh-tools`) that produces results and the session log (`dsh-session`) that
//! stores them; neither depends on the other.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Declares [`ToolErrorCode`] with its wire strings, in one place.
macro_rules! tool_error_codes {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal;)*) => {
        /// The machine code of a failed tool call (`architecture.md` §7). The wire string
        /// appears only at the edge (serde, logs, [`ToolErrorCode::as_str`]); code matches on
        /// variants.
        ///
        /// The variants are the codes of the pipeline and of crash repair. A tool's own codes
        /// (`FS_NOT_FOUND`, `BASH_SPAWN_FAILED`, …) are [`ToolErrorCode::Other`], declared as
        /// constants with [`ToolErrorCode::tool_defined`] in the tool's crate. A code from
        /// another writer's log that this build does not know is kept verbatim as `Other` too
        /// and written back unchanged: never mapped to a default.
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum ToolErrorCode {
            $($(#[$doc])* $variant,)*
            /// Any other code, kept verbatim: a tool-defined code or one this build does not
            /// know. Build it with [`ToolErrorCode::from_wire`] (or
            /// [`ToolErrorCode::tool_defined`] for a constant) so that a known spelling never
            /// lands here.
            Other(Cow<'static, str>),
        }

        impl ToolErrorCode {
            /// Every named code, in declaration order (for tests and schemas).
            pub const KNOWN: &'static [ToolErrorCode] = &[$(ToolErrorCode::$variant,)*];

            /// The wire spelling (`INVALID_ARGS`, …; an `Other` code verbatim).
            pub fn as_str(&self) -> &str {
                match self {
                    $(ToolErrorCode::$variant => $wire,)*
                    ToolErrorCode::Other(s) => s,
                }
            }

            /// Parses a wire spelling; spellings outside the named set become
            /// [`ToolErrorCode::Other`].
            pub fn from_wire(s: &str) -> Self {
                match s {
                    $($wire => ToolErrorCode::$variant,)*
                    other => ToolErrorCode::Other(Cow::Owned(other.to_owned())),
                }
            }
        }
    };
}

tool_error_codes! {
    /// The tool is not registered, or not visible to the calling scope.
    UnknownTool => "UNKNOWN_TOOL";
    /// The arguments are not valid JSON or do not match the tool's schema (or a check beyond
    /// the schema refused them).
    InvalidArgs => "INVALID_ARGS";
    /// The tool's deadline passed (the timeout-policy plugin).
    ToolTimeout => "TOOL_TIMEOUT";
    /// The call was cancelled before its body started.
    AbortedBeforeDispatch => "ABORTED_BEFORE_DISPATCH";
    /// The call was cancelled while its body ran.
    Aborted => "ABORTED";
    /// Crash repair: a call requested but never started.
    ToolNotStarted => "TOOL_NOT_STARTED";
    /// Crash repair: a call started but its result was not recorded.
    ToolOutcomeUnknown => "TOOL_OUTCOME_UNKNOWN";
    /// A `tools/pre-execute` listener, the approval service or a guard denied the call.
    ToolDenied => "TOOL_DENIED";
    /// A `tools/post-execute` listener blocked the result.
    ToolBlocked => "TOOL_BLOCKED";
    /// The tool body (or a listener) failed without a code of its own, or panicked.
    ToolFailed => "TOOL_FAILED";
    /// A post-execute listener returned an invalid decision.
    InvalidToolOutput => "INVALID_TOOL_OUTPUT";
    /// The read-before-write policy refused a write or edit (the file was never read).
    FsNotObserved => "FS_NOT_OBSERVED";
}

impl ToolErrorCode {
    /// A tool's own code as a constant (`pub const FS_NOT_FOUND: ToolErrorCode =
    /// ToolErrorCode::tool_defined("FS_NOT_FOUND");`). `code` must not be one of the named
    /// spellings (those have variants); the tests of the declaring crate check that with
    /// [`ToolErrorCode::is_canonical`].
    pub const fn tool_defined(code: &'static str) -> Self {
        ToolErrorCode::Other(Cow::Borrowed(code))
    }

    /// False for an `Other` code whose spelling has a named variant (a constant declared with
    /// [`ToolErrorCode::tool_defined`] by mistake); such a code would not compare equal to the
    /// variant.
    pub fn is_canonical(&self) -> bool {
        match self {
            ToolErrorCode::Other(s) => matches!(Self::from_wire(s), ToolErrorCode::Other(_)),
            _ => true,
        }
    }

    /// The error class name derived from the code, as the original harness writes it in
    /// `tool/result.error.name`: `SOME_CODE` → `SomeCodeError`, the two abort codes →
    /// `AbortError`.
    pub fn error_name(&self) -> String {
        if matches!(
            self,
            ToolErrorCode::Aborted | ToolErrorCode::AbortedBeforeDispatch
        ) {
            return "AbortError".to_owned();
        }
        let code = self.as_str();
        let mut name = String::with_capacity(code.len() + 5);
        for part in code.split('_').filter(|p| !p.is_empty()) {
            let mut chars = part.chars();
            if let Some(first) = chars.next() {
                name.push(first.to_ascii_uppercase());
                name.extend(chars.map(|c| c.to_ascii_lowercase()));
            }
        }
        name.push_str("Error");
        name
    }
}

impl fmt::Display for ToolErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for ToolErrorCode {
    fn from(s: &str) -> Self {
        Self::from_wire(s)
    }
}

impl From<String> for ToolErrorCode {
    fn from(s: String) -> Self {
        match Self::from_wire(&s) {
            ToolErrorCode::Other(_) => ToolErrorCode::Other(Cow::Owned(s)),
            known => known,
        }
    }
}

impl PartialEq<str> for ToolErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ToolErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for ToolErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ToolErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = Cow::<'de, str>::deserialize(deserializer)?;
        Ok(match s {
            Cow::Borrowed(s) => Self::from_wire(s),
            Cow::Owned(s) => Self::from(s),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_code_round_trips_on_the_wire() {
        for code in ToolErrorCode::KNOWN {
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            let back: ToolErrorCode = serde_json::from_str(&json).unwrap();
            assert_eq!(&back, code);
            assert!(!matches!(back, ToolErrorCode::Other(_)), "{json}");
        }
        assert_eq!(
            serde_json::to_string(&ToolErrorCode::AbortedBeforeDispatch).unwrap(),
            "\"ABORTED_BEFORE_DISPATCH\""
        );
    }

    #[test]
    fn unknown_codes_are_kept_verbatim() {
        for wire in ["FS_NOT_FOUND", "SOMEONE_ELSES_CODE", "aborted", ""] {
            let json = serde_json::to_string(wire).unwrap();
            let code: ToolErrorCode = serde_json::from_str(&json).unwrap();
            assert_eq!(code, ToolErrorCode::Other(Cow::Owned(wire.to_owned())));
            assert_eq!(serde_json::to_string(&code).unwrap(), json);
        }
        // An escaped string deserializes through the owned path: same result.
        let code: ToolErrorCode = serde_json::from_str(r#""TOOL\u005fDENIED""#).unwrap();
        assert_eq!(code, ToolErrorCode::ToolDenied);
    }

    #[test]
    fn tool_defined_constants_compare_with_parsed_codes() {
        const FS_NOT_FOUND: ToolErrorCode = ToolErrorCode::tool_defined("FS_NOT_FOUND");
        assert_eq!(ToolErrorCode::from_wire("FS_NOT_FOUND"), FS_NOT_FOUND);
        assert!(FS_NOT_FOUND.is_canonical());
        assert!(!ToolErrorCode::tool_defined("ABORTED").is_canonical());
        assert_eq!(FS_NOT_FOUND, "FS_NOT_FOUND");
    }

    #[test]
    fn error_names_follow_the_original() {
        assert_eq!(ToolErrorCode::ToolTimeout.error_name(), "ToolTimeoutError");
        assert_eq!(ToolErrorCode::Aborted.error_name(), "AbortError");
        assert_eq!(
            ToolErrorCode::AbortedBeforeDispatch.error_name(),
            "AbortError"
        );
        assert_eq!(
            ToolErrorCode::ToolOutcomeUnknown.error_name(),
            "ToolOutcomeUnknownError"
        );
        assert_eq!(
            ToolErrorCode::from_wire("FS_NOT_FOUND").error_name(),
            "FsNotFoundError"
        );
    }
}
