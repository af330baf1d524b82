//! Round trips of OpenAI's own examples, null-as-absent for every optional field, and the
//! error messages a malformed request gets.

use serde_json::{Value, json};

use super::*;

/// Parses `json` as `T`, serializes it back, and returns both forms.
fn round_trip<T>(json: &str) -> (T, Value)
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let v: T = serde_json::from_str(json).unwrap();
    let back = serde_json::to_value(&v).unwrap();
    (v, back)
}

/// Every key of `want` is in `got` with the same value (objects compared recursively);
/// `got` may have more (fields this module always writes).
fn assert_contains(got: &Value, want: &Value, path: &str) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, wv) in w {
                let gv = g
                    .get(k)
                    .unwrap_or_else(|| panic!("{path}.{k} missing in {got}"));
                assert_contains(gv, wv, &format!("{path}.{k}"));
            }
        }
        (Value::Array(g), Value::Array(w)) => {
            assert_eq!(g.len(), w.len(), "{path}: {got} vs {want}");
            for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                assert_contains(gv, wv, &format!("{path}[{i}]"));
            }
        }
        // Integral floats (`1.0`) may come back as floats or integers.
        (Value::Number(g), Value::Number(w)) => assert_eq!(g.as_f64(), w.as_f64(), "{path}"),
        _ => assert_eq!(got, want, "{path}"),
    }
}

// openai/openai-openapi, openapi.yaml, `createResponse`, example "Text input" (response).
const TEXT_RESPONSE: &str = r#"{
  "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
  "object": "response",
  "created_at": 1741476542,
  "status": "completed",
  "completed_at": 1741476543,
  "error": null,
  "incomplete_details": null,
  "instructions": null,
  "max_output_tokens": null,
  "model": "gpt-5.4",
  "output": [
    {
      "type": "message",
      "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b",
      "status": "completed",
      "role": "assistant",
      "content": [
        {
          "type": "output_text",
          "text": "In a peaceful grove beneath a silver moon, a unicorn named Lumina discovered a hidden pool that reflected the stars.",
          "annotations": []
        }
      ]
    }
  ],
  "parallel_tool_calls": true,
  "previous_response_id": null,
  "reasoning": {"effort": null, "summary": null},
  "store": true,
  "temperature": 1.0,
  "text": {"format": {"type": "text"}},
  "tool_choice": "auto",
  "tools": [],
  "top_p": 1.0,
  "truncation": "disabled",
  "usage": {
    "input_tokens": 36,
    "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
    "output_tokens": 87,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 123
  },
  "user": null,
  "metadata": {}
}"#;

// openai/openai-openapi, openapi.yaml, `createResponse`, example "Functions" (response).
const FUNCTION_RESPONSE: &str = r#"{
  "id": "resp_67ca09c5efe0819096d0511c92b8c890096610f474011cc0",
  "object": "response",
  "created_at": 1741294021,
  "status": "completed",
  "completed_at": 1741294022,
  "error": null,
  "incomplete_details": null,
  "instructions": null,
  "max_output_tokens": null,
  "model": "gpt-5.4",
  "output": [
    {
      "type": "function_call",
      "id": "fc_67ca09c6bedc8190a7abfec07b1a1332096610f474011cc0",
      "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k",
      "name": "get_current_weather",
      "arguments": "{\"location\":\"Boston, MA\",\"unit\":\"celsius\"}",
      "status": "completed"
    }
  ],
  "parallel_tool_calls": true,
  "previous_response_id": null,
  "reasoning": {"effort": null, "summary": null},
  "store": true,
  "temperature": 1.0,
  "text": {"format": {"type": "text"}},
  "tool_choice": "auto",
  "tools": [
    {
      "type": "function",
      "description": "Get the current weather in a given location",
      "name": "get_current_weather",
      "parameters": {
        "type": "object",
        "properties": {
          "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
        },
        "required": ["location", "unit"]
      },
      "strict": true
    }
  ],
  "top_p": 1.0,
  "truncation": "disabled",
  "usage": {
    "input_tokens": 291,
    "output_tokens": 23,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 314
  },
  "user": null,
  "metadata": {}
}"#;

#[test]
fn openai_text_response_round_trips() {
    let (r, back): (Response, _) = round_trip(TEXT_RESPONSE);
    assert_eq!(r.status, Some(ResponseStatus::Completed));
    assert_eq!(r.created_at, 1_741_476_542);
    assert_eq!(r.tool_choice, ToolChoice::Mode(ToolChoiceMode::Auto));
    assert!(r.aggregate_output_text().starts_with("In a peaceful grove"));
    let u = r.usage.unwrap();
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.total_tokens),
        (36, 87, 123)
    );
    assert_eq!(u.input_tokens_details.cache_write_tokens, Some(0));
    assert_contains(&back, &serde_json::from_str(TEXT_RESPONSE).unwrap(), "$");
    // What OpenAI always sends is always written, `null` included.
    for k in [
        "error",
        "incomplete_details",
        "instructions",
        "previous_response_id",
        "user",
    ] {
        assert_eq!(back[k], Value::Null, "{k}");
    }
    assert_eq!(back["output"][0]["content"][0]["logprobs"], json!([]));
}

#[test]
fn openai_function_call_response_round_trips() {
    let (r, back): (Response, _) = round_trip(FUNCTION_RESPONSE);
    let OutputItem::FunctionCall(f) = &r.output[0] else {
        panic!("{:?}", r.output)
    };
    assert_eq!(f.call_id, "call_unLAR8MvFNptuiZK6K6HCy5k");
    assert_eq!(
        f.id.as_deref(),
        Some("fc_67ca09c6bedc8190a7abfec07b1a1332096610f474011cc0")
    );
    assert_eq!(f.status, Some(ItemStatus::Completed));
    let Tool::Function(t) = &r.tools[0] else {
        panic!("{:?}", r.tools)
    };
    assert_eq!(
        (t.name.as_str(), t.strict),
        ("get_current_weather", Some(true))
    );
    // No `input_tokens_details` in this example: the details read as zero.
    assert_eq!(r.usage.unwrap().input_tokens_details.cached_tokens, 0);
    assert_contains(
        &back,
        &serde_json::from_str(FUNCTION_RESPONSE).unwrap(),
        "$",
    );
    assert_eq!(r.aggregate_output_text(), "");
}

// openai/openai-openapi, openapi.yaml, `createResponse`, example "Functions" (request), and the
// "Image input" request; plus the forms the SDKs' `ResponseInputItemParam` allows.
#[test]
fn requests_with_every_item_kind_parse() {
    let body = json!({
        "model": "gpt-5.4",
        "instructions": "Be brief.",
        "input": [
            {"role": "developer", "content": "Answer in French."},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "what is in this image?"},
                {"type": "input_image", "image_url": "https://example.com/a.jpg", "detail": "auto"},
                {"type": "input_image", "file_id": "file-1", "detail": null},
                {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,AA=="}
            ]},
            {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [
                {"type": "output_text", "text": "Un chat.", "annotations": []},
                {"type": "refusal", "refusal": "no"}
            ]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking"}],
             "encrypted_content": "gAAA", "content": [{"type": "reasoning_text", "text": "hm"}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_current_weather",
             "arguments": "{\"location\":\"Boston, MA\"}", "status": "completed"},
            {"type": "function_call_output", "call_id": "call_1", "output": "{\"temp\":21}"},
            {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "21"}]},
            {"type": "item_reference", "id": "msg_0"},
            {"id": "msg_00"},
            {"type": "computer_call_output", "call_id": "c", "output": {"type": "computer_screenshot"}}
        ],
        "tools": [
            {"type": "function", "name": "get_current_weather", "description": "Get the weather",
             "parameters": {"type": "object", "properties": {"location": {"type": "string"}}}, "strict": false},
            {"type": "web_search_preview"},
            {"type": "file_search", "vector_store_ids": ["vs_1"]},
            {"type": "mcp", "server_label": "x", "server_url": "https://mcp.example.com"}
        ],
        "tool_choice": {"type": "function", "name": "get_current_weather"},
        "text": {"format": {"type": "json_schema", "name": "weather", "strict": true,
                            "schema": {"type": "object"}, "description": "The weather"}},
        "reasoning": {"effort": "high", "summary": "auto"},
        "metadata": {"k": "v"},
        "include": ["reasoning.encrypted_content"],
        "stream_options": {"include_obfuscation": false},
        "conversation": "conv_1",
        "some_future_field": {"anything": true}
    });
    let req: CreateResponse = serde_json::from_value(body.clone()).unwrap();
    let Some(Input::Items(items)) = &req.input else {
        panic!("{:?}", req.input)
    };
    let names: Vec<&str> = items.iter().map(InputItem::type_name).collect();
    assert_eq!(
        names,
        [
            "message",
            "message",
            "message",
            "reasoning",
            "function_call",
            "function_call_output",
            "function_call_output",
            "item_reference",
            "item_reference",
            "computer_call_output"
        ]
    );
    let InputItem::Message(dev) = &items[0] else {
        panic!()
    };
    assert_eq!(dev.role, Role::Developer);
    let InputItem::Message(user) = &items[1] else {
        panic!()
    };
    let MessageContent::Parts(parts) = &user.content else {
        panic!()
    };
    let kinds: Vec<&str> = parts.iter().map(ContentPart::type_name).collect();
    assert_eq!(
        kinds,
        ["input_text", "input_image", "input_image", "input_file"]
    );
    let ContentPart::InputImage(img) = &parts[2] else {
        panic!()
    };
    assert_eq!(
        (img.file_id.as_deref(), img.detail.as_deref()),
        (Some("file-1"), None)
    );
    let InputItem::FunctionCallOutput(out) = &items[6] else {
        panic!()
    };
    assert!(matches!(&out.output, FunctionOutput::Parts(p) if p.len() == 1));
    let InputItem::Reasoning(r) = &items[3] else {
        panic!()
    };
    assert_eq!(r.summary, [SummaryPart::text("thinking")]);
    let kinds: Vec<&str> = req.tools.iter().map(Tool::type_name).collect();
    assert_eq!(
        kinds,
        ["function", "web_search_preview", "file_search", "mcp"]
    );
    let Tool::BuiltIn(mcp) = &req.tools[3] else {
        panic!()
    };
    assert_eq!(mcp.description(), "remote MCP");
    assert_eq!(
        req.tool_choice,
        Some(ToolChoice::Function(FunctionChoice {
            name: "get_current_weather".into()
        }))
    );
    let Some(TextFormat::JsonSchema(f)) = req.text.as_ref().and_then(|t| t.format.as_ref()) else {
        panic!("{:?}", req.text)
    };
    assert_eq!((f.name.as_str(), f.strict), ("weather", Some(true)));
    assert_eq!(req.conversation, Some(json!("conv_1")));

    // Written back, everything but the unknown field and the typeless forms is as it came.
    let back = serde_json::to_value(&req).unwrap();
    let mut want = body;
    want.as_object_mut().unwrap().remove("some_future_field");
    want["input"][0]["type"] = json!("message");
    want["input"][8]["type"] = json!("item_reference");
    want["input"][1]["content"][2]
        .as_object_mut()
        .unwrap()
        .remove("detail");
    want["input"][2]["content"][0]["logprobs"] = json!([]);
    assert_eq!(back, want);
}

#[test]
fn an_input_item_without_type_is_a_message() {
    let req: CreateResponse = serde_json::from_str(
        r#"{"model":"m","input":[{"role":"user","content":"Hello"},{"role":"assistant","content":[{"type":"output_text","text":"Hi"}]}]}"#,
    )
    .unwrap();
    let Some(Input::Items(items)) = req.input else {
        panic!()
    };
    let InputItem::Message(m) = &items[0] else {
        panic!("{items:?}")
    };
    assert_eq!(*m, InputMessage::text(Role::User, "Hello"));
    let InputItem::Message(a) = &items[1] else {
        panic!("{items:?}")
    };
    assert_eq!(a.role, Role::Assistant);
    // `input` as a plain string.
    let req: CreateResponse = serde_json::from_str(r#"{"input":"Hello"}"#).unwrap();
    assert_eq!(req.input, Some(Input::Text("Hello".into())));
}

/// Every optional request field, sent as `null`, parses as if absent.
#[test]
fn null_is_absent_for_every_request_field() {
    let fields = [
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "text",
        "max_output_tokens",
        "temperature",
        "top_p",
        "reasoning",
        "metadata",
        "user",
        "store",
        "stream",
        "previous_response_id",
        "include",
        "truncation",
        "service_tier",
        "prompt_cache_key",
        "safety_identifier",
        "top_logprobs",
        "max_tool_calls",
        "background",
        "stream_options",
        "conversation",
        "prompt",
        "context_management",
        "moderation",
        "prompt_cache_retention",
        "prompt_cache_options",
    ];
    let mut all = serde_json::Map::new();
    for f in fields {
        let one: CreateResponse =
            serde_json::from_value(json!({ f: null })).unwrap_or_else(|e| panic!("{f}: null: {e}"));
        assert_eq!(one, CreateResponse::default(), "{f}");
        all.insert(f.to_owned(), Value::Null);
    }
    let req: CreateResponse = serde_json::from_value(Value::Object(all)).unwrap();
    assert_eq!(req, CreateResponse::default());
    // Nothing unset is written.
    assert_eq!(serde_json::to_string(&req).unwrap(), "{}");

    // Nested optional fields too.
    let nested = json!({
        "input": [
            {"role": "user", "content": [
                {"type": "input_image", "image_url": null, "file_id": null, "detail": null},
                {"type": "input_file", "file_id": null, "file_data": null, "file_url": null, "filename": null}
            ], "id": null, "status": null, "phase": null, "type": null},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": null, "id": null, "status": null},
            {"type": "function_call_output", "call_id": "c", "output": "x", "id": null, "status": null},
            {"type": "reasoning", "id": "rs", "summary": null, "content": null, "encrypted_content": null, "status": null},
            {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "t", "annotations": null, "logprobs": null}
            ]}
        ],
        "tools": [{"type": "function", "name": "f", "description": null, "parameters": null, "strict": null}],
        "text": {"format": null, "verbosity": null},
        "reasoning": {"effort": null, "summary": null},
        "stream_options": {"include_obfuscation": null}
    });
    let req: CreateResponse = serde_json::from_value(nested).unwrap();
    let Some(Input::Items(items)) = &req.input else {
        panic!()
    };
    let InputItem::FunctionCall(f) = &items[1] else {
        panic!()
    };
    assert_eq!((f.arguments.as_str(), f.id.as_ref()), ("", None));
    let InputItem::Reasoning(r) = &items[3] else {
        panic!()
    };
    assert!(r.summary.is_empty() && r.content.is_none());
    assert_eq!(req.text, Some(TextConfig::default()));
    let Tool::Function(t) = &req.tools[0] else {
        panic!()
    };
    assert_eq!(
        *t,
        FunctionTool {
            name: "f".into(),
            ..Default::default()
        }
    );
}

/// Every optional field of the Response object and its parts, sent as `null`, parses.
#[test]
fn null_is_absent_for_every_response_field() {
    let r: Response = serde_json::from_value(json!({
        "id": "resp_1", "object": null, "created_at": null, "status": null, "error": null,
        "incomplete_details": null, "instructions": null, "max_output_tokens": null,
        "model": null, "output": null, "parallel_tool_calls": null,
        "previous_response_id": null, "reasoning": null, "store": null, "temperature": null,
        "text": null, "tool_choice": null, "tools": null, "top_p": null, "truncation": null,
        "usage": null, "user": null, "metadata": null, "output_text": null,
        "completed_at": null, "background": null, "service_tier": null,
        "max_tool_calls": null, "top_logprobs": null, "prompt_cache_key": null,
        "safety_identifier": null
    }))
    .unwrap();
    assert_eq!(
        r,
        Response {
            id: "resp_1".into(),
            ..Response::default()
        }
    );
    assert!(r.parallel_tool_calls);
    assert_eq!(r.object, "response");

    let u: Usage = serde_json::from_value(json!({
        "input_tokens": null, "input_tokens_details": null, "output_tokens": null,
        "output_tokens_details": null, "total_tokens": null
    }))
    .unwrap();
    assert_eq!(u, Usage::default());
    let d: InputTokensDetails =
        serde_json::from_value(json!({"cached_tokens": null, "cache_write_tokens": null})).unwrap();
    assert_eq!(d, InputTokensDetails::default());
    let m: OutputMessage = serde_json::from_value(
        json!({"id": "m", "role": "assistant", "status": null, "content": null, "phase": null}),
    )
    .unwrap();
    assert_eq!(
        m,
        OutputMessage::assistant("m", ItemStatus::Completed, vec![])
    );
    let e: ResponseError = serde_json::from_value(json!({"code": null, "message": null})).unwrap();
    assert_eq!(e, ResponseError::default());
    let i: IncompleteDetails = serde_json::from_value(json!({"reason": null})).unwrap();
    assert_eq!(i.reason, None);
    // A float timestamp (the SDK types say float) is read too.
    let r: Response =
        serde_json::from_value(json!({"id": "r", "created_at": 1741476542.5})).unwrap();
    assert_eq!(r.created_at, 1_741_476_542);
}

#[test]
fn unknown_tags_are_kept_and_known_ones_with_bad_fields_name_the_field() {
    let item: InputItem = serde_json::from_str(r#"{"type":"mcp_call","id":"x"}"#).unwrap();
    assert_eq!(item.type_name(), "mcp_call");
    assert_eq!(
        serde_json::to_value(&item).unwrap(),
        json!({"type": "mcp_call", "id": "x"})
    );
    let part: ContentPart = serde_json::from_str(r#"{"type":"input_audio"}"#).unwrap();
    assert_eq!(part.type_name(), "input_audio");
    let out: OutputItem = serde_json::from_str(r#"{"type":"web_search_call","id":"ws"}"#).unwrap();
    assert_eq!((out.type_name(), out.id()), ("web_search_call", Some("ws")));
    let f: TextFormat = serde_json::from_str(r#"{"type":"grammar"}"#).unwrap();
    assert_eq!(f.type_name(), "grammar");
    let c: ToolChoice = serde_json::from_str(r#"{"type":"web_search_preview"}"#).unwrap();
    assert_eq!(c.type_name(), "web_search_preview");

    let err = |json: &str| {
        serde_json::from_str::<CreateResponse>(json)
            .unwrap_err()
            .to_string()
    };
    let e = err(r#"{"input":[{"type":"function_call","name":"f","arguments":"{}"}]}"#);
    assert!(
        e.contains("`function_call` item: missing field `call_id`"),
        "{e}"
    );
    let e = err(r#"{"input":[{"content":"x"}]}"#);
    assert!(e.contains("input item: missing field `type`"), "{e}");
    let e = err(r#"{"input":[{"role":"tool","content":"x"}]}"#);
    assert!(e.contains("unknown variant `tool`"), "{e}");
    let e = err(r#"{"input":["hi"]}"#);
    assert!(
        e.contains("input item: expected an object with a `type`, found a string"),
        "{e}"
    );
    let e = err(r#"{"input":[{"role":"user","content":[{"text":"x"}]}]}"#);
    assert!(e.contains("content part: missing field `type`"), "{e}");
    let e = err(r#"{"input":[{"role":"user","content":[{"type":"input_text","text":3}]}]}"#);
    assert!(
        e.contains("`input_text` part: invalid type: integer `3`, expected a string"),
        "{e}"
    );
    let e = err(r#"{"input":7}"#);
    assert!(e.contains("expected a string or an array"), "{e}");
    let e = err(r#"{"tool_choice":"sometimes"}"#);
    assert!(e.contains("tool_choice: unknown value `sometimes`"), "{e}");
    let e = err(r#"{"tools":[{"type":"function"}]}"#);
    assert!(e.contains("`function` tool: missing field `name`"), "{e}");
    let e = err(r#"{"text":{"format":{"type":"json_schema","schema":{}}}}"#);
    assert!(
        e.contains("`json_schema` format: missing field `name`"),
        "{e}"
    );
}

#[test]
fn tool_choices_round_trip() {
    for (json, want) in [
        (r#""auto""#, ToolChoice::Mode(ToolChoiceMode::Auto)),
        (r#""none""#, ToolChoice::Mode(ToolChoiceMode::None)),
        (r#""required""#, ToolChoice::Mode(ToolChoiceMode::Required)),
        (
            r#"{"type":"function","name":"f"}"#,
            ToolChoice::Function(FunctionChoice { name: "f".into() }),
        ),
        (
            r#"{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"f"}]}"#,
            ToolChoice::AllowedTools(AllowedTools {
                mode: ToolChoiceMode::Required,
                tools: vec![json!({"type": "function", "name": "f"})],
            }),
        ),
        (
            r#"{"type":"file_search"}"#,
            ToolChoice::Other(json!({"type": "file_search"})),
        ),
    ] {
        let c: ToolChoice = serde_json::from_str(json).unwrap();
        assert_eq!(c, want, "{json}");
        let back = serde_json::to_value(&c).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(json).unwrap(), "{json}");
    }
    for (json, want) in [
        (r#"{"type":"text"}"#, TextFormat::Text),
        (r#"{"type":"json_object"}"#, TextFormat::JsonObject),
    ] {
        let f: TextFormat = serde_json::from_str(json).unwrap();
        assert_eq!(f, want);
        assert_eq!(serde_json::to_string(&f).unwrap(), json);
    }
}

// openai/openai-openapi, openapi.yaml, `createResponse`, example "Streaming" (the events as
// listed there; they predate `sequence_number`, which is then read as 0), and the examples of
// `ResponseErrorEvent`, `ResponseFailedEvent`, `ResponseIncompleteEvent`,
// `ResponseFunctionCallArgumentsDoneEvent` and `ResponseReasoningSummaryPartAddedEvent`.
const STREAM: &[&str] = &[
    r#"{"type":"response.created","response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","created_at":1741290958,"status":"in_progress","error":null,"incomplete_details":null,"instructions":"You are a helpful assistant.","max_output_tokens":null,"model":"gpt-5.4","output":[],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}"#,
    r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","type":"message","status":"in_progress","role":"assistant","content":[]}}"#,
    r#"{"type":"response.content_part.added","item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}"#,
    r#"{"type":"response.output_text.delta","item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":"Hi"}"#,
    r#"{"type":"response.output_text.done","item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"text":"Hi there! How can I assist you today?"}"#,
    r#"{"type":"response.content_part.done","item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"part":{"type":"output_text","text":"Hi there! How can I assist you today?","annotations":[]}}"#,
    r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi there! How can I assist you today?","annotations":[]}]}}"#,
    r#"{"type":"response.completed","response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","created_at":1741290958,"status":"completed","error":null,"incomplete_details":null,"instructions":"You are a helpful assistant.","max_output_tokens":null,"model":"gpt-5.4","output":[{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi there! How can I assist you today?","annotations":[]}]}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":37,"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48},"user":null,"metadata":{}}}"#,
    r#"{"type":"error","code":"ERR_SOMETHING","message":"Something went wrong","param":null,"sequence_number":1}"#,
    r#"{"type":"response.failed","response":{"id":"resp_123","object":"response","created_at":1740855869,"status":"failed","completed_at":null,"error":{"code":"server_error","message":"The model failed to generate a response."},"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"gpt-4o-mini-2024-07-18","output":[],"previous_response_id":null,"reasoning_effort":null,"store":false,"temperature":1,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}"#,
    r#"{"type":"response.incomplete","response":{"id":"resp_123","object":"response","created_at":1740855869,"status":"incomplete","completed_at":null,"error":null,"incomplete_details":{"reason":"max_tokens"},"instructions":null,"max_output_tokens":null,"model":"gpt-4o-mini-2024-07-18","output":[],"previous_response_id":null,"reasoning_effort":null,"store":false,"temperature":1,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1,"truncation":"disabled","usage":null,"user":null,"metadata":{}},"sequence_number":1}"#,
    r#"{"type":"response.function_call_arguments.done","item_id":"item-abc","name":"get_weather","output_index":1,"arguments":"{ \"arg\": 123 }","sequence_number":1}"#,
    r#"{"type":"response.reasoning_summary_part.added","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""},"sequence_number":1}"#,
    r#"{"type":"response.reasoning_summary_text.delta","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":0,"delta":"**Responding to a greeting**","sequence_number":1}"#,
];

#[test]
fn openai_stream_examples_round_trip() {
    let mut types = Vec::new();
    for (i, raw) in STREAM.iter().enumerate() {
        let e: StreamEvent = serde_json::from_str(raw).unwrap_or_else(|e| panic!("{i}: {e}"));
        assert!(!matches!(e, StreamEvent::Other(_)), "{i}: {e:?}");
        types.push(e.event_type().to_owned());
        let back = serde_json::to_value(&e).unwrap();
        let mut want: Value = serde_json::from_str(raw).unwrap();
        // The one unknown key in OpenAI's own examples (from an older Response shape).
        if let Some(r) = want.get_mut("response").and_then(Value::as_object_mut) {
            r.remove("reasoning_effort");
        }
        assert_contains(&back, &want, &format!("event {i}"));
        assert_eq!(back["sequence_number"], json!(e.sequence_number()), "{i}");
        let again: StreamEvent = serde_json::from_value(back).unwrap();
        assert_eq!(again, e, "{i}");
    }
    assert_eq!(types[0], "response.created");
    let StreamEvent::Completed(done) = serde_json::from_str(STREAM[7]).unwrap() else {
        panic!()
    };
    assert_eq!(
        done.response.aggregate_output_text(),
        "Hi there! How can I assist you today?"
    );
    let StreamEvent::Failed(f) = serde_json::from_str(STREAM[9]).unwrap() else {
        panic!()
    };
    assert_eq!(f.response.error.unwrap().code, "server_error");
    let StreamEvent::Incomplete(i) = serde_json::from_str(STREAM[10]).unwrap() else {
        panic!()
    };
    assert_eq!(
        i.response.incomplete_details.unwrap().reason.as_deref(),
        Some("max_tokens")
    );
    assert!(STREAM.iter().skip(7).take(4).all(|raw| {
        serde_json::from_str::<StreamEvent>(raw)
            .unwrap()
            .is_terminal()
    }));
}

#[test]
fn error_events_read_flat_and_nested_forms() {
    let flat: StreamEvent = serde_json::from_str(
        r#"{"type":"error","code":"insufficient_quota","message":"You exceeded your current quota","param":null,"sequence_number":2}"#,
    )
    .unwrap();
    let StreamEvent::Error(flat) = flat else {
        panic!()
    };
    assert_eq!(flat.code(), Some("insufficient_quota"));
    assert_eq!(flat.message(), "You exceeded your current quota");
    let nested: StreamEvent = serde_json::from_str(
        r#"{"type":"error","sequence_number":3,"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Too long","param":"input"}}"#,
    )
    .unwrap();
    let StreamEvent::Error(nested) = nested else {
        panic!()
    };
    assert_eq!(nested.code(), Some("context_length_exceeded"));
    assert_eq!(nested.error_type(), Some("invalid_request_error"));
    assert_eq!(nested.message(), "Too long");
    assert_eq!(nested.sequence_number, 3);
}

#[test]
fn unknown_events_are_kept_with_their_sequence_number() {
    let mut e: StreamEvent = serde_json::from_str(
        r#"{"type":"response.web_search_call.searching","item_id":"ws","output_index":0,"sequence_number":5}"#,
    )
    .unwrap();
    assert_eq!(
        (e.event_type(), e.sequence_number()),
        ("response.web_search_call.searching", 5)
    );
    e.set_sequence_number(9);
    assert_eq!(e.sequence_number(), 9);
    assert!(!e.is_terminal());
    let e = serde_json::from_str::<StreamEvent>(r#"{"sequence_number":1}"#).unwrap_err();
    assert!(
        e.to_string().contains("stream event: missing field `type`"),
        "{e}"
    );
    let e =
        serde_json::from_str::<StreamEvent>(r#"{"type":"response.output_text.delta","delta":5}"#)
            .unwrap_err();
    assert!(
        e.to_string()
            .contains("`response.output_text.delta` event: invalid type"),
        "{e}"
    );
}

#[test]
fn a_gateway_stream_is_built_from_the_types() {
    // The sequence a server writes for one text answer and one function call.
    let msg = OutputMessage::assistant("msg_1", ItemStatus::InProgress, vec![]);
    let call = FunctionCall {
        call_id: "call_1".into(),
        name: "f".into(),
        id: Some("fc_1".into()),
        status: Some(ItemStatus::InProgress),
        ..Default::default()
    };
    let mut events = [
        StreamEvent::Created(ResponseEvent {
            response: Response {
                id: "resp_1".into(),
                status: Some(ResponseStatus::InProgress),
                ..Default::default()
            },
            ..Default::default()
        }),
        StreamEvent::OutputItemAdded(OutputItemEvent {
            output_index: 0,
            item: OutputItem::Message(msg),
            sequence_number: 0,
        }),
        StreamEvent::ContentPartAdded(ContentPartEvent {
            item_id: "msg_1".into(),
            output_index: 0,
            content_index: 0,
            part: OutputContent::text(""),
            sequence_number: 0,
        }),
        StreamEvent::OutputItemAdded(OutputItemEvent {
            output_index: 1,
            item: OutputItem::FunctionCall(call),
            sequence_number: 0,
        }),
        StreamEvent::FunctionCallArgumentsDelta(FunctionCallArgumentsDeltaEvent {
            item_id: "fc_1".into(),
            output_index: 1,
            delta: "{}".into(),
            ..Default::default()
        }),
    ];
    for (n, e) in events.iter_mut().enumerate() {
        e.set_sequence_number(n as u64);
    }
    let json: Vec<Value> = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(
        json[1]["item"],
        json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []})
    );
    assert_eq!(
        json[2]["part"],
        json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []})
    );
    assert_eq!(
        json[3]["item"],
        json!({"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "", "id": "fc_1", "status": "in_progress"})
    );
    assert_eq!(json[4]["sequence_number"], 4);
    assert_eq!(json[0]["response"]["tool_choice"], "auto");
    assert_eq!(json[0]["response"]["parallel_tool_calls"], true);
    let u = serde_json::to_value(Usage::new(10, 4, 5)).unwrap();
    assert_eq!(
        u,
        json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
               "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15})
    );
}
