//! The Gemini wire: `generateContent`, `streamGenerateContent?alt=sse`, `embedContent`,
//! `batchEmbedContents` and `models`, on Google AI Studio's paths
//! (`/v1beta/models/{model}:generateContent`) and Vertex AI's
//! (`/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent`).
//!
//! Shapes follow <https://ai.google.dev/api/generate-content>: a `GenerateContentResponse` with
//! one candidate (`content.parts` of text and `functionCall` parts, `finishReason`),
//! `usageMetadata` and `modelVersion`. A stream is one `data:` chunk per text piece and per
//! function call, then a last chunk with the `finishReason` and the final usage; there is no
//! terminator event. Errors use Google's envelope `{"error":{"code","message","status","details"}}`,
//! in-band too (a `data:` chunk holding the error object).

use serde_json::{Value, json};

use crate::http::Frames;
use crate::openai::Ctx;
use crate::reply::Reply;
use crate::vendor_error::VendorError;

/// The model name of a Gemini path (`…/models/{model}:{method}`), and its method.
pub(crate) fn model_and_method(path: &str) -> Option<(&str, &str)> {
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    let (_, tail) = path.rsplit_once("/models/")?;
    tail.split_once(':')
}

fn tool_args(arguments: &str) -> Value {
    match serde_json::from_str(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

fn usage(reply: &Reply) -> Value {
    json!({
        "promptTokenCount": reply.input_tokens,
        "candidatesTokenCount": reply.output_tokens,
        "totalTokenCount": reply.input_tokens + reply.output_tokens,
    })
}

fn candidate(parts: Vec<Value>, finish: Option<&str>) -> Value {
    let mut c = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if let Some(f) = finish {
        c["finishReason"] = Value::from(f);
    }
    c
}

fn chunk(ctx: Ctx<'_>, candidate: Value, usage: Option<Value>) -> Value {
    let mut v = json!({"candidates": [candidate], "modelVersion": ctx.model, "responseId": ctx.id});
    if let Some(u) = usage {
        v["usageMetadata"] = u;
    }
    v
}

/// The `generateContent` JSON body.
pub(crate) fn response(ctx: Ctx<'_>, reply: &Reply) -> Vec<u8> {
    let mut parts = Vec::new();
    if !reply.text.is_empty() {
        parts.push(json!({"text": reply.text}));
    }
    for (_, name, arguments) in &reply.tool_calls {
        parts.push(json!({"functionCall": {"name": name, "args": tool_args(arguments)}}));
    }
    chunk(ctx, candidate(parts, Some("STOP")), Some(usage(reply)))
        .to_string()
        .into_bytes()
}

/// The SSE chunks of a streamed answer: text pieces and function calls are content; the last
/// chunk (finish reason and usage) is the tail.
pub(crate) fn stream_frames(ctx: Ctx<'_>, reply: &Reply, broken: bool) -> Frames {
    let mut f = Frames::new(broken);
    for piece in reply.text_pieces() {
        let c = chunk(ctx, candidate(vec![json!({"text": piece})], None), None);
        f.push(None, &c, true);
    }
    // A function call arrives whole, in one chunk (Gemini never splits its arguments).
    for (_, name, arguments) in &reply.tool_calls {
        let part = json!({"functionCall": {"name": name, "args": tool_args(arguments)}});
        f.push(None, &chunk(ctx, candidate(vec![part], None), None), true);
    }
    f.start_tail();
    let last = chunk(
        ctx,
        candidate(vec![json!({"text": ""})], Some("STOP")),
        Some(usage(reply)),
    );
    f.push(None, &last, false);
    f
}

/// A deterministic embeddings answer for an `embedContent` / `batchEmbedContents` body.
pub(crate) fn embeddings(
    body: &Value,
    batch: bool,
    default_dims: usize,
) -> Result<Vec<u8>, String> {
    let one = |req: &Value| -> Result<Vec<f32>, String> {
        let texts: Vec<&str> = req
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| p.get("text")?.as_str())
                    .collect()
            })
            .unwrap_or_default();
        if texts.is_empty() {
            return Err(google_error(
                400,
                "INVALID_ARGUMENT",
                "* EmbedContentRequest.content: contents is not specified",
            ));
        }
        let dims = req
            .get("outputDimensionality")
            .and_then(Value::as_u64)
            .map_or(default_dims, |d| d.clamp(1, 3072) as usize);
        Ok(crate::openai::embed(&texts.concat(), dims))
    };
    if batch {
        let Some(reqs) = body.get("requests").and_then(Value::as_array) else {
            return Err(google_error(
                400,
                "INVALID_ARGUMENT",
                "* BatchEmbedContentsRequest.requests: requests is not specified",
            ));
        };
        let mut out = Vec::with_capacity(reqs.len());
        for r in reqs {
            out.push(json!({"values": one(r)?}));
        }
        Ok(json!({"embeddings": out}).to_string().into_bytes())
    } else {
        Ok(json!({"embedding": {"values": one(body)?}})
            .to_string()
            .into_bytes())
    }
}

/// A deterministic answer for a Vertex AI text-embedding `:predict` body
/// (`{"instances": [{"content", "task_type"?}], "parameters": {"outputDimensionality"?}}`):
/// one prediction per instance with its `values` and `statistics` (a token count of one per
/// whitespace-separated word, `truncated: false`), as
/// <https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/text-embeddings-api>
/// shows them.
pub(crate) fn predictions(body: &Value, default_dims: usize) -> Result<Vec<u8>, String> {
    let Some(instances) = body.get("instances").and_then(Value::as_array) else {
        return Err(google_error(
            400,
            "INVALID_ARGUMENT",
            "Invalid JSON payload received. Missing \"instances\".",
        ));
    };
    if instances.is_empty() {
        return Err(google_error(
            400,
            "INVALID_ARGUMENT",
            "The request must contain at least one instance.",
        ));
    }
    let dims = body
        .get("parameters")
        .and_then(|p| p.get("outputDimensionality"))
        .and_then(Value::as_u64)
        .map_or(default_dims, |d| d.clamp(1, 3072) as usize);
    let mut out = Vec::with_capacity(instances.len());
    let mut chars = 0usize;
    for (i, inst) in instances.iter().enumerate() {
        let Some(content) = inst.get("content").and_then(Value::as_str) else {
            return Err(google_error(
                400,
                "INVALID_ARGUMENT",
                &format!("instances[{i}]: the \"content\" field is required."),
            ));
        };
        chars += content.chars().count();
        out.push(json!({"embeddings": {
            "statistics": {"truncated": false, "token_count": content.split_whitespace().count().max(1)},
            "values": crate::openai::embed(content, dims),
        }}));
    }
    Ok(
        json!({"predictions": out, "metadata": {"billableCharacterCount": chars}})
            .to_string()
            .into_bytes(),
    )
}

/// `{"error":{"code","message","status"}}`.
pub(crate) fn google_error(code: u16, status: &str, message: &str) -> String {
    json!({"error": {"code": code, "message": message, "status": status}}).to_string()
}

fn with_details(code: u16, status: &str, message: &str, details: Value) -> String {
    json!({"error": {"code": code, "message": message, "status": status, "details": details}})
        .to_string()
}

/// Vertex's answer to a request without a valid access token.
pub(crate) fn unauthenticated() -> String {
    google_error(
        401,
        "UNAUTHENTICATED",
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login \
         cookie or other valid authentication credential. See \
         https://developers.google.com/identity/sign-in/web/devconsole-project.",
    )
}

/// Vertex's answer to a request whose access token was valid once but has expired: the same
/// 401 message, with an `ErrorInfo` whose reason is `ACCESS_TOKEN_EXPIRED` (the shape Google
/// APIs answer an expired OAuth token with; the method names the Vertex RPC of the path).
pub(crate) fn token_expired(path: &str) -> String {
    let method = model_and_method(path).map_or("", |(_, m)| m);
    let mut rpc = String::with_capacity(method.len());
    let mut chars = method.chars();
    if let Some(first) = chars.next() {
        rpc.extend(first.to_uppercase());
        rpc.extend(chars);
    }
    with_details(
        401,
        "UNAUTHENTICATED",
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login \
         cookie or other valid authentication credential. See \
         https://developers.google.com/identity/sign-in/web/devconsole-project.",
        json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "ACCESS_TOKEN_EXPIRED",
            "domain": "googleapis.com",
            "metadata": {
                "service": "aiplatform.googleapis.com",
                "method": format!("google.cloud.aiplatform.v1.PredictionService.{rpc}"),
            }
        }]),
    )
}

/// The status a [`VendorError`] is sent with on the Gemini wire.
pub(crate) const fn status(e: &VendorError) -> u16 {
    match e {
        VendorError::RateLimited { .. }
        | VendorError::QuotaExhausted
        | VendorError::PaymentRequired => 429,
        VendorError::Overloaded | VendorError::EmptyServiceUnavailable => 503,
        VendorError::ServerError => 500,
        VendorError::BadGateway => 502,
        VendorError::GatewayTimeout => 504,
        VendorError::Auth
        | VendorError::RegionBlocked
        | VendorError::PayloadTooLarge
        | VendorError::TooLargeForRateLimit
        | VendorError::ContextTooLong
        | VendorError::InvalidRequest => 400,
        VendorError::PermissionDenied => 403,
        VendorError::ModelNotFound => 404,
        // Gemini refuses a prompt with a 200 whose body says so.
        VendorError::ContentFiltered => 200,
    }
}

fn quota_failure(quota_id: &str, metric: &str, model: &str) -> Value {
    json!({
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [{
            "quotaMetric": metric,
            "quotaId": quota_id,
            "quotaDimensions": {"location": "global", "model": model},
            "quotaValue": "10"
        }]
    })
}

/// The JSON a [`VendorError`] is carried in on the Gemini wire (error body and in-band chunk).
pub(crate) fn error_json(e: &VendorError, model: &str) -> String {
    const QUOTA_MESSAGE: &str = "You exceeded your current quota, please check your plan and \
        billing details. For more information on this error, head to: \
        https://ai.google.dev/gemini-api/docs/rate-limits.";
    let help = json!({"@type": "type.googleapis.com/google.rpc.Help", "links": [{
        "description": "Learn more about Gemini API quotas",
        "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]});
    match e {
        VendorError::RateLimited { retry_after } => {
            let mut details = vec![
                quota_failure(
                    "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                    "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                    model,
                ),
                help,
            ];
            if let Some(d) = retry_after {
                let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
                details.push(json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{secs}s")}));
            }
            with_details(
                429,
                "RESOURCE_EXHAUSTED",
                QUOTA_MESSAGE,
                Value::from(details),
            )
        }
        VendorError::QuotaExhausted => with_details(
            429,
            "RESOURCE_EXHAUSTED",
            QUOTA_MESSAGE,
            json!([
                quota_failure(
                    "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                    "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                    model
                ),
                help
            ]),
        ),
        VendorError::PaymentRequired => google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "Your prepayment credits are depleted. Please go to AI Studio at \
             https://ai.studio/projects to manage your project and billing.",
        ),
        VendorError::Overloaded => google_error(
            503,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
        ),
        VendorError::EmptyServiceUnavailable => {
            google_error(503, "UNAVAILABLE", "The service is currently unavailable.")
        }
        VendorError::ServerError => google_error(
            500,
            "INTERNAL",
            "An internal error has occurred. Please retry or report in \
             https://developers.generativeai.google/guide/troubleshooting",
        ),
        VendorError::BadGateway => google_error(502, "UNAVAILABLE", "Bad gateway."),
        VendorError::GatewayTimeout => google_error(
            504,
            "DEADLINE_EXCEEDED",
            "Deadline expired before operation could complete.",
        ),
        VendorError::Auth => with_details(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}]),
        ),
        VendorError::PermissionDenied => with_details(
            403,
            "PERMISSION_DENIED",
            "Generative Language API has not been used in project 1234567890 before or it is \
             disabled. Enable it by visiting \
             https://console.developers.google.com/apis/api/generativelanguage.googleapis.com/overview?project=1234567890 \
             then retry.",
            json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
                    "domain": "googleapis.com"}]),
        ),
        VendorError::RegionBlocked => google_error(
            400,
            "FAILED_PRECONDITION",
            "User location is not supported for the API use.",
        ),
        VendorError::ModelNotFound => google_error(
            404,
            "NOT_FOUND",
            &format!(
                "models/{model} is not found for API version v1beta, or is not supported for \
                 generateContent. Call ListModels to see the list of available models and their \
                 supported methods."
            ),
        ),
        VendorError::PayloadTooLarge | VendorError::TooLargeForRateLimit => google_error(
            400,
            "INVALID_ARGUMENT",
            "Request payload size exceeds the limit: 20971520 bytes.",
        ),
        VendorError::ContextTooLong => google_error(
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200293) exceeds the maximum number of tokens allowed \
             (1048576).",
        ),
        VendorError::ContentFiltered => json!({
            "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
            "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
            "modelVersion": model
        })
        .to_string(),
        VendorError::InvalidRequest => google_error(
            400,
            "INVALID_ARGUMENT",
            "* GenerateContentRequest.contents: contents is not specified",
        ),
    }
}

/// `GET …/models`.
pub(crate) fn models(chat_model: &str) -> Vec<u8> {
    json!({"models": [{
        "name": format!("models/{chat_model}"),
        "displayName": chat_model,
        "inputTokenLimit": 1_048_576,
        "outputTokenLimit": 65_536,
        "supportedGenerationMethods": ["generateContent", "countTokens"],
    }]})
    .to_string()
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_frames() {
        assert_eq!(
            model_and_method("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"),
            Some(("gemini-2.5-flash", "streamGenerateContent"))
        );
        assert_eq!(
            model_and_method(
                "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent"
            ),
            Some(("gemini-2.5-pro", "generateContent"))
        );
        assert_eq!(model_and_method("/v1beta/models"), None);
        let ctx = Ctx::new("r1", "gemini-2.5-flash", 0);
        let reply = Reply::text_then_tool("c");
        let f = stream_frames(ctx, &reply, false);
        assert_eq!(f.len(), 4);
        assert_eq!(f.content(), &[0, 1, 2]);
        assert_eq!(f.tail_start(), 3);
        let text = String::from_utf8_lossy(f.bytes(3..4)).into_owned();
        assert!(text.contains("\"finishReason\":\"STOP\""), "{text}");
        let v: Value = serde_json::from_slice(&response(ctx, &reply)).unwrap_or_default();
        assert_eq!(
            v["candidates"][0]["content"]["parts"][1]["functionCall"]["args"]["a"],
            1
        );
    }
}
