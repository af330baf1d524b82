//! The Gemini wire over real HTTP: AI Studio's and Vertex AI's paths, `generateContent` JSON,
//! `streamGenerateContent?alt=sse` chunks (no terminator; the last chunk carries the finish
//! reason and usage), Google's error envelope for scripted faults (in-band too), embeddings
//! (`embedContent`, `batchEmbedContents`, Vertex's `:predict`), and the OAuth check a Vertex
//! fake makes against the tokens the fake token endpoint minted — expired ones refused with
//! Google's `ACCESS_TOKEN_EXPIRED` reason and counted apart from unknown ones.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ripcord_chaos::google_token::{
    GoogleTokenServer, TEST_CLIENT_EMAIL, TEST_PRIVATE_KEY_PEM, TokenCheck, WRONG_PRIVATE_KEY_PEM,
};
use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Reply, Script, VendorError, Wire};
use serde_json::{Value, json};
use support::{client, get_json, parse_sse};

const STUDIO: &str = "/v1beta/models/gemini-2.5-flash";
const VERTEX: &str =
    "/v1/projects/p1/locations/us-central1/publishers/google/models/gemini-2.5-pro";

fn generate_body() -> Value {
    json!({
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": "Why is the sky blue?"}]}],
        "generationConfig": {"maxOutputTokens": 64}
    })
}

async fn post(fake: &FakeVendor, path: &str, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{}{path}", fake.base_url()))
        .header("x-goog-api-key", "AIza-test")
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn post_with_token(
    fake: &FakeVendor,
    path: &str,
    token: Option<&str>,
    body: &Value,
) -> reqwest::Response {
    let mut req = client()
        .post(format!("{}{path}", fake.base_url()))
        .json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap()
}

/// `(status, canonical status, message, first detail's reason)` of a Google error answer.
async fn google_error(resp: reqwest::Response) -> (u16, String, String, Option<String>) {
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{status}: not Google's JSON ({e}): {text:?}"));
    let e = &v["error"];
    assert_eq!(
        e["code"], status,
        "the envelope repeats the HTTP status: {v}"
    );
    (
        status,
        e["status"].as_str().unwrap().to_owned(),
        e["message"].as_str().unwrap().to_owned(),
        e["details"][0]["reason"].as_str().map(str::to_owned),
    )
}

#[tokio::test]
async fn studio_and_vertex_paths_answer_generate_content() {
    let reply = Reply::text("Rayleigh scattering.")
        .with_usage(9, 3)
        .with_tool_call("c1", "lookup", r#"{"q":"sky"}"#);
    let fake = FakeVendor::start_with(Wire::Gemini, FakeOptions::default().with_reply(reply))
        .await
        .unwrap();
    for path in [STUDIO, VERTEX] {
        let resp = post(&fake, &format!("{path}:generateContent"), &generate_body()).await;
        assert_eq!(resp.status(), 200, "{path}");
        let v: Value = resp.json().await.unwrap();
        let c = &v["candidates"][0];
        assert_eq!(c["content"]["role"], "model");
        assert_eq!(
            c["content"]["parts"][0],
            json!({"text": "Rayleigh scattering."})
        );
        assert_eq!(
            c["content"]["parts"][1],
            json!({"functionCall": {"name": "lookup", "args": {"q": "sky"}}})
        );
        assert_eq!(c["finishReason"], "STOP");
        assert_eq!(
            v["usageMetadata"],
            json!({"promptTokenCount": 9, "candidatesTokenCount": 3, "totalTokenCount": 12})
        );
        // The model comes from the URL, as Google echoes it in `modelVersion`.
        let model = path.rsplit('/').next().unwrap();
        assert_eq!(v["modelVersion"], model, "{v}");
    }
    let sent = fake.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].header("x-goog-api-key"), Some("AIza-test"));
    assert_eq!(
        sent[1].json().unwrap()["systemInstruction"]["parts"][0]["text"],
        "Be brief."
    );

    // The model list, and what is not on the wire.
    let models = get_json(&fake, "/v1beta/models").await;
    assert_eq!(models["models"][0]["name"], "models/gemini-2.5-flash");
    let resp = post(&fake, "/v1/chat/completions", &generate_body()).await;
    let (status, canonical, message, _) = google_error(resp).await;
    assert_eq!((status, canonical.as_str()), (404, "NOT_FOUND"));
    assert!(message.contains("/v1/chat/completions"), "{message}");
    let resp = post(&fake, &format!("{STUDIO}:countTokens"), &generate_body()).await;
    assert_eq!(resp.status(), 404);
    let resp = client()
        .get(format!("{}{STUDIO}:generateContent", fake.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    // A body without contents is refused as Google does, before the script is asked.
    let resp = post(
        &fake,
        &format!("{STUDIO}:generateContent"),
        &json!({"contents": []}),
    )
    .await;
    let (status, canonical, message, _) = google_error(resp).await;
    assert_eq!((status, canonical.as_str()), (400, "INVALID_ARGUMENT"));
    assert!(message.contains("contents is not specified"), "{message}");
    let resp = client()
        .post(format!("{}{STUDIO}:generateContent", fake.base_url()))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(google_error(resp).await.1, "INVALID_ARGUMENT");
}

#[tokio::test]
async fn a_stream_is_data_chunks_whose_last_carries_the_finish_reason() {
    let reply = Reply::text("abcdef")
        .with_chunks(3)
        .with_usage(5, 2)
        .with_tool_call("c1", "f", r#"{"a":1}"#)
        .with_tool_call("c2", "g", r#"{"b":2}"#);
    let fake = FakeVendor::start_with(Wire::Gemini, FakeOptions::default().with_reply(reply))
        .await
        .unwrap();
    let resp = post(
        &fake,
        &format!("{VERTEX}:streamGenerateContent?alt=sse"),
        &generate_body(),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = resp.text().await.unwrap();
    let events = parse_sse(&text);
    assert!(
        events.iter().all(|e| e.event.is_none()),
        "no named events: {text}"
    );
    assert!(!text.contains("[DONE]"), "Gemini has no terminator: {text}");
    let chunks: Vec<Value> = events.iter().map(|e| e.json()).collect();
    assert_eq!(
        chunks.len(),
        6,
        "3 text pieces, 2 calls, the last chunk: {text}"
    );
    let streamed: String = chunks
        .iter()
        .filter_map(|c| c["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(streamed, "abcdef");
    // Parallel calls arrive whole, one chunk each, in order.
    let calls: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["candidates"][0]["content"]["parts"][0].get("functionCall"))
        .collect();
    assert_eq!(
        calls,
        [
            &json!({"name": "f", "args": {"a": 1}}),
            &json!({"name": "g", "args": {"b": 2}})
        ]
    );
    // Only the last chunk finishes and counts.
    let (last, rest) = chunks.split_last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"]["candidatesTokenCount"], 2);
    assert!(
        rest.iter()
            .all(|c| c["candidates"][0].get("finishReason").is_none()
                && c.get("usageMetadata").is_none()),
        "{text}"
    );
}

#[tokio::test]
async fn scripted_faults_carry_googles_envelope() {
    let fake = FakeVendor::start(Wire::Gemini).await.unwrap();
    let path = format!("{STUDIO}:generateContent");
    let cases = [
        (
            VendorError::RateLimited {
                retry_after: Some(Duration::from_millis(1500)),
            },
            429,
            "RESOURCE_EXHAUSTED",
        ),
        (VendorError::QuotaExhausted, 429, "RESOURCE_EXHAUSTED"),
        (VendorError::Overloaded, 503, "UNAVAILABLE"),
        (VendorError::ServerError, 500, "INTERNAL"),
        (VendorError::ContextTooLong, 400, "INVALID_ARGUMENT"),
        (VendorError::RegionBlocked, 400, "FAILED_PRECONDITION"),
        (VendorError::PermissionDenied, 403, "PERMISSION_DENIED"),
        (VendorError::ModelNotFound, 404, "NOT_FOUND"),
    ];
    for (error, want_status, want_canonical) in cases {
        fake.set_script(Script::Always(Behavior::Error(error.clone())));
        let resp = post(&fake, &path, &generate_body()).await;
        let (status, canonical, message, _) = google_error(resp).await;
        assert_eq!(
            (status, canonical.as_str()),
            (want_status, want_canonical),
            "{error:?}: {message}"
        );
    }
    // The rate limit says when to come back (rounded up to whole seconds), the daily quota
    // names a per-day quota: the two 429s a client must tell apart.
    fake.set_script(Script::Always(Behavior::Error(VendorError::RateLimited {
        retry_after: Some(Duration::from_millis(1500)),
    })));
    let v: Value = post(&fake, &path, &generate_body())
        .await
        .json()
        .await
        .unwrap();
    let details = v["error"]["details"].as_array().unwrap();
    assert!(details.iter().any(|d| d["retryDelay"] == "2s"), "{v}");
    fake.set_script(Script::Always(Behavior::Error(VendorError::QuotaExhausted)));
    let v: Value = post(&fake, &path, &generate_body())
        .await
        .json()
        .await
        .unwrap();
    assert!(
        v["error"]["details"][0]["violations"][0]["quotaId"]
            .as_str()
            .unwrap()
            .contains("PerDay"),
        "{v}"
    );
    // A refused prompt is a 200 whose body says so.
    fake.set_script(Script::Always(Behavior::Error(
        VendorError::ContentFiltered,
    )));
    let resp = post(&fake, &path, &generate_body()).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["promptFeedback"]["blockReason"], "PROHIBITED_CONTENT");
    assert!(v.get("candidates").is_none());

    // A sequence: one overload, then success.
    fake.set_script(Script::Sequence(vec![
        Behavior::Error(VendorError::Overloaded),
        Behavior::Ok,
    ]));
    assert_eq!(post(&fake, &path, &generate_body()).await.status(), 503);
    assert_eq!(post(&fake, &path, &generate_body()).await.status(), 200);

    // Mid-stream: an in-band error object after the first chunk, and a stream cut before its
    // finishing chunk.
    let stream_path = format!("{STUDIO}:streamGenerateContent?alt=sse");
    // One stream call: its raw text and its chunks.
    let stream_chunks = async || {
        let resp = post(&fake, &stream_path, &generate_body()).await;
        let text = resp.text().await.unwrap();
        let chunks: Vec<Value> = parse_sse(&text).iter().map(|e| e.json()).collect();
        (text, chunks)
    };
    fake.set_script(Script::Always(Behavior::InBandError {
        after_chunks: 1,
        error: VendorError::Overloaded,
    }));
    let (text, chunks) = stream_chunks().await;
    assert_eq!(chunks.len(), 2, "{text}");
    assert!(chunks[0]["candidates"][0]["content"]["parts"][0]["text"].is_string());
    assert_eq!(chunks[1]["error"]["status"], "UNAVAILABLE", "{text}");
    fake.set_script(Script::Always(Behavior::TruncatedStream {
        after_chunks: 2,
    }));
    let (text, chunks) = stream_chunks().await;
    assert_eq!(chunks.len(), 2, "{text}");
    assert!(
        chunks
            .iter()
            .all(|c| c["candidates"][0].get("finishReason").is_none()),
        "a truncated stream never finishes: {text}"
    );
}

#[tokio::test]
async fn embeddings_on_studio_and_vertex_predict() {
    let fake = FakeVendor::start(Wire::Gemini).await.unwrap();
    let one: Value = post(
        &fake,
        "/v1beta/models/gemini-embedding-001:embedContent",
        &json!({"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "hello"}]},
                "outputDimensionality": 16}),
    )
    .await
    .json()
    .await
    .unwrap();
    let values = one["embedding"]["values"].as_array().unwrap();
    assert_eq!(values.len(), 16);
    let batch: Value = post(
        &fake,
        "/v1beta/models/gemini-embedding-001:batchEmbedContents",
        &json!({"requests": [
            {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "hello"}]}},
            {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "world"}]}}]}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(batch["embeddings"].as_array().unwrap().len(), 2);
    assert_eq!(
        batch["embeddings"][0]["values"].as_array().unwrap().len(),
        8
    );

    // Vertex's text-embedding wire: instances in, predictions (with statistics) out.
    let path =
        "/v1/projects/p1/locations/us-central1/publishers/google/models/text-embedding-005:predict";
    let v: Value = post(
        &fake,
        path,
        &json!({"instances": [{"content": "hello", "task_type": "RETRIEVAL_QUERY"},
                              {"content": "deep blue sky"}],
                "parameters": {"outputDimensionality": 4}}),
    )
    .await
    .json()
    .await
    .unwrap();
    let preds = v["predictions"].as_array().unwrap();
    assert_eq!(preds.len(), 2);
    assert_eq!(
        preds[0]["embeddings"]["values"].as_array().unwrap().len(),
        4
    );
    assert_eq!(
        preds[1]["embeddings"]["statistics"],
        json!({"truncated": false, "token_count": 3})
    );
    // The same text gives the same vector on both wires (deterministic, dimension for dimension).
    let four: Value = post(
        &fake,
        "/v1beta/models/gemini-embedding-001:embedContent",
        &json!({"content": {"parts": [{"text": "hello"}]}, "outputDimensionality": 4}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        four["embedding"]["values"],
        preds[0]["embeddings"]["values"]
    );
    assert_eq!(v["metadata"]["billableCharacterCount"], 18);
    for bad in [
        json!({}),
        json!({"instances": []}),
        json!({"instances": [{"text": "x"}]}),
    ] {
        let (status, canonical, _, _) = google_error(post(&fake, path, &bad).await).await;
        assert_eq!(
            (status, canonical.as_str()),
            (400, "INVALID_ARGUMENT"),
            "{bad}"
        );
    }
    fake.set_script(Script::Always(Behavior::Error(VendorError::RateLimited {
        retry_after: None,
    })));
    let (status, ..) =
        google_error(post(&fake, path, &json!({"instances": [{"content": "x"}]})).await).await;
    assert_eq!(status, 429);
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A service-account assertion signed with `pem` for the endpoint at `aud`.
fn assertion(pem: &str, aud: &str) -> String {
    let now = unix_now();
    let claims = json!({
        "iss": TEST_CLIENT_EMAIL,
        "scope": "https://www.googleapis.com/auth/cloud-platform",
        "aud": aud,
        "iat": now,
        "exp": now + 3600,
    });
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap();
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &claims,
        &key,
    )
    .unwrap()
}

async fn exchange(tokens: &GoogleTokenServer, assertion: &str) -> (u16, Value) {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer")
        .append_pair("assertion", assertion)
        .finish();
    let resp = client()
        .post(tokens.token_url())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

#[tokio::test]
async fn vertex_checks_tokens_and_refuses_expired_ones_with_googles_reason() {
    let tokens = GoogleTokenServer::start(Duration::from_secs(1))
        .await
        .unwrap();
    let vertex = FakeVendor::start(Wire::Gemini).await.unwrap();
    let registry = tokens.registry();
    vertex.require_tokens(registry.clone());
    let path = format!("{VERTEX}:generateContent");

    // A correctly signed assertion gets a one-second token; a wrongly signed one nothing.
    let (status, minted) = exchange(
        &tokens,
        &assertion(TEST_PRIVATE_KEY_PEM, &tokens.token_url()),
    )
    .await;
    assert_eq!(status, 200, "{minted}");
    assert_eq!(minted["token_type"], "Bearer");
    assert_eq!(minted["expires_in"], 1);
    let token = minted["access_token"].as_str().unwrap().to_owned();
    let (status, refused) = exchange(
        &tokens,
        &assertion(WRONG_PRIVATE_KEY_PEM, &tokens.token_url()),
    )
    .await;
    assert_eq!(
        (status, refused["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let (status, _) = exchange(
        &tokens,
        &assertion(TEST_PRIVATE_KEY_PEM, "https://elsewhere/token"),
    )
    .await;
    assert_eq!(status, 400, "an assertion for another audience");
    assert_eq!((tokens.exchanges(), tokens.minted()), (3, 1));
    assert!(!tokens.log()[1].verified);

    // The minted token passes; none, a made-up one and an API key do not.
    let resp = post_with_token(&vertex, &path, Some(&token), &generate_body()).await;
    assert_eq!(resp.status(), 200);
    for wrong in [None, Some("ya29.never-minted")] {
        let resp = post_with_token(&vertex, &path, wrong, &generate_body()).await;
        let (status, canonical, message, reason) = google_error(resp).await;
        assert_eq!((status, canonical.as_str()), (401, "UNAUTHENTICATED"));
        assert!(message.starts_with("Request had invalid authentication credentials."));
        assert_eq!(
            reason, None,
            "only an expired token carries ACCESS_TOKEN_EXPIRED"
        );
    }
    let resp = post(&vertex, &path, &generate_body()).await;
    assert_eq!(resp.status(), 401, "an API key is not an OAuth token");
    assert_eq!(registry.unknown_rejections(), 3);
    assert_eq!(registry.expired_rejections(), 0);
    // The script is never consulted for a refused request.
    assert_eq!(vertex.hits(), 4);

    // Once its second is over, the same token is refused as expired, on every Vertex path.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        registry.check(Some(&format!("Bearer {token}"))),
        TokenCheck::Expired
    );
    let resp = post_with_token(&vertex, &path, Some(&token), &generate_body()).await;
    let (status, canonical, _, reason) = google_error(resp).await;
    assert_eq!((status, canonical.as_str()), (401, "UNAUTHENTICATED"));
    assert_eq!(reason.as_deref(), Some("ACCESS_TOKEN_EXPIRED"));
    let claude = FakeVendor::start(Wire::Anthropic).await.unwrap();
    claude.require_tokens(registry.clone());
    let resp = post_with_token(
        &claude,
        "/v1/projects/p1/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
        Some(&token),
        &json!({"anthropic_version": "vertex-2023-10-16", "max_tokens": 16,
                "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), 401);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["details"][0]["reason"], "ACCESS_TOKEN_EXPIRED");
    assert_eq!(
        v["error"]["details"][0]["metadata"]["method"],
        "google.cloud.aiplatform.v1.PredictionService.RawPredict"
    );
    assert_eq!(
        registry.expired_rejections(),
        3,
        "two requests and one check"
    );
    assert_eq!(registry.unknown_rejections(), 3);

    // A fresh exchange mints a new token that passes again.
    tokens.set_lifetime(Duration::from_secs(60));
    let (_, minted) = exchange(
        &tokens,
        &assertion(TEST_PRIVATE_KEY_PEM, &tokens.token_url()),
    )
    .await;
    assert_eq!(minted["expires_in"], 60);
    let fresh = minted["access_token"].as_str().unwrap();
    assert_ne!(fresh, token);
    let resp = post_with_token(&vertex, &path, Some(fresh), &generate_body()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(tokens.minted(), 2);
}
