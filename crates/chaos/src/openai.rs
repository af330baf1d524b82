//! The OpenAI wire: Chat Completions (JSON and SSE), Embeddings and Models.
//!
//! Shapes follow <https://platform.openai.com/docs/api-reference/chat>: a `chat.completion`
//! object; for streams, `chat.completion.chunk` objects on `data:` lines — a first delta with the
//! role, content deltas, tool-call deltas by index (id and name in the first piece, arguments in
//! pieces), a chunk with `finish_reason`, then, only when the request asked for
//! `stream_options.include_usage`, a chunk with `choices: []` and `usage` (every other chunk then
//! carries `"usage": null`), then `data: [DONE]`. Azure OpenAI serves the same bodies under
//! `/openai/deployments/{deployment}/...`.

use serde::Serialize;
use serde_json::Value;

use crate::http::Frames;
use crate::reply::{Reply, split_even};
use ripcord_core::rng::mix64;

/// Identity of one response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub(crate) id: &'a str,
    pub(crate) model: &'a str,
    pub(crate) created: u64,
}

#[cfg(test)]
impl<'a> Ctx<'a> {
    /// A context for the fakes' own tests.
    pub(crate) const fn new(id: &'a str, model: &'a str, created: u64) -> Self {
        Ctx { id, model, created }
    }
}

const FINGERPRINT: &str = "fp_ripcord_fake";

#[derive(Serialize)]
struct Completion<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [Choice<'a>; 1],
    usage: UsageOut,
    service_tier: &'static str,
    system_fingerprint: &'static str,
}

#[derive(Serialize)]
struct Choice<'a> {
    index: u32,
    message: MessageOut<'a>,
    logprobs: Option<()>,
    finish_reason: &'static str,
}

#[derive(Serialize)]
struct MessageOut<'a> {
    role: &'static str,
    content: Option<&'a str>,
    /// DeepSeek's reasoning field, when the reply reasons.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    refusal: Option<()>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ToolCallOut<'a>>,
    annotations: [(); 0],
}

#[derive(Serialize)]
struct ToolCallOut<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionOut<'a>,
}

#[derive(Serialize)]
struct FunctionOut<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct UsageOut {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    prompt_tokens_details: PromptDetails,
    completion_tokens_details: CompletionDetails,
}

#[derive(Serialize)]
struct PromptDetails {
    cached_tokens: u64,
    audio_tokens: u64,
}

#[derive(Serialize)]
struct CompletionDetails {
    reasoning_tokens: u64,
    audio_tokens: u64,
    accepted_prediction_tokens: u64,
    rejected_prediction_tokens: u64,
}

fn usage(reply: &Reply) -> UsageOut {
    UsageOut {
        prompt_tokens: reply.input_tokens,
        completion_tokens: reply.output_tokens,
        total_tokens: reply.input_tokens + reply.output_tokens,
        prompt_tokens_details: PromptDetails {
            cached_tokens: 0,
            audio_tokens: 0,
        },
        completion_tokens_details: CompletionDetails {
            reasoning_tokens: 0,
            audio_tokens: 0,
            accepted_prediction_tokens: 0,
            rejected_prediction_tokens: 0,
        },
    }
}

fn finish_reason(reply: &Reply) -> &'static str {
    if reply.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

/// The `chat.completion` JSON body.
pub(crate) fn completion(ctx: Ctx<'_>, reply: &Reply) -> Vec<u8> {
    let content = if reply.text.is_empty() && !reply.tool_calls.is_empty() {
        None
    } else {
        Some(reply.text.as_str())
    };
    let body = Completion {
        id: ctx.id,
        object: "chat.completion",
        created: ctx.created,
        model: ctx.model,
        choices: [Choice {
            index: 0,
            message: MessageOut {
                role: "assistant",
                content,
                reasoning_content: reply.reasoning.as_deref(),
                refusal: None,
                tool_calls: reply
                    .tool_calls
                    .iter()
                    .map(|(id, name, arguments)| ToolCallOut {
                        id,
                        kind: "function",
                        function: FunctionOut { name, arguments },
                    })
                    .collect(),
                annotations: [],
            },
            logprobs: None,
            finish_reason: finish_reason(reply),
        }],
        usage: usage(reply),
        service_tier: "default",
        system_fingerprint: FINGERPRINT,
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

#[derive(Serialize)]
struct Chunk<'a, D: Serialize> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    service_tier: &'static str,
    system_fingerprint: &'static str,
    choices: D,
    /// `Some(None)` serializes `"usage": null` (streams with `include_usage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Option<UsageOut>>,
}

#[derive(Serialize)]
struct ChunkChoice<D: Serialize> {
    index: u32,
    delta: D,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
}

#[derive(Serialize)]
struct RoleDelta<'a> {
    role: &'static str,
    content: Option<&'a str>,
    refusal: Option<()>,
}

#[derive(Serialize)]
struct ContentDelta<'a> {
    content: &'a str,
}

/// A reasoning piece as DeepSeek streams it: `content` null beside `reasoning_content`.
#[derive(Serialize)]
struct ReasoningDelta<'a> {
    content: Option<()>,
    reasoning_content: &'a str,
}

#[derive(Serialize)]
struct ToolDelta<'a> {
    tool_calls: [ToolCallDelta<'a>; 1],
}

#[derive(Serialize)]
struct ToolCallDelta<'a> {
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: FunctionDelta<'a>,
}

#[derive(Serialize)]
struct FunctionDelta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    arguments: &'a str,
}

#[derive(Serialize)]
struct Empty {}

fn chunk<'a, D: Serialize>(ctx: Ctx<'a>, include_usage: bool, choices: D) -> Chunk<'a, D> {
    Chunk {
        id: ctx.id,
        object: "chat.completion.chunk",
        created: ctx.created,
        model: ctx.model,
        service_tier: "default",
        system_fingerprint: FINGERPRINT,
        choices,
        usage: include_usage.then_some(None),
    }
}

fn delta<D: Serialize>(delta: D, finish_reason: Option<&'static str>) -> [ChunkChoice<D>; 1] {
    [ChunkChoice {
        index: 0,
        delta,
        logprobs: None,
        finish_reason,
    }]
}

/// The SSE events of a streamed completion.
pub(crate) fn stream_frames(
    ctx: Ctx<'_>,
    reply: &Reply,
    include_usage: bool,
    broken: bool,
) -> Frames {
    let mut f = Frames::new(broken);
    let role = RoleDelta {
        role: "assistant",
        content: if reply.text.is_empty() && !reply.tool_calls.is_empty() {
            None
        } else {
            Some("")
        },
        refusal: None,
    };
    f.push(None, &chunk(ctx, include_usage, delta(role, None)), false);
    if let Some(reasoning) = &reply.reasoning {
        for piece in split_even(reasoning, reply.chunks) {
            let d = ReasoningDelta {
                content: None,
                reasoning_content: piece,
            };
            f.push(None, &chunk(ctx, include_usage, delta(d, None)), true);
        }
    }
    for piece in reply.text_pieces() {
        f.push(
            None,
            &chunk(
                ctx,
                include_usage,
                delta(ContentDelta { content: piece }, None),
            ),
            true,
        );
    }
    for (index, (id, name, arguments)) in reply.tool_calls.iter().enumerate() {
        let head = ToolCallDelta {
            index,
            id: Some(id),
            kind: Some("function"),
            function: FunctionDelta {
                name: Some(name),
                arguments: "",
            },
        };
        f.push(
            None,
            &chunk(
                ctx,
                include_usage,
                delta(ToolDelta { tool_calls: [head] }, None),
            ),
            true,
        );
        for piece in split_even(arguments, reply.chunks) {
            let part = ToolCallDelta {
                index,
                id: None,
                kind: None,
                function: FunctionDelta {
                    name: None,
                    arguments: piece,
                },
            };
            f.push(
                None,
                &chunk(
                    ctx,
                    include_usage,
                    delta(ToolDelta { tool_calls: [part] }, None),
                ),
                true,
            );
        }
    }
    f.start_tail();
    f.push(
        None,
        &chunk(
            ctx,
            include_usage,
            delta(Empty {}, Some(finish_reason(reply))),
        ),
        false,
    );
    if include_usage {
        let mut last = chunk(ctx, true, [(); 0]);
        last.usage = Some(Some(usage(reply)));
        f.push(None, &last, false);
    }
    f.push_data(None, b"[DONE]", false);
    f
}

/// The in-band error event of a chat completions stream: a `data:` line whose JSON has a
/// top-level `error` (what the official SDKs look for).
pub(crate) const INBAND_ERROR_EVENT: Option<&str> = None;

/// Request fields the fake needs from a chat or embeddings request.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
pub(crate) struct ChatProbe<'a> {
    #[serde(borrow)]
    pub(crate) model: Option<std::borrow::Cow<'a, str>>,
    pub(crate) stream: Option<bool>,
    pub(crate) stream_options: Option<StreamOptions>,
    pub(crate) messages: Option<serde::de::IgnoredAny>,
}

/// `stream_options` of a chat request.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
pub(crate) struct StreamOptions {
    pub(crate) include_usage: Option<bool>,
}

/// A 400 for a request body that is not JSON.
pub(crate) fn invalid_json_error() -> String {
    crate::vendor_error::openai_error(
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't using \
         your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not \
         valid JSON.)",
        Some("invalid_request_error"),
        None,
        None,
    )
}

/// A 400 for a missing required parameter.
pub(crate) fn missing_param_error(param: &str) -> String {
    if param == "model" {
        return crate::vendor_error::openai_error(
            "you must provide a model parameter",
            Some("invalid_request_error"),
            None,
            None,
        );
    }
    crate::vendor_error::openai_error(
        &format!("Missing required parameter: '{param}'."),
        Some("invalid_request_error"),
        Some(param),
        Some("missing_required_parameter"),
    )
}

/// The `/embeddings` response for a parsed request body, or a 400 message.
pub(crate) fn embeddings(
    body: &Value,
    model: &str,
    default_dims: usize,
) -> Result<Vec<u8>, String> {
    let inputs: Vec<String> = match body.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) if !items.is_empty() => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Value::String(s) => out.push(s.clone()),
                    // Token arrays: hash their textual form.
                    Value::Number(_) | Value::Array(_) => out.push(item.to_string()),
                    _ => {
                        return Err(crate::vendor_error::openai_error(
                            "'input' must be a string, an array of strings, or an array of token arrays.",
                            Some("invalid_request_error"),
                            Some("input"),
                            None,
                        ));
                    }
                }
            }
            // An array of numbers is one tokenized input, not many.
            if items.iter().all(Value::is_number) {
                vec![Value::Array(items.clone()).to_string()]
            } else {
                out
            }
        }
        Some(_) => {
            return Err(crate::vendor_error::openai_error(
                "'input' must be a non-empty string or array.",
                Some("invalid_request_error"),
                Some("input"),
                None,
            ));
        }
        None => return Err(missing_param_error("input")),
    };
    let dims = match body.get("dimensions") {
        None | Some(Value::Null) => default_dims,
        Some(v) => match v.as_u64() {
            Some(d @ 1..=4096) => d as usize,
            _ => {
                return Err(crate::vendor_error::openai_error(
                    &format!(
                        "Invalid value for 'dimensions': {v} (expected an integer from 1 to 4096)."
                    ),
                    Some("invalid_request_error"),
                    Some("dimensions"),
                    Some("invalid_value"),
                ));
            }
        },
    };
    let base64 = body.get("encoding_format").and_then(Value::as_str) == Some("base64");
    let mut data = Vec::with_capacity(inputs.len());
    let mut tokens = 0u64;
    for (index, text) in inputs.iter().enumerate() {
        tokens += (text.split_whitespace().count() as u64).max(1);
        let vector = embed(text, dims);
        let embedding = if base64 {
            let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
            Value::String(base64_encode(&bytes))
        } else {
            Value::from(vector)
        };
        data.push(
            serde_json::json!({"object": "embedding", "index": index, "embedding": embedding}),
        );
    }
    let out = serde_json::json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    });
    Ok(out.to_string().into_bytes())
}

/// A deterministic unit vector for `text`: equal texts give equal vectors, different texts
/// (almost surely) different ones.
pub(crate) fn embed(text: &str, dims: usize) -> Vec<f32> {
    // FNV-1a over the bytes, then one SplitMix64 stream per text.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut v: Vec<f32> = (0..dims as u64)
        .map(|i| {
            let x = mix64(h ^ mix64(i + 1));
            // Top 24 bits to [-1, 1).
            ((x >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            *group.get(1).unwrap_or(&0),
            *group.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= group.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The `GET /models` list.
pub(crate) fn models(chat_model: &str, created: u64) -> Vec<u8> {
    let mut ids = vec![chat_model, "text-embedding-3-small"];
    ids.dedup();
    let data: Vec<Value> = ids
        .into_iter()
        .map(|id| serde_json::json!({"id": id, "object": "model", "created": created, "owned_by": "system"}))
        .collect();
    serde_json::json!({"object": "list", "data": data})
        .to_string()
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (raw, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(raw.as_bytes()), enc);
        }
    }

    #[test]
    fn embeddings_are_deterministic_unit_vectors() {
        let a = embed("hello world", 8);
        assert_eq!(a, embed("hello world", 8));
        assert_ne!(a, embed("hello world!", 8));
        assert_eq!(a.len(), 8);
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
    }

    #[test]
    fn stream_frames_order_and_usage_flag() {
        let ctx = Ctx::new("chatcmpl-1", "m", 1);
        let reply = Reply::text_then_tool("call_1");
        let without = stream_frames(ctx, &reply, false, false);
        let with = stream_frames(ctx, &reply, true, false);
        // role + 2 text + (tool head + 2 argument pieces) + finish + [DONE]
        assert_eq!(without.len(), 1 + 2 + 3 + 1 + 1);
        assert_eq!(without.content(), &[1, 2, 3, 4, 5]);
        assert_eq!(
            with.len(),
            without.len() + 1,
            "usage chunk only with include_usage"
        );
        let all = String::from_utf8_lossy(with.bytes(0..with.len())).into_owned();
        assert!(
            all.contains(r#""choices":[],"usage":{"prompt_tokens":12"#),
            "{all}"
        );
        assert!(!String::from_utf8_lossy(without.bytes(0..without.len())).contains("usage"));
    }

    #[test]
    fn reasoning_goes_as_reasoning_content_in_json_and_before_the_text_in_streams() {
        let ctx = Ctx::new("chatcmpl-1", "deepseek-reasoner", 1);
        let reply = Reply::text("9.8").with_chunks(2).with_reasoning("compare");
        let v: Value = serde_json::from_slice(&completion(ctx, &reply)).unwrap_or_default();
        assert_eq!(v["choices"][0]["message"]["reasoning_content"], "compare");
        assert_eq!(v["choices"][0]["message"]["content"], "9.8");
        let plain: Value =
            serde_json::from_slice(&completion(ctx, &Reply::text("x"))).unwrap_or_default();
        assert!(
            plain["choices"][0]["message"]
                .get("reasoning_content")
                .is_none()
        );
        let f = stream_frames(ctx, &reply, false, false);
        let data = f.sse_data();
        assert_eq!(
            data[1]["choices"][0]["delta"],
            serde_json::json!({"content": null, "reasoning_content": "com"})
        );
        assert_eq!(data[3]["choices"][0]["delta"]["content"], "9");
        assert_eq!(f.content(), &[1, 2, 3, 4]);
    }
}
