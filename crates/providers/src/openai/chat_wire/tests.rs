//! Round trips in both directions (what a server reads is what the adapter writes back, byte
//! for byte), null-as-absent for every optional field, unknown fields and tags, and the error
//! messages a malformed request gets.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::*;

/// Parses `json` as `T` and writes it back; the text must come back unchanged.
fn same_bytes<T>(json: &str) -> T
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let v: T = serde_json::from_str(json).unwrap();
    assert_eq!(serde_json::to_string(&v).unwrap(), json);
    v
}

fn error_of<T: serde::de::DeserializeOwned + std::fmt::Debug>(json: &str) -> String {
    serde_json::from_str::<T>(json).unwrap_err().to_string()
}

/// A request with every kind of message, part and option, in the order the adapter writes.
const REQUEST: &str = concat!(
    r#"{"model":"gpt-4o","messages":["#,
    r#"{"role":"system","content":"Be brief."},"#,
    r#"{"role":"user","content":[{"type":"text","text":"What is in this picture?"},"#,
    r#"{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}},"#,
    r#"{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"}},"#,
    r#"{"type":"file","file":{"file_id":"file-abc"}},"#,
    r#"{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]},"#,
    r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","#,
    r#""function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]},"#,
    r#"{"role":"tool","content":"18C, cloudy","tool_call_id":"call_1"},"#,
    r#"{"role":"assistant","content":"It is","prefix":true}],"#,
    r#""tools":[{"type":"function","function":{"name":"weather","description":"Current weather","#,
    r#""parameters":{"properties":{"city":{"type":"string"}},"type":"object"}}}],"#,
    r#""tool_choice":{"type":"function","function":{"name":"weather"}},"#,
    r#""response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"},"strict":true}},"#,
    r#""temperature":0.5,"top_p":0.9,"max_tokens":10,"max_completion_tokens":100,"stop":["END"],"#,
    r#""seed":7,"presence_penalty":0.25,"frequency_penalty":-0.5,"parallel_tool_calls":false,"#,
    r#""reasoning_effort":"low","user":"user-42","stream":true,"stream_options":{"include_usage":true},"#,
    r#""continue_final_message":true,"add_generation_prompt":false,"n":1,"logprobs":false,"#,
    r#""top_logprobs":0,"logit_bias":{"50256":-100}}"#
);

#[test]
fn a_request_the_server_reads_is_the_request_the_adapter_writes() {
    let req: ChatCompletionRequest<'static> = same_bytes(REQUEST);
    assert_eq!(req.messages.len(), 5);
    let Some(MessageContent::Parts(parts)) = &req.messages[1].content else {
        panic!("parts: {:?}", req.messages[1].content);
    };
    assert!(
        matches!(&parts[1], ContentPart::ImageUrl { image_url } if image_url.detail.as_deref() == Some("low"))
    );
    assert!(
        matches!(&parts[3], ContentPart::File { file } if file.file_id.as_deref() == Some("file-abc"))
    );
    assert!(matches!(&parts[4], ContentPart::InputAudio { .. }));
    assert_eq!(req.messages[2].tool_calls[0].id.as_deref(), Some("call_1"));
    assert!(matches!(req.tool_choice, Some(ToolChoice::Function(_))));
    assert_eq!(
        req.stop.clone().map(Stop::into_vec),
        Some(vec!["END".to_owned()])
    );
    assert_eq!(req.temperature, Some(0.5));
    assert!(req.stream && req.stream_options.as_ref().is_some_and(|o| o.include_usage));
    assert_eq!(req.logit_bias.as_ref().map(|b| b.len()), Some(1));
    // Every string of a parsed request is owned: it outlives the body it came from.
    assert!(matches!(req.model, Some(Cow::Owned(_))));
}

#[test]
fn a_borrowed_request_writes_data_urls_without_building_them() {
    let (media_type, data) = (String::from("image/png"), String::from("iVBORw0KGgo="));
    let url = Url::Data {
        media_type: Cow::Borrowed(&media_type),
        data: Cow::Borrowed(&data),
    };
    let req = ChatCompletionRequest {
        model: Some(Cow::Borrowed("gpt-4o")),
        messages: vec![Message {
            role: Some(Cow::Borrowed("user")),
            content: Some(MessageContent::Parts(vec![ContentPart::ImageUrl {
                image_url: ImageUrl { url, detail: None },
            }])),
            ..Default::default()
        }],
        stop: Some(Stop::Many(Cow::Borrowed(&[]))),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_string(&req).unwrap(),
        r#"{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}"#
    );
    // Read back, the URL is a plain string.
    let back: ChatCompletionRequest<'static> =
        serde_json::from_str(&serde_json::to_string(&req).unwrap()).unwrap();
    let Some(MessageContent::Parts(parts)) = &back.messages[0].content else {
        panic!("{back:?}");
    };
    assert!(
        matches!(&parts[0], ContentPart::ImageUrl { image_url } if image_url.url == Url::Plain("data:image/png;base64,iVBORw0KGgo=".into()))
    );
}

#[test]
fn null_is_absent_for_every_optional_request_field() {
    let fields = [
        "model",
        "tools",
        "tool_choice",
        "response_format",
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "parallel_tool_calls",
        "reasoning_effort",
        "user",
        "stream",
        "stream_options",
        "continue_final_message",
        "add_generation_prompt",
        "n",
        "logprobs",
        "top_logprobs",
        "logit_bias",
    ];
    let mut body = json!({"messages": [{"role": "user", "content": null, "name": null,
        "tool_calls": null, "function_call": null, "tool_call_id": null, "reasoning_content": null,
        "reasoning": null, "refusal": null, "prefix": null}]});
    for f in fields {
        body[f] = Value::Null;
    }
    let req: ChatCompletionRequest<'static> = serde_json::from_value(body).unwrap();
    let want = ChatCompletionRequest {
        messages: vec![Message {
            role: Some("user".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(req, want);
    // Written back, absent fields stay out; a message's content is always there.
    assert_eq!(
        serde_json::to_string(&req).unwrap(),
        r#"{"messages":[{"role":"user","content":null}]}"#
    );
    let o: StreamOptions = serde_json::from_str(r#"{"include_usage":null}"#).unwrap();
    assert!(!o.include_usage);
    let t: ToolCall<'static> = serde_json::from_str(
        r#"{"id":null,"type":null,"function":{"name":null,"arguments":null}}"#,
    )
    .unwrap();
    assert_eq!(t, ToolCall::default());
}

#[test]
fn unknown_fields_are_accepted_and_dropped() {
    let req: ChatCompletionRequest<'static> = serde_json::from_str(
        r#"{"messages":[{"role":"user","content":"hi","audio":{"id":"a"}}],"metadata":{"k":"v"},
            "modalities":["text"],"store":true,"prediction":{"type":"content","content":"x"},
            "tools":[{"type":"function","function":{"name":"f","strict":true},"extra":1}]}"#,
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&req).unwrap(),
        r#"{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}"#
    );
    let c: ChatCompletion<'static> = serde_json::from_str(
        r#"{"id":"x","system_fingerprint":"fp","service_tier":"default","choices":[{"index":0,
            "message":{"role":"assistant","content":"ok","annotations":[]},"finish_reason":"stop"}]}"#,
    )
    .unwrap();
    assert_eq!(
        c.choices[0].message.as_ref().unwrap().content,
        Some(MessageContent::Text("ok".into()))
    );
}

#[test]
fn unknown_and_unreadable_parts_are_kept_as_they_came() {
    // (Kept JSON is written back with its keys sorted, as `serde_json::Value` holds them.)
    let parts = r#"[{"type":"video","video":{"url":"v"}},{"image_url":{},"type":"image_url"},{"text":5,"type":"text"},{"text":"b"},"plain"]"#;
    let content: MessageContent<'static> = same_bytes(parts);
    let MessageContent::Parts(p) = &content else {
        panic!("{content:?}");
    };
    assert!(
        p.iter().all(|p| matches!(p, ContentPart::Other(_))),
        "{p:?}"
    );
    // The text of a part without a type still counts (some servers answer so).
    assert_eq!(content.into_text(), "b");
}

#[test]
fn content_stop_and_sampling_errors_say_what_is_expected() {
    for bad in ["42", "true", r#"{"type":"text"}"#] {
        let e = error_of::<MessageContent<'static>>(bad);
        assert!(
            e.starts_with("expected a string or an array of parts"),
            "{bad}: {e}"
        );
    }
    for bad in [
        r#"{"messages":[],"stop":5}"#,
        r#"{"messages":[],"stop":["a",1]}"#,
    ] {
        let e = error_of::<ChatCompletionRequest<'static>>(bad);
        assert!(
            e.starts_with("expected a string or an array of strings"),
            "{bad}: {e}"
        );
    }
    let one: ChatCompletionRequest<'static> = same_bytes(r#"{"messages":[],"stop":"END"}"#);
    assert_eq!(one.stop, Some(Stop::One("END".into())));
    let e = error_of::<ChatCompletionRequest<'static>>(r#"{"messages":[],"temperature":1e39}"#);
    assert!(e.starts_with("1e39 is out of range"), "{e}");
    let e = error_of::<ChatCompletionRequest<'static>>(r#"{"model":"m"}"#);
    assert!(e.starts_with("missing field `messages`"), "{e}");
    let e = error_of::<ChatCompletionRequest<'static>>(
        r#"{"messages":[],"response_format":{"type":"yaml"}}"#,
    );
    assert!(e.contains("unknown variant `yaml`"), "{e}");
}

#[test]
fn arguments_and_tool_choices_in_every_shape() {
    let f: FunctionCall<'static> =
        serde_json::from_str(r#"{"name":"f","arguments":{"a":1}}"#).unwrap();
    assert_eq!(f.arguments, Arguments::Json(json!({"a": 1})));
    assert_eq!(f.arguments.clone().into_text(), r#"{"a":1}"#);
    // Written back as the JSON text the wire carries.
    assert_eq!(
        serde_json::to_string(&f).unwrap(),
        r#"{"name":"f","arguments":"{\"a\":1}"}"#
    );
    for (json, want) in [
        (r#""auto""#, ToolChoice::Mode("auto".into())),
        (
            r#"{"type":"function","function":{"name":"f"}}"#,
            ToolChoice::Function(NamedToolChoice::function("f")),
        ),
        (
            r#"{"allowed_tools":{"mode":"auto","tools":[]},"type":"allowed_tools"}"#,
            ToolChoice::Other(
                json!({"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}),
            ),
        ),
    ] {
        assert_eq!(same_bytes::<ToolChoice<'static>>(json), want);
    }
    // A named choice without `type` reads as a function and is written with it.
    let c: ToolChoice<'static> = serde_json::from_str(r#"{"function":{"name":"f"}}"#).unwrap();
    assert_eq!(c, ToolChoice::Function(NamedToolChoice::function("f")));
}

/// OpenAI's example answer (the API reference's, with a tool call added), as the gateway
/// writes it and the adapter reads it.
#[test]
fn a_completion_round_trips() {
    let json = concat!(
        r#"{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion","created":1741569952,"#,
        r#""model":"gpt-4.1-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","#,
        r#""content":null,"reasoning_content":"Think.","tool_calls":[{"id":"call_1","type":"function","#,
        r#""function":{"name":"f","arguments":"{}"}}],"refusal":"no"},"finish_reason":"tool_calls","logprobs":null}],"#,
        r#""usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"#,
        r#""prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"#,
        r#""completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}"#
    );
    let c: ChatCompletion<'static> = same_bytes(json);
    let u = c.usage.unwrap();
    assert_eq!((u.prompt_tokens, u.cached_tokens()), (19, 0));
    assert_eq!(
        u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
        Some(0)
    );
    // DeepSeek's cache counts, and a float `created`.
    let c: ChatCompletion<'static> = serde_json::from_str(
        r#"{"created":1.7e9,"choices":[],"usage":{"prompt_tokens":50,"prompt_cache_hit_tokens":32,"prompt_cache_miss_tokens":18}}"#,
    )
    .unwrap();
    assert_eq!(c.created, 1_700_000_000);
    assert_eq!(c.usage.unwrap().cached_tokens(), 32);
}

#[test]
fn null_is_absent_for_every_optional_answer_field() {
    let c: ChatCompletion<'static> = serde_json::from_str(
        r#"{"id":null,"object":null,"created":null,"model":null,"choices":[{"index":null,"message":null,
            "finish_reason":null,"logprobs":null}],"usage":{"prompt_tokens":null,"completion_tokens":null,
            "total_tokens":null,"prompt_tokens_details":null,"completion_tokens_details":null},"error":null}"#,
    )
    .unwrap();
    assert_eq!(
        c,
        ChatCompletion {
            choices: vec![Choice::default()],
            usage: Some(Usage::default()),
            ..Default::default()
        }
    );
    let k: ChatCompletionChunk<'static> = serde_json::from_str(
        r#"{"id":null,"choices":[{"index":0,"delta":null,"finish_reason":null,"usage":null}],"usage":null}"#,
    )
    .unwrap();
    assert_eq!(k.choices, vec![ChunkChoice::default()]);
    let d: Delta<'static> = serde_json::from_str(
        r#"{"role":null,"content":null,"reasoning_content":null,"reasoning":null,"refusal":null,"tool_calls":null}"#,
    )
    .unwrap();
    assert_eq!(d, Delta::default());
}

#[test]
fn chunks_round_trip() {
    for json in [
        r#"{"id":"c","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null,"logprobs":null}]}"#,
        r#"{"id":"c","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\""}}]},"finish_reason":null,"logprobs":null}]}"#,
        r#"{"id":"c","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"hm"},"finish_reason":"stop","logprobs":null,"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}]}"#,
        r#"{"id":"c","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":4}}}"#,
    ] {
        same_bytes::<ChatCompletionChunk<'static>>(json);
    }
    // A later piece of a call: no id, no name.
    let k: ChatCompletionChunk<'static> = serde_json::from_str(
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}"#,
    )
    .unwrap();
    let call = &k.choices[0].delta.tool_calls[0];
    assert_eq!((call.index, call.id.as_deref()), (Some(0), None));
    assert_eq!(
        call.function.as_ref().map(|f| &f.arguments),
        Some(&Arguments::Text("1}".into()))
    );
}
