//! The connection settings every adapter configuration carries, with their setters written once.
//!
//! Each vendor's configuration (`AnthropicConfig`, `OpenAiConfig`, `GeminiConfig`,
//! `VertexConfig`, `BedrockConfig`, `AzureConfig`) holds its own fields — a key, a region, a
//! deployment — beside one [`Settings`]: the base URL, the link name, the time limits, a shared
//! client, a capability override and extra headers. [`settings_setters!`] writes the public
//! `with_*` setters for that part on the configuration itself, so every caller keeps writing
//! `AnthropicConfig::new(…).with_timeouts(…)` without importing a trait, and the six setters
//! exist once instead of once per vendor.

use ripcord_core::Capabilities;
use secrecy::SecretString;

use super::{HttpClient, Timeouts};

/// What every adapter configuration carries besides its vendor's own fields.
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    /// The base URL override (each vendor has its default).
    pub(crate) base_url: Option<String>,
    /// The link name (default: the vendor's).
    pub(crate) name: Option<String>,
    /// The time limits.
    pub(crate) timeouts: Timeouts,
    /// A shared HTTP client, else the provider builds its own.
    pub(crate) client: Option<HttpClient>,
    /// Capabilities that replace the model table's.
    pub(crate) capabilities: Option<Capabilities>,
    /// Headers sent with every request, values kept secret (`Debug` shows them redacted).
    pub(crate) headers: Vec<(String, SecretString)>,
}

/// Writes the public setters of [`Settings`] on a configuration that keeps them in a field
/// named `http`.
///
/// `name:` names the default link name, for the docs. With `base_url:` (the setter's doc) the
/// configuration also gets `with_base_url` and `with_header`; without it (Azure, addressed by
/// its required endpoint) only the name, time limits, client and capabilities.
macro_rules! settings_setters {
    ($config:ty, name: $name:literal, base_url: $base_doc:literal) => {
        impl $config {
            ripcord_core::setters! {
                #[doc = $base_doc]
                with_base_url(url: impl Into<String>) => http.base_url = Some(url.into());
            }

            /// Adds a header sent with every request of this adapter: a gateway's own key
            /// behind Helicone or Portkey (`Helicone-Auth`, `x-portkey-api-key`), an
            /// organization header, a vendor's beta flag. The value is kept secret (never in
            /// logs or `Debug`); a name or value that cannot be a header, or a header ripcord
            /// sets itself (the auth header, `content-type`, …), is refused when the adapter
            /// is built. Call it again for more headers.
            pub fn with_header(
                mut self,
                name: impl Into<String>,
                value: impl Into<secrecy::SecretString>,
            ) -> Self {
                self.http.headers.push((name.into(), value.into()));
                self
            }
        }

        $crate::http::settings_setters!($config, name: $name);
    };
    ($config:ty, name: $name:literal) => {
        impl $config {
            ripcord_core::setters! {
                #[doc = concat!("Sets the link name (default ", $name, ").")]
                with_name(name: impl Into<String>) => http.name = Some(name.into());
                /// Sets the time limits (the connect limit applies when the provider builds its
                /// own client).
                with_timeouts(timeouts: $crate::Timeouts) => http.timeouts = timeouts;
                /// Uses this (shared) HTTP client.
                with_client(client: $crate::HttpClient) => http.client = Some(client);
                /// Overrides the capabilities from the model table.
                with_capabilities(caps: ripcord_core::Capabilities) => http.capabilities = Some(caps);
            }
        }
    };
}

pub(crate) use settings_setters;
