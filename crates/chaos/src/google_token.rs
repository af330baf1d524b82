//! A fake of Google's OAuth token endpoint for service accounts
//! (<https://developers.google.com/identity/protocols/oauth2/service-account#httprest>).
//!
//! `POST /token` with `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>`:
//! the assertion's RS256 signature is verified against the public half of the test key (a
//! signing bug fails here, as it would at Google), and its audience, expiry, issuer and scope
//! are checked. A good assertion gets `{"access_token", "expires_in", "token_type": "Bearer"}`
//! with a lifetime you choose (short lifetimes make refreshes happen during a test); a bad one
//! gets Google's `400 {"error":"invalid_grant","error_description":"Invalid JWT Signature."}`.
//! Every exchange is counted, and the tokens it minted can be checked by a [`FakeVendor`]
//! standing in for Vertex AI ([`FakeVendor::require_tokens`]): a request whose bearer token
//! this endpoint never issued, or issued but expired, gets Vertex's `401 UNAUTHENTICATED`
//! (an expired one with the `ACCESS_TOKEN_EXPIRED` reason Google gives), and the registry
//! counts both kinds of refusal.
//!
//! The keys are throwaway test keys generated for these tests ([`TEST_PRIVATE_KEY_PEM`],
//! [`TEST_PUBLIC_KEY_PEM`], [`WRONG_PRIVATE_KEY_PEM`]); they belong to no Google account.
//!
//! [`FakeVendor`]: crate::FakeVendor
//! [`FakeVendor::require_tokens`]: crate::FakeVendor::require_tokens

use std::collections::HashMap;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::http::{Conn, Framing, accept_loop, write_head};

/// The throwaway test key's private half (PKCS#8 PEM): signs assertions the fake accepts.
pub const TEST_PRIVATE_KEY_PEM: &str = include_str!("../fixtures/google_test_key.pem");
/// The test key's public half: what the fake verifies signatures with.
pub const TEST_PUBLIC_KEY_PEM: &str = include_str!("../fixtures/google_test_key.pub.pem");
/// Another throwaway key: assertions it signs fail verification.
pub const WRONG_PRIVATE_KEY_PEM: &str = include_str!("../fixtures/google_wrong_key.pem");
/// The service account the test key file names.
pub const TEST_CLIENT_EMAIL: &str = "ripcord-test@ripcord-fake.iam.gserviceaccount.com";
/// The project the test key file names.
pub const TEST_PROJECT: &str = "ripcord-fake";

const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// What the token endpoint does with the next exchanges.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenBehavior {
    /// Verify the assertion; mint a token for a good one, `invalid_grant` for a bad one.
    Verify,
    /// Answer this status and JSON body whatever the assertion.
    Status {
        /// The HTTP status.
        status: u16,
        /// The body.
        body: String,
    },
    /// Read the request and never answer.
    Hang,
    /// Read the request and reset the connection.
    Reset,
}

/// One exchange the endpoint received.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Exchange {
    /// The assertion's issuer (`iss`), when it could be read.
    pub issuer: Option<String>,
    /// Whether the signature and claims verified.
    pub verified: bool,
    /// Why not, when they did not.
    pub rejection: Option<String>,
}

/// Access tokens the fake endpoint minted, with their expiry: what a fake Vertex checks.
#[derive(Clone, Default)]
pub struct TokenRegistry {
    tokens: Arc<Mutex<HashMap<String, Instant>>>,
    expired: Arc<AtomicU64>,
    unknown: Arc<AtomicU64>,
}

impl fmt::Debug for TokenRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenRegistry")
            .field("tokens", &lock(&self.tokens).len())
            .field("expired_rejections", &self.expired_rejections())
            .field("unknown_rejections", &self.unknown_rejections())
            .finish()
    }
}

/// What a fake Vertex made of a request's `Authorization` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenCheck {
    /// A bearer token minted here that has not expired.
    Valid,
    /// A bearer token minted here whose lifetime is over: Google answers `401
    /// UNAUTHENTICATED` with the `ACCESS_TOKEN_EXPIRED` reason.
    Expired,
    /// No header, not a bearer token, or a token this endpoint never minted.
    Unknown,
}

impl TokenRegistry {
    /// True when `authorization` is `Bearer <token>` for a token minted here that has not
    /// expired. Counts nothing (see [`TokenRegistry::check`]).
    pub fn accepts(&self, authorization: Option<&str>) -> bool {
        self.classify(authorization) == TokenCheck::Valid
    }

    /// Checks `authorization` as Vertex does, and counts the refusals by cause (expired or
    /// unknown), so a test can tell a refresh that came too late from a wrong token.
    pub fn check(&self, authorization: Option<&str>) -> TokenCheck {
        let verdict = self.classify(authorization);
        match verdict {
            TokenCheck::Valid => {}
            TokenCheck::Expired => {
                self.expired.fetch_add(1, Ordering::SeqCst);
            }
            TokenCheck::Unknown => {
                self.unknown.fetch_add(1, Ordering::SeqCst);
            }
        }
        verdict
    }

    /// Requests [`TokenRegistry::check`] refused because their token had expired.
    pub fn expired_rejections(&self) -> u64 {
        self.expired.load(Ordering::SeqCst)
    }

    /// Requests [`TokenRegistry::check`] refused because their token was missing or unknown.
    pub fn unknown_rejections(&self) -> u64 {
        self.unknown.load(Ordering::SeqCst)
    }

    fn classify(&self, authorization: Option<&str>) -> TokenCheck {
        let Some(token) = authorization.and_then(|v| v.strip_prefix("Bearer ")) else {
            return TokenCheck::Unknown;
        };
        match lock(&self.tokens).get(token.trim()) {
            Some(exp) if Instant::now() < *exp => TokenCheck::Valid,
            Some(_) => TokenCheck::Expired,
            None => TokenCheck::Unknown,
        }
    }

    fn insert(&self, token: String, expires: Instant) {
        lock(&self.tokens).insert(token, expires);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Shared {
    listener: Mutex<Option<TcpListener>>,
    public_key: jsonwebtoken::DecodingKey,
    lifetime: Mutex<Duration>,
    behavior: Mutex<TokenBehavior>,
    exchanges: Mutex<Vec<Exchange>>,
    hits: AtomicU64,
    minted: AtomicU64,
    registry: TokenRegistry,
    url: String,
}

/// The fake token endpoint on `127.0.0.1:0`. Dropping it closes the port and every connection.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use ripcord_chaos::google_token::GoogleTokenServer;
/// let server = GoogleTokenServer::start(Duration::from_secs(60)).await?;
/// let key_file = server.key_file_json();
/// assert!(key_file.contains(&server.token_url()));
/// let resp = reqwest::Client::new()
///     .post(server.token_url())
///     .header("content-type", "application/x-www-form-urlencoded")
///     .body("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=not.a.jwt")
///     .send()
///     .await?;
/// assert_eq!(resp.status(), 400);
/// assert_eq!(server.exchanges(), 1);
/// assert_eq!(server.minted(), 0);
/// # Ok(()) }
/// ```
pub struct GoogleTokenServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl fmt::Debug for GoogleTokenServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GoogleTokenServer")
            .field("addr", &self.addr)
            .field("exchanges", &self.exchanges())
            .finish_non_exhaustive()
    }
}

impl Drop for GoogleTokenServer {
    fn drop(&mut self) {
        drop(lock(&self.shared.listener).take());
        self.accept.abort();
    }
}

impl GoogleTokenServer {
    /// Starts the endpoint; minted tokens live for `lifetime` (whole seconds on the wire,
    /// at least one).
    ///
    /// # Errors
    ///
    /// Binding the socket failed, or the bundled test key cannot be read.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime.
    pub async fn start(lifetime: Duration) -> std::io::Result<GoogleTokenServer> {
        ensure_crypto_provider();
        let public_key = jsonwebtoken::DecodingKey::from_rsa_pem(TEST_PUBLIC_KEY_PEM.as_bytes())
            .map_err(|e| std::io::Error::other(format!("the test public key: {e}")))?;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            listener: Mutex::new(Some(listener)),
            public_key,
            lifetime: Mutex::new(lifetime),
            behavior: Mutex::new(TokenBehavior::Verify),
            exchanges: Mutex::new(Vec::new()),
            hits: AtomicU64::new(0),
            minted: AtomicU64::new(0),
            registry: TokenRegistry::default(),
            url: format!("http://{addr}/token"),
        });
        let accept = tokio::spawn(accept_loop(Arc::clone(&shared), |s| &s.listener, serve));
        Ok(GoogleTokenServer {
            shared,
            addr,
            accept,
        })
    }

    /// `http://127.0.0.1:PORT/token`: the `token_uri` of the key file, and the audience the
    /// assertions must name.
    pub fn token_url(&self) -> String {
        self.shared.url.clone()
    }

    /// A service-account key file (JSON) for the test key, with `token_uri` pointing here.
    pub fn key_file_json(&self) -> String {
        self.key_file_json_with(TEST_PRIVATE_KEY_PEM)
    }

    /// The same key file, but holding another private key (e.g. [`WRONG_PRIVATE_KEY_PEM`]).
    pub fn key_file_json_with(&self, private_key_pem: &str) -> String {
        serde_json::json!({
            "type": "service_account",
            "project_id": TEST_PROJECT,
            "private_key_id": "0123456789abcdef0123456789abcdef01234567",
            "private_key": private_key_pem,
            "client_email": TEST_CLIENT_EMAIL,
            "client_id": "100000000000000000000",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": self.shared.url,
            "universe_domain": "googleapis.com",
        })
        .to_string()
    }

    /// Changes the lifetime of the tokens minted from now on.
    pub fn set_lifetime(&self, lifetime: Duration) {
        *lock(&self.shared.lifetime) = lifetime;
    }

    /// Changes what the next exchanges get.
    pub fn set_behavior(&self, behavior: TokenBehavior) {
        *lock(&self.shared.behavior) = behavior;
    }

    /// Exchanges received (every `POST /token`).
    pub fn exchanges(&self) -> u64 {
        self.shared.hits.load(Ordering::SeqCst)
    }

    /// Tokens minted.
    pub fn minted(&self) -> u64 {
        self.shared.minted.load(Ordering::SeqCst)
    }

    /// What each verified or rejected exchange carried, in order.
    pub fn log(&self) -> Vec<Exchange> {
        lock(&self.shared.exchanges).clone()
    }

    /// The tokens minted here, for a fake Vertex to check.
    pub fn registry(&self) -> TokenRegistry {
        self.shared.registry.clone()
    }
}

/// `jsonwebtoken` needs a crypto provider; with exactly our backend compiled in it infers it,
/// with two it must be told.
fn ensure_crypto_provider() {
    use jsonwebtoken::crypto::CryptoProvider;
    if CryptoProvider::try_get_default().is_none() {
        let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
    }
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    scope: String,
    #[serde(rename = "aud")]
    _aud: String,
    iat: u64,
    exp: u64,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Verifies an assertion: signature (RS256, the test key), audience, expiry, scope.
fn verify(shared: &Shared, assertion: &str) -> Result<String, String> {
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    v.set_audience(&[&shared.url]);
    v.set_required_spec_claims(&["exp", "aud", "iss"]);
    let data = jsonwebtoken::decode::<Claims>(assertion, &shared.public_key, &v)
        .map_err(|e| format!("{e}"))?;
    let c = data.claims;
    if c.scope.split_whitespace().all(|s| s != SCOPE) {
        return Err(format!("scope {:?} lacks {SCOPE}", c.scope));
    }
    if c.exp <= c.iat || c.exp - c.iat > 3600 {
        return Err("the assertion must live at most an hour".to_owned());
    }
    if c.iat > unix_now() + 300 {
        return Err("the assertion is issued in the future".to_owned());
    }
    Ok(c.iss)
}

/// The issuer of an assertion, read without verifying (for the log of a rejected one).
fn issuer(assertion: &str) -> Option<String> {
    jsonwebtoken::dangerous::insecure_decode::<serde_json::Value>(assertion)
        .ok()
        .and_then(|d| {
            d.claims
                .get("iss")
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        })
}

async fn serve(shared: Arc<Shared>, stream: TcpStream) {
    let mut conn = Conn::new(stream);
    let mut out = Vec::with_capacity(1024);
    while let Ok(Some(req)) = conn.read_request(false).await {
        let path = req.path.split('?').next().unwrap_or("");
        if path != "/token" || !req.method.eq_ignore_ascii_case("POST") {
            out.clear();
            let body = br#"{"error":"invalid_request","error_description":"Not found"}"#;
            write_head(
                &mut out,
                404,
                Some("application/json"),
                &[],
                Framing::Length(body.len()),
                !req.keep_alive,
            );
            out.extend_from_slice(body);
            if !conn.send(&out).await {
                return;
            }
            continue;
        }
        let n = shared.hits.fetch_add(1, Ordering::SeqCst) + 1;
        let behavior = lock(&shared.behavior).clone();
        let (status, body) = match behavior {
            TokenBehavior::Hang => {
                conn.wait_until_client_gone().await;
                return;
            }
            TokenBehavior::Reset => {
                conn.reset();
                return;
            }
            TokenBehavior::Status { status, body } => (status, body),
            TokenBehavior::Verify => exchange(&shared, &req.body, n),
        };
        out.clear();
        write_head(
            &mut out,
            status,
            Some("application/json; charset=utf-8"),
            &[(
                "cache-control",
                "no-cache, no-store, max-age=0, must-revalidate",
            )],
            Framing::Length(body.len()),
            !req.keep_alive,
        );
        out.extend_from_slice(body.as_bytes());
        if !conn.send(&out).await || !req.keep_alive {
            return;
        }
    }
}

fn exchange(shared: &Shared, form: &[u8], n: u64) -> (u16, String) {
    let mut grant = None;
    let mut assertion = None;
    for (k, v) in url::form_urlencoded::parse(form) {
        match &*k {
            "grant_type" => grant = Some(v.into_owned()),
            "assertion" => assertion = Some(v.into_owned()),
            _ => {}
        }
    }
    if grant.as_deref() != Some("urn:ietf:params:oauth:grant-type:jwt-bearer") {
        return (
            400,
            r#"{"error":"unsupported_grant_type","error_description":"Invalid grant_type: "}"#
                .to_owned(),
        );
    }
    let assertion = assertion.unwrap_or_default();
    match verify(shared, &assertion) {
        Ok(iss) => {
            let lifetime = *lock(&shared.lifetime);
            let secs = lifetime.as_secs().max(1);
            let token = format!("ya29.ripcord-fake-{n:06}");
            shared
                .registry
                .insert(token.clone(), Instant::now() + Duration::from_secs(secs));
            shared.minted.fetch_add(1, Ordering::SeqCst);
            lock(&shared.exchanges).push(Exchange {
                issuer: Some(iss),
                verified: true,
                rejection: None,
            });
            (
                200,
                serde_json::json!({"access_token": token, "expires_in": secs, "token_type": "Bearer"})
                    .to_string(),
            )
        }
        Err(why) => {
            lock(&shared.exchanges).push(Exchange {
                issuer: issuer(&assertion),
                verified: false,
                rejection: Some(why),
            });
            (
                400,
                r#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#
                    .to_owned(),
            )
        }
    }
}
