//! The HTTP plumbing every adapter shares: one pooled client, time limits by phase, API keys
//! that never leak, and the mapping of transport failures to ripcord errors.
//!
//! # The client underneath
//!
//! By default requests go through hyper-util's pooled client (HTTP/1.1 and HTTP/2 over rustls
//! with the webpki roots) — the stack reqwest itself runs on. ripcord builds each request from
//! parts prepared when the provider is built (the parsed URI, the fixed headers with the key),
//! so a call pays for none of reqwest's per-request layers: it re-parses every request's URL in
//! its redirect layer even with redirects off, wraps each request in a retry layer and matches
//! proxies. Measured by `cargo xtask bench`, those layers cost about a third of a loopback
//! call's client CPU. A reqwest client is still used when you pass one
//! ([`HttpClient::from_reqwest`]: proxies, extra roots) and when a proxy is configured in the
//! environment (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`), which reqwest honours.
//!
//! # Why the limits are enforced here and not by the client
//!
//! HTTP clients offer a connect timeout and a whole-request timeout. The first is exactly what
//! we want for [`TimeoutPhase::Connect`] (the only phase a client can tell apart), so it is
//! configured on the client. The others are not one number: waiting
//! for the first token, the gap between two stream events and the caller's deadline are three
//! different limits with three different remedies (see rule 4 of docs/pitfalls.md), so each await on the
//! network goes through [`guard`], which races it against the phase limit, the
//! [`Context`] deadline and the caller's cancellation, and reports which one fired.
//!
//! # Where things are
//!
//! - [`client`]: the two-engine client ([`HttpClient`]: hyper-util, or reqwest for proxies).
//! - [`auth`]: the auth header built once from the key, and scrubbing of echoed keys.
//! - [`target`]: base URL + path checks, and endpoints parsed once.
//! - [`transport`]: a provider's client, headers and limits, and its one [`Transport::send`]
//!   path — every adapter's non-2xx answer is read and classified there.
//! - [`body`]: responses and their bodies, whole or as a stream of pieces.
//! - [`limits`]: the phase limits ([`Timeouts`]) and [`guard`], which enforces them.
//! - [`errors`]: transport failures mapped to ripcord errors.
//! - [`liveness`]: the model-list `GET` an open breaker probes a vendor with.

mod auth;
mod body;
mod client;
mod errors;
mod limits;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod liveness;
// Every adapter configuration embeds it; a build with no adapter has none.
with_any_adapter! {
    mod settings;
}
mod target;
mod transport;

pub(crate) use auth::Auth;
with_any_adapter! {
    pub(crate) use settings::{Settings, settings_setters};
}
// What only the vendor adapters use: a build with none of them has no caller.
with_any_adapter! {
    #[unused_without]
    pub(crate) use self::{
        body::{BodyStream, Response, TransportError, is_json, read_body},
        limits::{Limit, guard, guard_until, precheck},
        target::{Target, endpoint, env},
        transport::Transport,
    };
}
pub use body::{DEFAULT_RESPONSE_BUFFER_LIMIT, response_bytes_buffered, set_response_buffer_limit};
pub use client::HttpClient;
#[cfg(feature = "reqwest")]
pub(crate) use errors::chain;
pub(crate) use errors::{Stage, excerpt, transport_error};
pub use limits::{
    DEFAULT_FIRST_TOKEN, DEFAULT_MAX_SKIPPED_EVENTS, DEFAULT_STREAM_FIRST_TOKEN,
    DEFAULT_STREAM_IDLE, Timeouts,
};
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub(crate) use liveness::ListModels;
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub(crate) use target::add_custom_headers;
#[cfg(any(feature = "gemini", feature = "vertex-anthropic", feature = "bedrock"))]
pub(crate) use target::custom_headers;
#[cfg(feature = "bedrock")]
pub(crate) use transport::Sign;
