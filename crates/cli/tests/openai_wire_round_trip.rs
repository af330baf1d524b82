//! The OpenAI wire's types are one set (`ripcord_providers::openai_chat_wire`), but two sides
//! translate ripcord's types through them: the adapter (`ripcord-providers`, client side) and
//! the gateway (server side). This pins that the two stay in step: the OpenAI adapter talks to the
//! gateway over loopback, so a request the adapter writes is read back by the gateway, and the
//! answer the gateway writes (as one JSON body and as stream chunks) is read back by the
//! adapter — and each side must end up with what the other started from.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail the test by panicking

mod support;

use std::sync::{Arc, Mutex};

use ripcord_cli::gateway::GatewayState;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, Context, FinishReason, ImageSource,
    Message, ModelId, ResponseFormat, Result, ToolCall, ToolChoice, ToolSpec, Usage, async_trait,
    stream,
};
use ripcord_providers::{OpenAi, OpenAiConfig};
use serde_json::json;
use tokio::sync::oneshot;

/// The model behind the gateway: records each request the gateway parsed, answers `reply`
/// (and streams it as events through the default `stream`).
#[derive(Debug)]
struct Recording {
    id: ModelId,
    caps: Capabilities,
    reply: ChatResponse,
    seen: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl ChatModel for Recording {
    fn id(&self) -> &ModelId {
        &self.id
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    async fn chat(&self, req: &ChatRequest, _ctx: &Context) -> Result<ChatResponse> {
        self.seen.lock().unwrap().push(req.clone());
        Ok(self.reply.clone())
    }
}

/// A request using every part both wires carry.
fn request() -> ChatRequest {
    let mut req = ChatRequest::new(vec![
        Message::system("You are terse."),
        Message::user("What is in this image?").with_image(ImageSource::Url {
            url: "https://example.invalid/sky.png".into(),
        }),
        Message::assistant("A blue sky."),
        Message::user("Why is it blue? Check the weather too."),
        Message::assistant_tool_calls(vec![ToolCall::new(
            "call_7",
            "weather",
            r#"{"city":"Oslo"}"#,
        )]),
        Message::tool_result("call_7", "sunny"),
    ])
    .with_tool(ToolSpec::new(
        "weather",
        "Current weather for a city",
        json!({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}),
    ))
    .with_tool_choice(ToolChoice::Tool {
        name: "weather".into(),
    })
    .with_response_format(ResponseFormat::JsonSchema {
        name: "answer".into(),
        schema: json!({"type":"object","properties":{"why":{"type":"string"}}}),
        strict: true,
    })
    .with_max_tokens(200)
    .with_temperature(0.5)
    .with_seed(42);
    req.top_p = Some(0.25);
    req.stop = vec!["END".into(), "STOP".into()];
    req.user = Some("user-1234".into());
    req
}

/// An answer with text, a tool call, usage and a finish reason that is not the default.
fn reply() -> ChatResponse {
    let mut r = ChatResponse::new("Rayleigh scattering.").with_usage(Usage::new(31, 7));
    r.tool_calls = vec![ToolCall::new("call_9", "weather", r#"{"city":"Bergen"}"#)];
    r.finish_reason = FinishReason::ToolCalls;
    r.model = "ripcord".into();
    r
}

struct Running {
    adapter: OpenAi,
    model: Arc<Recording>,
    _stop: oneshot::Sender<()>,
}

async fn start() -> Running {
    let model = Arc::new(Recording {
        id: ModelId::new("behind", "behind-1"),
        caps: Capabilities::new(128_000, 4096),
        reply: reply(),
        seen: Mutex::new(Vec::new()),
    });
    let state = GatewayState::new(Arc::clone(&model) as Arc<dyn ChatModel>);
    let g = support::start_gateway(state).await;
    let adapter = OpenAi::new(
        OpenAiConfig::new("ripcord", "gateway-key-1234").with_base_url(format!("{}/v1", g.url)),
    )
    .unwrap();
    Running {
        adapter,
        model,
        _stop: g.stop,
    }
}

/// What both wires carry of an answer (provenance and cost are each side's own).
fn carried(r: &ChatResponse) -> (String, Vec<ToolCall>, FinishReason, u64, u64) {
    (
        r.content.clone(),
        r.tool_calls.clone(),
        r.finish_reason.clone(),
        r.usage.input_tokens,
        r.usage.output_tokens,
    )
}

/// The gateway's model saw exactly one request: the one the adapter wrote.
fn assert_gateway_read_the_request(g: &Running) {
    let seen = g.model.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0],
        request(),
        "the gateway read another request than the adapter wrote"
    );
}

#[tokio::test]
async fn a_request_and_its_answer_survive_adapter_to_gateway_and_back() {
    let g = start().await;
    let resp = g.adapter.chat(&request(), &Context::new()).await.unwrap();

    assert_gateway_read_the_request(&g);
    assert_eq!(carried(&resp), carried(&reply()));
    assert_eq!(resp.model, reply().model);
}

#[tokio::test]
async fn a_streamed_answer_survives_gateway_chunks_to_adapter_events() {
    let g = start().await;
    let s = g.adapter.stream(&request(), &Context::new()).await.unwrap();
    let resp = stream::collect(s).await.unwrap();

    assert_gateway_read_the_request(&g);
    assert_eq!(carried(&resp), carried(&reply()));
}
