//! The per-vendor support matrix of `docs/client-support.md`, checked so it cannot drift: the
//! table in the doc is rendered from [`ROWS`], and every row's door column is what the door's
//! own parser does with the row's example (forwarded into ripcord's request, or refused with a
//! 400 naming the field). The vendor columns are pinned end to end by
//! `crates/cli/tests/clients.rs` (`parameters_are_forwarded_mapped_or_refused_by_name`) and by
//! the adapters' unit tests.

use ripcord_core::{ChatRequest, ContentPart, ResponseFormat};
use serde_json::{Value, json};

use super::errors::Shape;
use super::messages_wire;
use super::reply::parse_body;
use super::wire::{self, WireRequest};

/// What a door does with a field.
#[derive(Debug, Clone, Copy)]
enum Door {
    /// Into ripcord's request; the check says where it landed.
    Forwarded(fn(&ChatRequest) -> bool),
    /// A 400 naming the field.
    Refused,
}

/// One documented field.
struct Row {
    door: &'static str,
    field: &'static str,
    /// A request body setting it (the door's other required fields included).
    example: fn() -> Value,
    at_door: Door,
    openai: &'static str,
    anthropic: &'static str,
}

fn chat(extra: Value) -> Value {
    let mut v = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v
}

fn messages(extra: Value) -> Value {
    let mut v =
        json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v
}

const TOOLS: fn() -> Value =
    || json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);

const ROWS: &[Row] = &[
    Row {
        door: "chat",
        field: "max_tokens / max_completion_tokens",
        example: || chat(json!({"max_completion_tokens": 64000})),
        at_door: Door::Forwarded(|r| r.max_tokens == Some(64000)),
        openai: "forwarded, lowered to the model's known cap (the attempt says `;max_tokens=N`)",
        anthropic: "`max_tokens`, lowered to the model's known cap",
    },
    Row {
        door: "chat",
        field: "response_format (json_object, json_schema)",
        example: || {
            chat(
                json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}}),
            )
        },
        at_door: Door::Forwarded(|r| {
            matches!(r.response_format, ResponseFormat::JsonSchema { .. })
        }),
        openai: "forwarded",
        anthropic: "mapped: a forced tool with the schema",
    },
    Row {
        door: "chat",
        field: "seed",
        example: || chat(json!({"seed": 7})),
        at_door: Door::Forwarded(|r| r.seed == Some(7)),
        openai: "forwarded",
        anthropic: "refused (400 naming it): Anthropic has no seed",
    },
    Row {
        door: "chat",
        field: "presence_penalty, frequency_penalty",
        example: || chat(json!({"presence_penalty": 0.5, "frequency_penalty": 0.5})),
        at_door: Door::Forwarded(|r| {
            r.presence_penalty == Some(0.5) && r.frequency_penalty == Some(0.5)
        }),
        openai: "forwarded",
        anthropic: "refused (400 naming it) unless 0",
    },
    Row {
        door: "chat",
        field: "parallel_tool_calls",
        example: || chat(json!({"tools": TOOLS(), "parallel_tool_calls": false})),
        at_door: Door::Forwarded(|r| r.parallel_tool_calls == Some(false)),
        openai: "forwarded (with tools)",
        anthropic: "mapped: `tool_choice.disable_parallel_tool_use`",
    },
    Row {
        door: "chat",
        field: "role: function / function_call",
        example: || {
            json!({"model": "m", "messages": [
                {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{}"}},
                {"role": "function", "name": "f", "content": "ok"}]})
        },
        at_door: Door::Forwarded(|r| {
            r.messages.len() == 2 && r.messages[1].tool_call_id == Some("call_function_0".into())
        }),
        openai: "mapped: a tool call and its tool result",
        anthropic: "mapped: `tool_use` and `tool_result`",
    },
    Row {
        door: "chat",
        field: "reasoning_effort",
        example: || chat(json!({"reasoning_effort": "high"})),
        at_door: Door::Forwarded(|r| {
            r.reasoning.and_then(|x| x.effort) == Some(ripcord_core::ReasoningEffort::High)
        }),
        openai: "forwarded (a model without reasoning refuses it itself)",
        anthropic: "mapped: `thinking.budget_tokens` (minimal 1024, low 2048, medium 8192, high 16384; under `max_tokens`)",
    },
    Row {
        door: "chat",
        field: "n (> 1)",
        example: || chat(json!({"n": 2})),
        at_door: Door::Refused,
        openai: "—",
        anthropic: "—",
    },
    Row {
        door: "chat",
        field: "logprobs, top_logprobs",
        example: || chat(json!({"logprobs": true})),
        at_door: Door::Refused,
        openai: "—",
        anthropic: "—",
    },
    Row {
        door: "chat",
        field: "logit_bias",
        example: || chat(json!({"logit_bias": {"1": 5}})),
        at_door: Door::Refused,
        openai: "—",
        anthropic: "—",
    },
    Row {
        door: "chat",
        field: "content parts `file`, `input_audio`",
        example: || {
            chat(json!({"messages": [{"role": "user", "content": [
                {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}},
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]}]}))
        },
        at_door: Door::Forwarded(|r| {
            matches!(
                r.messages[0].content.as_slice(),
                [ContentPart::File { .. }, ContentPart::Audio { .. }]
            )
        }),
        openai: "forwarded (Responses-API links: `input_file`; `input_audio` refused, 400 naming the part)",
        anthropic: "mapped: a PDF `file_data` is a `document` block; other files, `file_id` and `input_audio` refused (400 naming the part)",
    },
    Row {
        door: "messages",
        field: "output_config.format / output_format (json_schema)",
        example: || {
            messages(
                json!({"output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}}),
            )
        },
        at_door: Door::Forwarded(|r| {
            matches!(r.response_format, ResponseFormat::JsonSchema { .. })
        }),
        openai: "mapped: `response_format: json_schema`",
        anthropic: "mapped: a forced tool with the schema",
    },
    Row {
        door: "messages",
        field: "thinking (enabled, budget_tokens)",
        example: || {
            messages(
                json!({"max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 3000}}),
            )
        },
        at_door: Door::Forwarded(|r| r.reasoning.and_then(|x| x.budget_tokens) == Some(3000)),
        openai: "mapped: `reasoning_effort` of the budget's band (< 2048 low, < 8192 medium, else high)",
        anthropic: "forwarded",
    },
    Row {
        door: "messages",
        field: "tool_choice.disable_parallel_tool_use",
        example: || {
            messages(
                json!({"tools": [{"name": "f", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "auto", "disable_parallel_tool_use": true}}),
            )
        },
        at_door: Door::Forwarded(|r| r.parallel_tool_calls == Some(false)),
        openai: "mapped: `parallel_tool_calls: false`",
        anthropic: "forwarded",
    },
    Row {
        door: "messages",
        field: "Anthropic-defined client tools (`bash_20250124`, `text_editor_*`, `computer_*`)",
        example: || messages(json!({"tools": [{"type": "bash_20250124", "name": "bash"}]})),
        at_door: Door::Forwarded(|r| {
            r.tools.len() == 1 && r.tools[0].vendor_type.as_deref() == Some("bash_20250124")
        }),
        openai: "refused (400 naming the tool): only Anthropic runs them",
        anthropic: "forwarded (type and name)",
    },
    Row {
        door: "messages",
        field: "Anthropic server tools (`web_search_*`, `code_execution_*`)",
        example: || {
            messages(json!({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}))
        },
        at_door: Door::Refused,
        openai: "—",
        anthropic: "—",
    },
    Row {
        door: "messages",
        field: "`thinking` / `redacted_thinking` blocks in assistant history",
        example: || {
            messages(json!({"messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "redacted_thinking", "data": "d"},
                    {"type": "text", "text": "a"}]},
                {"role": "user", "content": "more"}]}))
        },
        at_door: Door::Forwarded(|r| r.messages.get(1).is_some_and(|m| m.reasoning.len() == 2)),
        openai: "left out on purpose: no OpenAI-wire vendor takes reasoning back (DeepSeek refuses it)",
        anthropic: "forwarded verbatim, first in the turn; thinking without a signature (another vendor's) left out",
    },
    Row {
        door: "chat",
        field: "`reasoning_content` on an assistant message in history",
        example: || {
            chat(json!({"messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "a", "reasoning_content": "t"},
                {"role": "user", "content": "more"}]}))
        },
        at_door: Door::Forwarded(|r| r.messages.get(1).is_some_and(|m| m.reasoning.len() == 1)),
        openai: "left out on purpose (DeepSeek refuses it in history)",
        anthropic: "left out on purpose: unsigned, Anthropic would refuse it",
    },
];

/// The markdown table of [`ROWS`].
fn table() -> String {
    let mut out = String::from(
        "| door | field | at the door | OpenAI-wire links | Anthropic links |\n| --- | --- | --- | --- | --- |\n",
    );
    for r in ROWS {
        let door = match r.at_door {
            Door::Forwarded(_) => "accepted",
            Door::Refused => "refused: 400 naming the field",
        };
        out.push_str(&format!(
            "| {} | {} | {door} | {} | {} |\n",
            r.door, r.field, r.openai, r.anthropic
        ));
    }
    out
}

fn parse(door: &str, body: &Value) -> Result<ChatRequest, super::errors::GatewayError> {
    let bytes = body.to_string();
    match door {
        "chat" => wire::into_chat_request(parse_body::<WireRequest>(bytes.as_bytes())?),
        _ => messages_wire::parse_request(bytes.as_bytes())?.into_chat_request(true),
    }
}

#[test]
fn every_row_is_what_its_door_does() {
    for r in ROWS {
        let body = (r.example)();
        match (r.at_door, parse(r.door, &body)) {
            (Door::Forwarded(check), Ok(req)) => {
                assert!(check(&req), "{} {}: landed wrong: {req:?}", r.door, r.field);
            }
            (Door::Refused, Err(e)) => {
                assert_eq!(e.status, 400, "{} {}", r.door, r.field);
                let shape = if r.door == "chat" {
                    Shape::OpenAi
                } else {
                    Shape::Anthropic
                };
                let message = e.body(shape).to_string();
                assert!(message.contains(": "), "{} {}: {message}", r.door, r.field);
            }
            (Door::Forwarded(_), Err(e)) => {
                panic!("{} {}: refused: {}", r.door, r.field, e.message())
            }
            (Door::Refused, Ok(req)) => panic!("{} {}: accepted: {req:?}", r.door, r.field),
        }
    }
}

#[test]
fn the_doc_shows_the_matrix() {
    let doc = include_str!("../../../../docs/client-support.md");
    assert!(
        doc.contains(&table()),
        "docs/client-support.md is out of date; its table must read:\n{}",
        table()
    );
}
