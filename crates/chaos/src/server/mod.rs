//! The fake vendor server: accept loop, connections and routing (the behaviours are in
//! `exchange`).
//!
//! Ownership is the point of the design. The accept loop is one task; it owns a `JoinSet`
//! with one task per connection. Dropping the [`FakeVendor`] closes the listening socket at
//! once (so a new connection is refused immediately, not "soon") and aborts the accept task,
//! which drops the `JoinSet` and with it every connection, hung or streaming. Nothing is
//! detached; nothing outlives the server.
//!
//! The listener sits in a mutex that the accept loop locks only for one `poll_accept` call, so
//! `Drop` can take it out synchronously.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::Wire;
use crate::google_token::TokenRegistry;
use crate::http::{Conn, Framing, ReadError, accept_loop, write_head};
use crate::record::RecordedRequest;
use crate::reply::Reply;
use crate::script::{Plan, Script};

mod exchange;

use exchange::respond;

/// Options for [`FakeVendor::start_with`].
///
/// # Examples
///
/// ```
/// use ripcord_chaos::{FakeOptions, Reply};
/// // A benchmark upstream: no recording, a fixed answer.
/// let opts = FakeOptions { record: false, reply: Reply::text("pong"), ..FakeOptions::default() };
/// assert_eq!(opts.embedding_dimensions, 8);
/// ```
#[derive(Debug, Clone)]
pub struct FakeOptions {
    /// Record every request (default `true`). Turn off for benchmarks and long chaos runs;
    /// [`FakeVendor::hits`] still counts.
    pub record: bool,
    /// The answer of [`Behavior::Ok`](crate::Behavior::Ok) and of the other behaviours that send an answer.
    pub reply: Reply,
    /// The initial script (default: always [`Behavior::Ok`](crate::Behavior::Ok)).
    pub script: Script,
    /// Embedding dimensions when the request does not ask for `dimensions` (default 8).
    pub embedding_dimensions: usize,
}

impl Default for FakeOptions {
    fn default() -> Self {
        FakeOptions {
            record: true,
            reply: Reply::default(),
            script: Script::default(),
            embedding_dimensions: 8,
        }
    }
}

impl FakeOptions {
    /// Options for a benchmark upstream: recording off, everything else default.
    pub fn fast() -> Self {
        FakeOptions {
            record: false,
            ..FakeOptions::default()
        }
    }

    /// Sets the default reply.
    pub fn with_reply(mut self, reply: Reply) -> Self {
        self.reply = reply;
        self
    }

    /// Sets the initial script.
    pub fn with_script(mut self, script: Script) -> Self {
        self.script = script;
        self
    }
}

/// A fake vendor listening on `127.0.0.1` with an ephemeral port.
///
/// It serves the chosen [`Wire`] and plays its [`Script`] per request to a model endpoint
/// (chat completions, messages, embeddings); `GET .../models` always answers. Dropping it
/// shuts it down: the port is closed at once and every open connection is aborted.
///
/// Routes (the path without its query decides; anything else is a vendor-style 404):
///
/// | wire | route | answer |
/// | --- | --- | --- |
/// | OpenAI | `POST …/chat/completions` (e.g. `/v1/chat/completions`, Azure's `/openai/deployments/{d}/chat/completions?api-version=…`, a preset's `/api/paas/v4/chat/completions`) | scripted |
/// | OpenAI | `POST …/responses` (`/v1/responses`, Azure's `/openai/v1/responses`) | scripted, on the Responses wire |
/// | OpenAI | `POST …/embeddings` | scripted; deterministic unit vectors |
/// | OpenAI | `GET …/models` | model list |
/// | Anthropic | `POST /v1/messages` | scripted |
/// | Anthropic | `GET /v1/models` | model list |
/// | Bedrock | `POST /model/{modelId}/converse`, `/converse-stream` | SigV4 / API key checked, then scripted |
/// | Anthropic | `POST …/publishers/anthropic/models/{m}:rawPredict` / `:streamRawPredict` (Claude on Vertex AI) | scripted |
/// | Gemini | `POST …/models/{m}:generateContent` / `:streamGenerateContent` (AI Studio's `/v1beta/models/…`, Vertex's `/v1/projects/{p}/locations/{l}/publishers/google/models/…`) | scripted |
/// | Gemini | `POST …/models/{m}:embedContent` / `:batchEmbedContents` | scripted; deterministic unit vectors |
/// | Gemini | `POST …/publishers/google/models/{m}:predict` (Vertex AI text embeddings) | scripted; deterministic unit vectors, `statistics.token_count` |
/// | Gemini | `GET …/models` | model list |
///
/// A model request whose body is not JSON, or lacks a field the vendor requires (`model` and
/// `messages`; Anthropic also `max_tokens`; embeddings `input`; Azure takes the model from the
/// URL; Claude on Vertex needs `anthropic_version` and takes the model from the URL; Gemini
/// needs `contents`), gets the vendor's 400 without consulting the script. It still counts as a
/// hit. With [`FakeVendor::require_tokens`], a request without a valid bearer token gets a 401.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
/// let fake = FakeVendor::start(Wire::OpenAi).await?;
/// fake.set_script(Script::Sequence(vec![
///     Behavior::Error(VendorError::RateLimited { retry_after: Some(Duration::from_secs(2)) }),
///     Behavior::Ok,
/// ]));
/// let client = reqwest::Client::new();
/// let body = serde_json::json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]});
/// let url = format!("{}/v1/chat/completions", fake.base_url());
/// let first = client.post(&url).json(&body).send().await?;
/// assert_eq!(first.status(), 429);
/// assert_eq!(first.headers()["retry-after"], "2");
/// let second: serde_json::Value = client.post(&url).json(&body).send().await?.json().await?;
/// assert_eq!(second["choices"][0]["message"]["content"], "Hello! How can I help you today?");
/// assert_eq!(fake.hits(), 2);
/// # Ok(()) }
/// ```
pub struct FakeVendor {
    shared: Arc<Shared>,
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

struct Shared {
    wire: Wire,
    record: bool,
    reply: Reply,
    embedding_dimensions: usize,
    listener: Mutex<Option<TcpListener>>,
    script: Mutex<ScriptSlot>,
    log: Mutex<Vec<RecordedRequest>>,
    hits: AtomicUsize,
    responses: AtomicU64,
    connections: AtomicU64,
    /// Held answers (a hang or a stall) that ended because the client left.
    abandoned: AtomicUsize,
    /// When set, model requests must carry a bearer token this registry minted (Vertex AI).
    tokens: Mutex<Option<TokenRegistry>>,
}

struct ScriptSlot {
    plan: Plan,
    since: Instant,
}

/// Locks a mutex, ignoring poisoning: every critical section here leaves the data valid.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeVendor {
    /// Starts a server for `wire` on `127.0.0.1:0` that records requests and answers
    /// [`Behavior::Ok`](crate::Behavior::Ok) until told otherwise.
    ///
    /// # Errors
    ///
    /// Binding the socket failed.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime (the server's tasks are spawned on the current runtime).
    pub async fn start(wire: Wire) -> std::io::Result<FakeVendor> {
        FakeVendor::start_with(wire, FakeOptions::default()).await
    }

    /// Starts a server with options.
    ///
    /// # Errors
    ///
    /// Binding the socket failed.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime.
    pub async fn start_with(wire: Wire, opts: FakeOptions) -> std::io::Result<FakeVendor> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            wire,
            record: opts.record,
            reply: opts.reply,
            embedding_dimensions: opts.embedding_dimensions.max(1),
            listener: Mutex::new(Some(listener)),
            script: Mutex::new(ScriptSlot {
                plan: Plan::new(&opts.script),
                since: Instant::now(),
            }),
            log: Mutex::new(Vec::new()),
            hits: AtomicUsize::new(0),
            responses: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            abandoned: AtomicUsize::new(0),
            tokens: Mutex::new(None),
        });
        let accept = tokio::spawn(accept_loop(
            Arc::clone(&shared),
            |s| &s.listener,
            |shared: Arc<Shared>, stream| {
                let id = shared.connections.fetch_add(1, Ordering::Relaxed) + 1;
                serve(shared, stream, id)
            },
        ));
        Ok(FakeVendor {
            shared,
            addr,
            accept,
        })
    }

    /// The wire this server speaks.
    pub fn wire(&self) -> Wire {
        self.shared.wire
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash or `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Replaces the behaviour for the following requests; the script's clock and counters
    /// start over now.
    pub fn set_script(&self, script: Script) {
        self.set_script_since(script, Instant::now());
    }

    /// Replaces the script with its clock starting at `since` (which may be in the past), so
    /// that several servers can share one scenario timeline.
    pub fn set_script_since(&self, script: Script, since: Instant) {
        let plan = Plan::new(&script);
        *lock(&self.shared.script) = ScriptSlot { plan, since };
    }

    /// Every request received (if recording), in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.log).clone()
    }

    /// Number of requests to model endpoints (chat completions, messages, embeddings).
    pub fn hits(&self) -> usize {
        self.shared.hits.load(Ordering::SeqCst)
    }

    /// How many held answers ([`Behavior::HangBeforeHeaders`](crate::Behavior::HangBeforeHeaders),
    /// [`Behavior::StallMidStream`](crate::Behavior::StallMidStream)) have ended because the
    /// client closed or reset its connection: a client that gave up on its call. (A hold
    /// ended by dropping the server is not counted.)
    pub fn abandoned(&self) -> usize {
        self.shared.abandoned.load(Ordering::SeqCst)
    }

    /// From now on, model requests must carry `Authorization: Bearer <token>` with a token
    /// `registry` minted and that has not expired (as Vertex AI checks OAuth access tokens);
    /// others get Vertex's `401 UNAUTHENTICATED` without consulting the script. The registry
    /// comes from a [`GoogleTokenServer`](crate::google_token::GoogleTokenServer).
    pub fn require_tokens(&self, registry: TokenRegistry) {
        *lock(&self.shared.tokens) = Some(registry);
    }

    /// Forgets recorded requests and hits.
    pub fn clear(&self) {
        // Under the log lock, so a concurrent request is either fully before or fully after.
        let mut log = lock(&self.shared.log);
        log.clear();
        self.shared.hits.store(0, Ordering::SeqCst);
    }
}

impl fmt::Debug for FakeVendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeVendor")
            .field("wire", &self.shared.wire)
            .field("addr", &self.addr)
            .field("record", &self.shared.record)
            .field("hits", &self.hits())
            .finish_non_exhaustive()
    }
}

impl Drop for FakeVendor {
    fn drop(&mut self) {
        // Close the port now: connecting after drop must be refused, deterministically.
        drop(lock(&self.shared.listener).take());
        // Dropping the accept task drops its JoinSet, which aborts every connection task.
        self.accept.abort();
    }
}

/// How a connection continues after a response.
enum After {
    /// The response is complete; keep the connection if the request allows it.
    Continue,
    /// Close the connection (FIN).
    Close,
    /// Reset the connection (RST).
    Reset,
}

async fn serve(shared: Arc<Shared>, stream: TcpStream, id: u64) {
    let mut conn = Conn::new(stream);
    let mut out = Vec::with_capacity(4096);
    loop {
        // Bedrock's requests are authenticated from their headers, Vertex AI's from their
        // bearer token: keep the headers for them.
        let keep_headers =
            shared.record || shared.wire == Wire::Bedrock || lock(&shared.tokens).is_some();
        let req = match conn.read_request(keep_headers).await {
            Ok(Some(req)) => req,
            Ok(None) | Err(ReadError::Io) => return,
            Err(ReadError::Bad(status, message)) => {
                out.clear();
                let body = format!("bad request: {message}\n");
                write_head(
                    &mut out,
                    status,
                    Some("text/plain"),
                    &[],
                    Framing::Length(body.len()),
                    true,
                );
                out.extend_from_slice(body.as_bytes());
                conn.send(&out).await;
                return;
            }
        };
        let route = route(shared.wire, &req.method, &req.path);
        if matches!(
            route,
            Route::Chat { .. } | Route::Embeddings { .. } | Route::Responses
        ) {
            shared.hits.fetch_add(1, Ordering::SeqCst);
        }
        if shared.record {
            let recorded = RecordedRequest {
                method: req.method.clone(),
                path: req.path.clone(),
                headers: req.headers.clone(),
                body: req.body.clone(),
                at: std::time::Instant::now(),
                conn: id,
            };
            lock(&shared.log).push(recorded);
        }
        out.clear();
        let after = respond(&shared, &mut conn, &mut out, &req, route).await;
        match after {
            After::Continue if req.keep_alive => {}
            After::Continue | After::Close => return,
            After::Reset => {
                conn.reset();
                return;
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Chat { azure: bool },
    Responses,
    Embeddings { azure: bool },
    Models,
    MethodNotAllowed,
    NotFound,
}

/// `azure` marks the paths that name the model in the URL instead of the body: Azure's
/// deployments, and Vertex AI's `…/publishers/anthropic/models/{m}:rawPredict`.
fn route(wire: Wire, method: &str, target: &str) -> Route {
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    let path = path.strip_suffix('/').unwrap_or(path);
    let azure = path.starts_with("/openai/deployments/");
    let vertex_claude = path.contains("/publishers/anthropic/models/")
        && (path.ends_with(":rawPredict") || path.ends_with(":streamRawPredict"));
    let gemini = crate::gemini::model_and_method(path).map(|(_, m)| m);
    let (route, want) = match wire {
        Wire::Anthropic if vertex_claude => (Route::Chat { azure: true }, "POST"),
        Wire::Gemini => match gemini {
            Some("generateContent" | "streamGenerateContent") => {
                (Route::Chat { azure: false }, "POST")
            }
            Some("embedContent" | "batchEmbedContents" | "predict") => {
                (Route::Embeddings { azure: false }, "POST")
            }
            None if path.ends_with("/models") => (Route::Models, "GET"),
            _ => return Route::NotFound,
        },
        Wire::OpenAi if path.ends_with("/chat/completions") => (Route::Chat { azure }, "POST"),
        Wire::OpenAi if path.ends_with("/embeddings") => (Route::Embeddings { azure }, "POST"),
        Wire::OpenAi if path.ends_with("/responses") => (Route::Responses, "POST"),
        Wire::OpenAi if path.ends_with("/models") => (Route::Models, "GET"),
        Wire::Anthropic if path == "/v1/messages" => (Route::Chat { azure: false }, "POST"),
        Wire::Anthropic if path == "/v1/models" => (Route::Models, "GET"),
        Wire::Bedrock
            if path.starts_with("/model/")
                && (path.ends_with("/converse") || path.ends_with("/converse-stream")) =>
        {
            (Route::Chat { azure: false }, "POST")
        }
        _ => return Route::NotFound,
    };
    if method.eq_ignore_ascii_case(want) {
        route
    } else {
        Route::MethodNotAllowed
    }
}

/// What the request asked for, as far as the fake cares.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        use Route::*;
        let cases = [
            (
                Wire::OpenAi,
                "POST",
                "/v1/chat/completions",
                Chat { azure: false },
            ),
            (
                Wire::OpenAi,
                "POST",
                "/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21",
                Chat { azure: true },
            ),
            (
                Wire::OpenAi,
                "POST",
                "/api/paas/v4/chat/completions",
                Chat { azure: false },
            ),
            (
                Wire::OpenAi,
                "POST",
                "/v1/embeddings",
                Embeddings { azure: false },
            ),
            (
                Wire::OpenAi,
                "POST",
                "/openai/deployments/emb/embeddings?api-version=1",
                Embeddings { azure: true },
            ),
            (Wire::OpenAi, "GET", "/v1/models", Models),
            (Wire::OpenAi, "POST", "/v1/responses", Responses),
            (Wire::OpenAi, "POST", "/openai/v1/responses", Responses),
            (Wire::Anthropic, "POST", "/v1/responses", NotFound),
            (
                Wire::OpenAi,
                "GET",
                "/v1/chat/completions",
                MethodNotAllowed,
            ),
            (Wire::OpenAi, "POST", "/v1/messages", NotFound),
            (
                Wire::Anthropic,
                "POST",
                "/v1/messages",
                Chat { azure: false },
            ),
            (Wire::Anthropic, "GET", "/v1/models", Models),
            (Wire::Anthropic, "POST", "/v1/chat/completions", NotFound),
            (Wire::Anthropic, "POST", "/v1/embeddings", NotFound),
            (
                Wire::Bedrock,
                "POST",
                "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse",
                Chat { azure: false },
            ),
            (
                Wire::Bedrock,
                "POST",
                "/model/us.x/converse-stream",
                Chat { azure: false },
            ),
            (Wire::Bedrock, "GET", "/model/x/converse", MethodNotAllowed),
            (Wire::Bedrock, "POST", "/v1/messages", NotFound),
            (
                Wire::Anthropic,
                "POST",
                "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict",
                Chat { azure: true },
            ),
            (
                Wire::Gemini,
                "POST",
                "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
                Chat { azure: false },
            ),
            (
                Wire::Gemini,
                "POST",
                "/v1/projects/p/locations/global/publishers/google/models/gemini-2.5-pro:generateContent",
                Chat { azure: false },
            ),
            (
                Wire::Gemini,
                "POST",
                "/v1beta/models/gemini-embedding-001:batchEmbedContents",
                Embeddings { azure: false },
            ),
            (Wire::Gemini, "GET", "/v1beta/models", Models),
            (
                Wire::Gemini,
                "POST",
                "/v1beta/models/x:countTokens",
                NotFound,
            ),
            (Wire::Gemini, "POST", "/v1/chat/completions", NotFound),
        ];
        for (wire, method, path, want) in cases {
            assert_eq!(route(wire, method, path), want, "{wire:?} {method} {path}");
        }
    }
}
