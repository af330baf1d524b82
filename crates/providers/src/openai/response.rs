//! Chat Completions and Embeddings responses.

use ripcord_core::{
    ChatResponse, EmbeddingResponse, Error, ErrorKind, FinishReason, Price, ReasoningBlock, Result,
    ToolCall, Usage,
};
use serde::Deserialize;
use std::borrow::Cow;

use crate::error_body::{ErrorBody, ErrorHook, read_ok_body};

use super::chat_wire as wire;
use super::error_map;

/// The reasoning of a message or a delta: `reasoning_content`, else `reasoning` (a vendor that
/// sends both sends the same text twice), empty ones ignored.
pub(crate) fn reasoning_of(
    reasoning_content: Option<Cow<'_, str>>,
    reasoning: Option<Cow<'_, str>>,
) -> Option<String> {
    reasoning_content
        .filter(|r| !r.is_empty())
        .or(reasoning.filter(|r| !r.is_empty()))
        .map(Cow::into_owned)
}

/// Token counts as OpenAI (and DeepSeek's cache fields) report them, priced.
pub(crate) fn to_usage(u: Option<wire::Usage>, price: Option<&Price>) -> Usage {
    let u = u.unwrap_or_default();
    Usage::new(u.prompt_tokens, u.completion_tokens)
        .with_cached_input(u.cached_tokens())
        .priced(price)
}

/// Maps an OpenAI-family finish reason (Zhipu's `sensitive` included).
pub(crate) fn finish_reason(s: &str) -> FinishReason {
    match s {
        "stop" | "eos" | "end_turn" | "stop_sequence" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
        "content_filter" | "sensitive" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// The error of an `error` object in a 200 body, classified like an HTTP error.
fn in_band(err: &serde_json::Value, hook: Option<ErrorHook>) -> Error {
    let b = serde_json::json!({ "error": err });
    let b = ErrorBody::from_value(&b).unwrap_or_else(|| ErrorBody::with_message(err.to_string()));
    error_map::from_body(None, &b, hook)
}

/// Parses a 200 chat body. An error object in it is classified like an HTTP error.
pub(crate) fn parse_chat(
    body: &[u8],
    hook: Option<ErrorHook>,
    price: Option<&Price>,
) -> Result<ChatResponse> {
    let c: wire::ChatCompletion<'static> =
        read_ok_body(body, "the chat response is not valid JSON", hook)?;
    if let Some(err) = &c.error {
        return Err(in_band(err, hook));
    }
    let Some(choice) = c.choices.into_iter().next() else {
        // A 200 that is an error without an `error` key: Baidu's `error_code`/`error_msg`,
        // DashScope's top-level `code`/`message`. Classify it by its codes.
        if let Some(b) = ErrorBody::parse(body) {
            return Err(error_map::from_body(None, &b, hook));
        }
        return Err(Error::new(
            ErrorKind::InvalidResponse,
            "the chat response has no choices",
        ));
    };
    let Some(msg) = choice.message else {
        return Err(Error::new(
            ErrorKind::InvalidResponse,
            "the chat response's first choice has no message",
        ));
    };
    let mut content = msg
        .content
        .map(wire::MessageContent::into_text)
        .unwrap_or_default();
    let reasoning: Vec<ReasoningBlock> = reasoning_of(msg.reasoning_content, msg.reasoning)
        .map(ReasoningBlock::thinking)
        .into_iter()
        .collect();
    let mut finish = choice
        .finish_reason
        .as_deref()
        .map(finish_reason)
        .unwrap_or_default();
    if content.is_empty()
        && let Some(r) = msg.refusal.filter(|r| !r.is_empty())
    {
        content = r.into_owned();
        finish = FinishReason::ContentFilter;
    }
    let tool_calls: Vec<ToolCall> = msg
        .tool_calls
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            ToolCall::new(
                t.id.map_or_else(|| format!("call_{i}"), Cow::into_owned),
                t.function.name.map(Cow::into_owned).unwrap_or_default(),
                t.function.arguments.into_text(),
            )
        })
        .collect();
    if finish == FinishReason::ContentFilter && content.is_empty() && tool_calls.is_empty() {
        return Err(crate::driver::refused_without_content());
    }
    let usage = to_usage(c.usage, price);
    Ok(ChatResponse::new(content)
        .with_tool_calls(tool_calls)
        .with_reasoning(reasoning)
        .with_finish_reason(finish)
        .with_usage(usage)
        .with_model(c.model.map(Cow::into_owned).unwrap_or_default()))
}

#[derive(Deserialize)]
struct Embeddings {
    #[serde(default)]
    data: Vec<EmbeddingItem>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<wire::Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

/// Parses a 200 embeddings body; vectors come back in input order.
pub(crate) fn parse_embeddings(
    body: &[u8],
    inputs: usize,
    hook: Option<ErrorHook>,
) -> Result<EmbeddingResponse> {
    let r: Embeddings = read_ok_body(body, "the embeddings response is not valid JSON", hook)?;
    if let Some(err) = &r.error {
        return Err(in_band(err, hook));
    }
    if r.data.len() != inputs {
        return Err(Error::new(
            ErrorKind::InvalidResponse,
            format!("asked for {inputs} embeddings, got {}", r.data.len()),
        ));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; inputs];
    for (pos, item) in r.data.into_iter().enumerate() {
        let i = item.index.unwrap_or(pos);
        match slots.get_mut(i) {
            Some(slot @ None) => *slot = Some(item.embedding),
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidResponse,
                    format!("embedding index {i} is out of range or repeated"),
                ));
            }
        }
    }
    let vectors: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
    let mut resp = EmbeddingResponse::new(vectors, r.model.unwrap_or_default());
    resp.usage = to_usage(r.usage, None);
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_a_string_or_text_parts() {
        let text = |json: &str| {
            serde_json::from_str::<Option<wire::MessageContent>>(json)
                .map(|t| t.map(wire::MessageContent::into_text))
        };
        assert_eq!(text(r#""Hello""#).unwrap().as_deref(), Some("Hello"));
        assert_eq!(
            text(r#""esc\"aped""#).unwrap().as_deref(),
            Some("esc\"aped")
        );
        assert_eq!(
            text(r#"[{"type":"text","text":"a"},{"type":"image_url"},{"text":"b"}]"#)
                .unwrap()
                .as_deref(),
            Some("ab")
        );
        assert_eq!(text("null").unwrap(), None);
        assert_eq!(text("[]").unwrap().as_deref(), Some(""));
        let e = text("42").unwrap_err().to_string();
        assert!(e.contains("a string or an array of parts"), "{e}");
    }

    #[test]
    fn reasoning_content_or_openrouter_reasoning_becomes_a_thinking_block() {
        let body = br#"{"model":"deepseek-reasoner","choices":[{"message":{"role":"assistant",
            "reasoning_content":"9.11 < 9.8","content":"9.8"},"finish_reason":"stop"}]}"#;
        let r = parse_chat(body, None, None).unwrap();
        assert_eq!(r.content, "9.8");
        assert_eq!(r.reasoning, vec![ReasoningBlock::thinking("9.11 < 9.8")]);
        let body = br#"{"choices":[{"message":{"role":"assistant","reasoning":"hm","content":"ok"},"finish_reason":"stop"}]}"#;
        let r = parse_chat(body, None, None).unwrap();
        assert_eq!(r.reasoning, vec![ReasoningBlock::thinking("hm")]);
        // Both present: the same text once; neither or empty: no block.
        let body = br#"{"choices":[{"message":{"reasoning_content":"a","reasoning":"a","content":"ok"},"finish_reason":"stop"}]}"#;
        assert_eq!(parse_chat(body, None, None).unwrap().reasoning.len(), 1);
        let body = br#"{"choices":[{"message":{"reasoning_content":"","reasoning":null,"content":"ok"},"finish_reason":"stop"}]}"#;
        assert!(parse_chat(body, None, None).unwrap().reasoning.is_empty());
    }

    #[test]
    fn parses_text_tool_calls_usage_and_cache() {
        let body = br#"{"id":"x","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[{"index":0,
            "message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function",
            "function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]},"finish_reason":"tool_calls"}],
            "usage":{"prompt_tokens":1000,"completion_tokens":10,"total_tokens":1010,"prompt_tokens_details":{"cached_tokens":400}}}"#;
        let price = Price::per_million(2.5, 10.0).with_cached_input(1.25);
        let r = parse_chat(body, None, Some(&price)).unwrap();
        assert_eq!(r.content, "");
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            r.tool_calls,
            vec![ToolCall::new("call_a", "weather", r#"{"city":"Oslo"}"#)]
        );
        assert_eq!(r.usage.input_tokens, 1000);
        assert_eq!(r.usage.cached_input_tokens, 400);
        let cost = r.usage.cost_usd.unwrap();
        assert!((cost - (600.0 * 2.5 + 400.0 * 1.25 + 10.0 * 10.0) / 1e6).abs() < 1e-12);
        assert_eq!(r.model, "gpt-4o-2024-08-06");
    }

    #[test]
    fn deepseek_cache_fields_and_refusals() {
        let body = br#"{"model":"deepseek-chat","choices":[{"message":{"content":"","refusal":"I can't help with that."},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":50,"completion_tokens":5,"prompt_cache_hit_tokens":32,"prompt_cache_miss_tokens":18}}"#;
        let r = parse_chat(body, None, None).unwrap();
        assert_eq!(r.usage.cached_input_tokens, 32);
        assert_eq!(r.content, "I can't help with that.");
        assert_eq!(r.finish_reason, FinishReason::ContentFilter);
    }

    #[test]
    fn error_object_in_a_200_and_bad_json() {
        let e = parse_chat(br#"{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}"#, None, None)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::QuotaExhausted);
        assert_eq!(e.vendor_code(), Some("insufficient_quota"));
        let e = parse_chat(b"{\"choices\": [", None, None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
        let e = parse_chat(br#"{"choices":[]}"#, None, None).unwrap_err();
        assert!(e.message().contains("no choices"));
    }

    #[test]
    fn embeddings_follow_their_indexes() {
        let body = br#"{"object":"list","model":"text-embedding-3-small","data":[
            {"object":"embedding","index":1,"embedding":[0.5,0.5]},{"object":"embedding","index":0,"embedding":[1.0,0.0]}],
            "usage":{"prompt_tokens":4,"total_tokens":4}}"#;
        let r = parse_embeddings(body, 2, None).unwrap();
        assert_eq!(r.vectors, vec![vec![1.0, 0.0], vec![0.5, 0.5]]);
        assert_eq!(r.usage.input_tokens, 4);
        assert!(parse_embeddings(body, 3, None).is_err());
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(finish_reason("sensitive"), FinishReason::ContentFilter);
        assert_eq!(
            finish_reason("network_error"),
            FinishReason::Other("network_error".into())
        );
    }
}
