//! Requests as the fake vendor received them.

use std::fmt;
use std::time::Instant;

/// One request the server received, recorded before it was answered (so a test can inspect a
/// request the server is hanging on).
///
/// `Debug` redacts credential headers (`authorization`, `x-api-key`, `api-key`, and anything
/// else whose name contains `key`, `token` or `secret`) so a recording can be logged safely.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use ripcord_chaos::{FakeVendor, Wire};
/// let fake = FakeVendor::start(Wire::Anthropic).await?;
/// reqwest::Client::new()
///     .post(format!("{}/v1/messages", fake.base_url()))
///     .header("x-api-key", "sk-ant-test")
///     .json(&serde_json::json!({"model": "claude-x", "max_tokens": 16,
///                               "messages": [{"role": "user", "content": "hi"}]}))
///     .send()
///     .await?;
/// let seen = &fake.requests()[0];
/// assert_eq!(seen.path, "/v1/messages");
/// assert_eq!(seen.header("X-API-Key"), Some("sk-ant-test"));
/// assert_eq!(seen.json().map(|v| v["max_tokens"].clone()), Some(16.into()));
/// assert!(!format!("{seen:?}").contains("sk-ant-test"));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RecordedRequest {
    /// The method, e.g. `POST`.
    pub method: String,
    /// The request target: path and query, e.g. `/openai/deployments/d/chat/completions?api-version=2024-10-21`.
    pub path: String,
    /// Headers in order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked if it was sent chunked.
    pub body: Vec<u8>,
    /// When the request was fully read.
    pub at: Instant,
    /// Which connection it came on: connections are numbered from 1 in accept order, so two
    /// requests with the same number were sent over one kept-alive connection.
    pub conn: u64,
}

impl RecordedRequest {
    /// The body parsed as JSON, or `None` if it is not JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The path without the query string.
    pub fn path_only(&self) -> &str {
        self.path
            .split_once('?')
            .map_or(self.path.as_str(), |(p, _)| p)
    }

    /// The value of a query parameter (not percent-decoded).
    pub fn query(&self, name: &str) -> Option<&str> {
        let (_, query) = self.path.split_once('?')?;
        query
            .split('&')
            .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }
}

/// Header names whose values are never printed.
fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == "authorization"
        || n == "proxy-authorization"
        || n == "cookie"
        || n.contains("key")
        || n.contains("token")
        || n.contains("secret")
}

impl fmt::Debug for RecordedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Headers<'a>(&'a [(String, String)]);
        impl fmt::Debug for Headers<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_list()
                    .entries(self.0.iter().map(|(n, v)| {
                        let shown = if is_secret(n) {
                            "[redacted]"
                        } else {
                            v.as_str()
                        };
                        (n.as_str(), shown)
                    }))
                    .finish()
            }
        }
        f.debug_struct("RecordedRequest")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("headers", &Headers(&self.headers))
            .field("body", &String::from_utf8_lossy(&self.body))
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors_and_redaction() {
        let r = RecordedRequest {
            method: "POST".to_owned(),
            path: "/openai/deployments/d/chat/completions?api-version=2024-10-21&x".to_owned(),
            headers: vec![
                ("authorization".to_owned(), "Bearer sk-secret-1".to_owned()),
                ("api-key".to_owned(), "azure-secret-2".to_owned()),
                ("content-type".to_owned(), "application/json".to_owned()),
            ],
            body: br#"{"a":1}"#.to_vec(),
            at: Instant::now(),
            conn: 1,
        };
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        assert_eq!(r.query("api-version"), Some("2024-10-21"));
        assert_eq!(r.query("x"), Some(""));
        assert_eq!(r.query("nope"), None);
        assert_eq!(r.path_only(), "/openai/deployments/d/chat/completions");
        assert_eq!(r.json().map(|v| v["a"].clone()), Some(1.into()));
        let dbg = format!("{r:?}");
        assert!(
            !dbg.contains("sk-secret-1") && !dbg.contains("azure-secret-2"),
            "{dbg}"
        );
        assert!(dbg.contains("application/json"));
    }
}
