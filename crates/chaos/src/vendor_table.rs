//! The vendor error table: what each vendor really sends when something goes wrong, and the
//! kind and disposition a correct adapter gives it.
//!
//! The rows live in `fixtures/vendor_errors.toml`, as data, so the tests iterate over them and
//! a new observation is one more row. Each row names the vendor (a provider kind of the
//! config: `openai`, `anthropic`, `azure-openai`, `deepseek`, `zhipu`, `qwen`, `moonshot`,
//! `qianfan`, `ollama`, `vllm`, `local-onnx`, `gemini`, `vertex`, `vertex-anthropic`, `bedrock`,
//! `mistral`, `groq`, `xai`, `openrouter`, `together`, `fireworks`, `cerebras`), the exact
//! status, headers and body bytes (a stream's bytes for `stream = true` rows; for Bedrock's
//! binary event stream, the `frames` — headers and payload of each message, encoded with their
//! CRCs when the row is replayed, optionally corrupted or cut), how the body ends on the wire,
//! the expected
//! [`ErrorKind`] and [`Disposition`], and a `source` naming the vendor page (or the public
//! report quoting the vendor's answer) the phrasing comes from. Its [`Evidence`] says how much
//! of the body is the vendor's own bytes: all of it (the default), the message only, or — where
//! no capture exists anywhere — only the documented status, type and shape.
//!
//! `local-onnx` has no wire. Its rows are the local model's own failure conditions (a missing
//! folder or file, a corrupt model, an unusable runtime library, a request the model cannot
//! serve), named by `case`; the local-onnx crate plays each against a copy of the tiny test
//! model and checks the same kind and disposition.
//!
//! # Examples
//!
//! ```
//! use ripcord_chaos::vendor_table;
//! let rows = vendor_table::rows()?;
//! assert!(rows.iter().filter(|r| r.vendor == "openai").count() >= 8);
//! let r = &rows[0];
//! assert!(!r.source.is_empty());
//! # Ok::<(), String>(())
//! ```

use std::time::Duration;

use ripcord_core::{Disposition, ErrorKind};
use serde::Deserialize;

use crate::script::{Behavior, RawEnd, RawResponse};

/// The table, as shipped with this crate.
pub const TABLE: &str = include_str!("../fixtures/vendor_errors.toml");

/// The provider kinds the table covers (every `ProviderKind` of the config).
pub const VENDORS: [&str; 22] = [
    "openai",
    "anthropic",
    "azure-openai",
    "deepseek",
    "zhipu",
    "qwen",
    "moonshot",
    "qianfan",
    "ollama",
    "vllm",
    "local-onnx",
    "gemini",
    "vertex",
    "vertex-anthropic",
    "bedrock",
    "mistral",
    "groq",
    "xai",
    "openrouter",
    "together",
    "fireworks",
    "cerebras",
];

/// One observed vendor failure and its expected classification.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Row {
    /// The provider kind (see [`VENDORS`]).
    pub vendor: String,
    /// A short name, unique per vendor.
    pub name: String,
    /// Where the phrasing comes from.
    pub source: String,
    /// The HTTP status (wire rows).
    #[serde(default)]
    pub status: Option<u16>,
    /// Response headers, in order.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The request streams (`stream: true`) and the body is the SSE stream.
    #[serde(default)]
    pub stream: bool,
    /// The exact body bytes.
    #[serde(default)]
    pub body: String,
    /// Binary event-stream messages (Bedrock), sent in place of `body`.
    #[serde(default)]
    pub frames: Vec<Frame>,
    /// How the body ends on the wire.
    #[serde(default)]
    pub end: RawEnd,
    /// For `local-onnx`: which local failure condition to provoke.
    #[serde(default)]
    pub case: Option<String>,
    /// The expected kind (snake_case, as [`ErrorKind::as_str`]).
    pub kind: String,
    /// The expected disposition: `retry`, `fallback` or `fail_fast`.
    pub disposition: String,
    /// For a `retry` row: the wait the vendor asked for, in milliseconds.
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
    /// How much of the row is the vendor's own bytes.
    #[serde(default)]
    pub evidence: Evidence,
}

/// How much of a [`Row`] was captured from the vendor, as its `source` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Evidence {
    /// The body is the vendor's answer as the cited page or report shows it.
    #[default]
    Verbatim,
    /// The message is quoted from the source; the envelope around it was not captured.
    MessageVerbatim,
    /// No capture was found anywhere: status, type and shape are the vendor's documented ones,
    /// the text is representative (the source names what was searched).
    ShapeDocumented,
}

impl Evidence {
    /// The name used in the table (`verbatim`, `message-verbatim`, `shape-documented`).
    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::Verbatim => "verbatim",
            Evidence::MessageVerbatim => "message-verbatim",
            Evidence::ShapeDocumented => "shape-documented",
        }
    }
}

/// One event-stream message of a [`Row`]: its headers (all string-valued, as Bedrock sends
/// them) and payload, encoded with real CRCs when the row is replayed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Frame {
    /// The headers, in order (`:event-type`, `:content-type`, `:message-type`, …).
    pub headers: Vec<(String, String)>,
    /// The payload (JSON text).
    #[serde(default)]
    pub payload: String,
    /// Flip the last byte: the message CRC no longer matches.
    #[serde(default)]
    pub corrupt: bool,
    /// Send only the first this many bytes of the encoded message.
    #[serde(default)]
    pub cut: Option<usize>,
}

impl Frame {
    /// The bytes of this message on the wire.
    pub fn bytes(&self) -> Vec<u8> {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut b = crate::bedrock::message(&headers, self.payload.as_bytes());
        if self.corrupt
            && let Some(last) = b.last_mut()
        {
            *last ^= 0xff;
        }
        if let Some(n) = self.cut {
            b.truncate(n);
        }
        b
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    row: Vec<Row>,
}

/// Parses [`TABLE`].
///
/// # Errors
///
/// A message naming the row and field when the table is malformed: unknown fields, an unknown
/// vendor, kind or disposition, a wire row without a status.
pub fn rows() -> Result<Vec<Row>, String> {
    parse(TABLE)
}

/// Parses a table in the format of `fixtures/vendor_errors.toml`.
///
/// # Errors
///
/// As [`rows`].
pub fn parse(text: &str) -> Result<Vec<Row>, String> {
    let file: File = toml::from_str(text).map_err(|e| format!("vendor error table: {e}"))?;
    for (n, r) in file.row.iter().enumerate() {
        let at = format!("vendor error table row {} ({}/{})", n + 1, r.vendor, r.name);
        if !VENDORS.contains(&r.vendor.as_str()) {
            return Err(format!("{at}: unknown vendor {:?}", r.vendor));
        }
        if r.source.trim().is_empty() {
            return Err(format!("{at}: `source` is empty"));
        }
        r.expected_kind().map_err(|e| format!("{at}: {e}"))?;
        r.expected_disposition().map_err(|e| format!("{at}: {e}"))?;
        match (r.vendor.as_str(), r.status, &r.case) {
            ("local-onnx", _, None) => return Err(format!("{at}: a local row needs `case`")),
            ("local-onnx", _, Some(_)) => {}
            (_, None, _) => return Err(format!("{at}: a wire row needs `status`")),
            _ => {}
        }
        if !r.frames.is_empty() && !r.body.is_empty() {
            return Err(format!("{at}: a row has `frames` or `body`, not both"));
        }
        if r.evidence != Evidence::Verbatim && !r.source.contains("https://") {
            return Err(format!(
                "{at}: a {} row must cite the page its status and shape come from",
                r.evidence.as_str()
            ));
        }
    }
    Ok(file.row)
}

impl Row {
    /// The expected kind.
    ///
    /// # Errors
    ///
    /// The name is not a kind.
    pub fn expected_kind(&self) -> Result<ErrorKind, String> {
        ErrorKind::parse(&self.kind).ok_or_else(|| format!("unknown kind {:?}", self.kind))
    }

    /// The expected disposition (a `retry` carries [`Row::retry_after_ms`]).
    ///
    /// # Errors
    ///
    /// The name is not `retry`, `fallback` or `fail_fast`.
    pub fn expected_disposition(&self) -> Result<Disposition, String> {
        match self.disposition.as_str() {
            "retry" => Ok(Disposition::Retry {
                after: self.retry_after_ms.map(Duration::from_millis),
            }),
            "fallback" => Ok(Disposition::Fallback),
            "fail_fast" => Ok(Disposition::FailFast),
            other => Err(format!("unknown disposition {other:?}")),
        }
    }

    /// The fake vendor's behaviour that replays this row byte for byte.
    pub fn behavior(&self) -> Behavior {
        Behavior::Raw(RawResponse {
            status: self.status.unwrap_or(200),
            headers: self.headers.clone(),
            body: self.body_bytes(),
            end: self.end,
        })
    }

    /// The body on the wire: `body`, or the encoded `frames`.
    pub fn body_bytes(&self) -> Vec<u8> {
        if self.frames.is_empty() {
            return self.body.as_bytes().to_vec();
        }
        self.frames.iter().flat_map(Frame::bytes).collect()
    }

    /// `vendor/name`, for messages.
    pub fn label(&self) -> String {
        format!("{}/{}", self.vendor, self.name)
    }
}
