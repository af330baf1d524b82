//! `POST /v1/responses`: OpenAI's Responses API as a [`Dialect`] of the one pipeline, and the
//! stored-response endpoints (`GET`/`DELETE /v1/responses/{id}`, `GET …/input_items`).
//!
//! Any chain serves it: the request's `input` items and `instructions` become ripcord's
//! messages, so an Anthropic, Gemini or local link answers a Responses client like any other.
//! What cannot be honoured is refused with a 400 naming the field (`tools[1].type`,
//! `input[2].content[0].type`, `background`, …) instead of being dropped: built-in tools
//! (web search, file search, computer use, code interpreter, …) need OpenAI's own servers,
//! file ids need its file store, item references need items the gateway never saw.
//! `reasoning` input items (an earlier turn's reasoning from an OpenAI model) are dropped with a
//! logged note: no link of a chain takes them back.
//!
//! `store` (the API's default: true) keeps the answer in the [`ResponseStore`], so
//! `previous_response_id` continues the conversation (its history, without the earlier
//! `instructions`, as on OpenAI's API), and the stored-response endpoints read it back; a
//! stored response is only visible to the tenant that created it.
//!
//! A stream is the typed event sequence the official SDKs' stream helpers accept, each event
//! numbered by `sequence_number`: `response.created`, `response.in_progress`, then per output
//! item `response.output_item.added`, (text) `response.content_part.added`,
//! `response.output_text.delta`… `response.output_text.done`, `response.content_part.done`,
//! (a tool call) `response.function_call_arguments.delta`… `.done`, and
//! `response.output_item.done`; then `response.completed` (or `response.incomplete` when the
//! answer was cut by `max_output_tokens` or a content filter). A failure after the stream began
//! is `response.failed` followed by an `error` event.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Extension, Path, State};
use axum::response::{IntoResponse, Response};
use ripcord_core::{
    ChatRequest, ChatResponse, ContentPart, FinishReason, Message, ResponseFormat, Role, ToolCall,
    ToolChoice, ToolSpec, Usage,
};
use ripcord_providers::openai_responses_wire as rw;
use serde_json::{Value, json};

use super::GatewayState;
use super::errors::{GatewayError, Shape};
use super::front::Authed;
use super::pipeline::{Answer, Call, Dialect};
use super::reply::parse_body;
use super::responses_events::ResponseEvents;
use super::responses_store::{ResponseStore, StoredResponse};
use super::wire::image_part;

/// The Responses door.
pub(super) struct Responses(rw::CreateResponse);

/// What the door keeps from the request to answer it.
pub(super) struct Opts {
    /// The response object's echo of the request (instructions, tools, text, …).
    pub(super) echo: rw::Response,
    /// Where the answer is stored, when `store` is on.
    pub(super) store: Option<ToStore>,
}

/// What storing the answer needs.
pub(super) struct ToStore {
    store: Arc<ResponseStore>,
    input_items: Vec<Value>,
    /// The conversation before this answer's output (without `instructions`).
    history: Vec<Message>,
}

impl Dialect for Responses {
    const PATH: &'static str = "/v1/responses";
    const SHAPE: Shape = Shape::OpenAi;
    type Opts = Opts;
    type Encoder = ResponseEvents;

    fn parse(body: &[u8]) -> Result<Self, GatewayError> {
        parse_body(body).map(Responses)
    }

    fn model(&self) -> Option<&str> {
        self.0.model.as_deref()
    }

    fn stream(&self) -> bool {
        self.0.stream.unwrap_or(false)
    }

    async fn translate(self, call: &Call<'_>) -> Result<(ChatRequest, Opts), GatewayError> {
        translate(self.0, call).await
    }

    fn answer_id(_n: u64) -> String {
        // Random, not counted: ids of stored responses are shared by every replica and must
        // not be guessable by another tenant (who would still be refused, but learn nothing).
        format!("resp_{:032x}", rand::random::<u128>())
    }

    async fn render(
        opts: Opts,
        answer: &Answer,
        resp: &ChatResponse,
    ) -> Result<Response, GatewayError> {
        let object = response_object(opts.echo, answer, resp);
        let Some(store) = opts.store else {
            // Nothing to keep: the object is written straight into the body.
            return Ok(axum::Json(object).into_response());
        };
        let value = serde_json::to_value(&object).map_err(|e| {
            GatewayError::new(
                500,
                "server_error",
                format!("could not encode the response: {e}"),
            )
        })?;
        store.save(&object.id, &answer.owner, &value, resp).await;
        Ok(axum::Json(value).into_response())
    }

    fn encoder(opts: Opts, answer: Answer) -> ResponseEvents {
        ResponseEvents::new(opts, answer)
    }
}

impl ToStore {
    pub(super) async fn save(self, id: &str, owner: &str, response: &Value, resp: &ChatResponse) {
        let mut history = self.history;
        if !resp.content.is_empty() || !resp.tool_calls.is_empty() {
            let mut m = Message::assistant(resp.content.clone());
            m.tool_calls.clone_from(&resp.tool_calls);
            history.push(m);
        }
        let doc = StoredResponse {
            owner: owner.to_owned(),
            response: response.clone(),
            input_items: self.input_items,
            history,
        };
        if self.store.put(id, doc).await.is_err() {
            tracing::warn!(
                target: "ripcord::gateway",
                response_id = id,
                "a response larger than the whole response store was not stored"
            );
        }
    }
}

fn unsupported(path: impl Into<String>, what: impl std::fmt::Display) -> GatewayError {
    GatewayError::invalid_at(path, what)
}

/// The request's refusals and its translation to ripcord's request.
async fn translate(
    r: rw::CreateResponse,
    call: &Call<'_>,
) -> Result<(ChatRequest, Opts), GatewayError> {
    refuse_unservable(&r)?;
    // A continuation starts from the stored conversation (the tenant's own only).
    let mut history = Vec::new();
    if let Some(prev) = &r.previous_response_id {
        let Some(doc) = call.state.responses.get(prev, &call.owner).await else {
            return Err(GatewayError::new(
                404,
                "previous_response_not_found",
                format!("Previous response with id '{prev}' not found."),
            )
            .with_param("previous_response_id"));
        };
        history = doc.history.clone();
    }
    let (new_messages, input_items) = input_messages(r.input.clone())?;
    history.extend(new_messages);
    let mut messages = Vec::with_capacity(history.len() + 1);
    if let Some(i) = r.instructions.as_deref().filter(|i| !i.is_empty()) {
        messages.push(Message::system(i));
    }
    messages.extend(history.iter().cloned());
    if messages.is_empty() {
        return Err(GatewayError::invalid_at(
            "input",
            "a request needs an input",
        ));
    }
    let mut req = ChatRequest::new(messages);
    for (i, t) in r.tools.iter().enumerate() {
        match t {
            rw::Tool::Function(f) => {
                let params = f
                    .parameters
                    .clone()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                let mut spec = ToolSpec::new(f.name.clone(), "", params);
                spec.description.clone_from(&f.description);
                req.tools.push(spec);
            }
            other => {
                return Err(unsupported(
                    format!("tools[{i}].type"),
                    format!(
                        "the built-in tool `{}` cannot run on this gateway (it needs OpenAI's own servers); only `function` tools are supported",
                        other.type_name()
                    ),
                ));
            }
        }
    }
    req.tool_choice = match &r.tool_choice {
        None => None,
        Some(rw::ToolChoice::Mode(m)) => Some(match m {
            rw::ToolChoiceMode::Auto => ToolChoice::Auto,
            rw::ToolChoiceMode::None => ToolChoice::None,
            rw::ToolChoiceMode::Required => ToolChoice::Required,
            other => {
                return Err(unsupported(
                    "tool_choice",
                    format!("`{}` is not supported by this gateway", other.as_str()),
                ));
            }
        }),
        Some(rw::ToolChoice::Function(f)) => Some(ToolChoice::Tool {
            name: f.name.clone(),
        }),
        Some(other) => {
            return Err(unsupported(
                "tool_choice",
                format!("`{}` is not supported by this gateway", other.type_name()),
            ));
        }
    };
    if let Some(text) = &r.text {
        if let Some(v) = text.verbosity.as_deref().filter(|v| *v != "medium") {
            return Err(unsupported(
                "text.verbosity",
                format!("`{v}` cannot be honoured by every link of this gateway"),
            ));
        }
        req.response_format = match &text.format {
            None | Some(rw::TextFormat::Text) => ResponseFormat::Text,
            Some(rw::TextFormat::JsonObject) => ResponseFormat::Json,
            Some(rw::TextFormat::JsonSchema(j)) => ResponseFormat::JsonSchema {
                name: j.name.clone(),
                schema: j.schema.clone(),
                strict: j.strict.unwrap_or(false),
            },
            Some(other) => {
                return Err(unsupported(
                    "text.format.type",
                    format!("`{}` is not a format this gateway knows", other.type_name()),
                ));
            }
        };
    }
    if let Some(n) = r.max_output_tokens {
        req.max_tokens =
            Some(u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
                unsupported("max_output_tokens", "must be between 1 and 4294967295")
            })?);
    }
    req.temperature = number("temperature", r.temperature)?;
    req.top_p = number("top_p", r.top_p)?;
    // OpenAI's flag; Anthropic links map `false` to `disable_parallel_tool_use`.
    req.parallel_tool_calls = r.parallel_tool_calls;
    if let Some(effort) = r.reasoning.as_ref().and_then(|x| x.effort.as_deref()) {
        let e = ripcord_core::ReasoningEffort::parse(effort).ok_or_else(|| {
            unsupported(
                "reasoning.effort",
                format!("{effort:?} is not one of minimal, low, medium, high"),
            )
        })?;
        req.reasoning = Some(ripcord_core::Reasoning::effort(e));
    }
    req.user = r.user.clone().or_else(|| r.safety_identifier.clone());
    let store = r.store.unwrap_or(true).then(|| ToStore {
        store: Arc::clone(&call.state.responses),
        input_items,
        history,
    });
    let echo = rw::Response {
        instructions: r.instructions.clone().map(rw::Input::Text),
        max_output_tokens: r.max_output_tokens,
        parallel_tool_calls: r.parallel_tool_calls.unwrap_or(true),
        previous_response_id: r.previous_response_id.clone(),
        reasoning: r.reasoning.clone(),
        store: Some(r.store.unwrap_or(true)),
        temperature: r.temperature,
        text: Some(r.text.clone().unwrap_or_default()),
        tool_choice: r.tool_choice.clone().unwrap_or_default(),
        tools: r.tools.clone(),
        top_p: r.top_p,
        truncation: Some(
            r.truncation
                .clone()
                .unwrap_or_else(|| "disabled".to_owned()),
        ),
        user: r.user.clone(),
        metadata: Some(r.metadata.clone().unwrap_or_default()),
        service_tier: r.service_tier.clone(),
        max_tool_calls: r.max_tool_calls,
        prompt_cache_key: r.prompt_cache_key.clone(),
        safety_identifier: r.safety_identifier.clone(),
        ..rw::Response::default()
    };
    Ok((req, Opts { echo, store }))
}

fn number(field: &str, v: Option<f64>) -> Result<Option<f32>, GatewayError> {
    match v {
        None => Ok(None),
        Some(x) if x.is_finite() && x.abs() <= f64::from(f32::MAX) => Ok(Some(x as f32)),
        Some(x) => Err(unsupported(
            field,
            format!("{x} is not a valid number here"),
        )),
    }
}

/// Request fields whose meaning no chain link can honour: refused by name.
fn refuse_unservable(r: &rw::CreateResponse) -> Result<(), GatewayError> {
    if r.background == Some(true) {
        return Err(unsupported(
            "background",
            "background responses are not supported by this gateway; stream instead",
        ));
    }
    if r.conversation.is_some() {
        return Err(unsupported(
            "conversation",
            "the Conversations API is not served by this gateway; use previous_response_id",
        ));
    }
    if r.prompt.is_some() {
        return Err(unsupported(
            "prompt",
            "stored prompt templates live on OpenAI's servers; send `instructions` and `input`",
        ));
    }
    if r.top_logprobs.is_some_and(|n| n > 0) {
        return Err(unsupported(
            "top_logprobs",
            "log probabilities are not served by this gateway",
        ));
    }
    if let Some(tier) = r
        .service_tier
        .as_deref()
        .filter(|t| !matches!(*t, "auto" | "default"))
    {
        return Err(unsupported(
            "service_tier",
            format!("`{tier}` cannot be honoured by every link of this gateway"),
        ));
    }
    for (i, inc) in r.include.iter().enumerate() {
        if inc != "reasoning.encrypted_content" {
            return Err(unsupported(
                format!("include[{i}]"),
                format!("`{inc}` is not served by this gateway"),
            ));
        }
    }
    Ok(())
}

/// The request's input as ripcord messages, and its items as stored for `/input_items` (each
/// with an id).
fn input_messages(input: Option<rw::Input>) -> Result<(Vec<Message>, Vec<Value>), GatewayError> {
    let items = match input {
        None => Vec::new(),
        Some(rw::Input::Text(t)) => vec![rw::InputItem::Message(rw::InputMessage::text(
            rw::Role::User,
            t,
        ))],
        Some(rw::Input::Items(items)) => items,
    };
    let mut out: Vec<Message> = Vec::with_capacity(items.len());
    let mut stored = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let mut v = serde_json::to_value(&item).unwrap_or(Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.entry("id")
                .or_insert_with(|| json!(format!("item_{i}_{:016x}", rand::random::<u64>())));
        }
        stored.push(v);
        match item {
            rw::InputItem::Message(m) => {
                let role = match m.role {
                    rw::Role::User => Role::User,
                    rw::Role::Assistant => Role::Assistant,
                    rw::Role::System | rw::Role::Developer => Role::System,
                    other => {
                        return Err(unsupported(
                            format!("input[{i}].role"),
                            format!("the role {other:?} is not supported by this gateway"),
                        ));
                    }
                };
                let mut msg = Message::new(role, "");
                msg.content = match m.content {
                    rw::MessageContent::Text(t) => vec![ContentPart::Text { text: t }],
                    rw::MessageContent::Parts(parts) => parts_of(parts, &format!("input[{i}]"))?,
                };
                out.push(msg);
            }
            rw::InputItem::FunctionCall(fc) => {
                let call = ToolCall::new(fc.call_id, fc.name, fc.arguments);
                match out.last_mut() {
                    // Parallel calls arrive as consecutive items of one assistant turn.
                    Some(last) if last.role == Role::Assistant => last.tool_calls.push(call),
                    _ => out.push(Message::assistant_tool_calls(vec![call])),
                }
            }
            rw::InputItem::FunctionCallOutput(o) => {
                let mut msg = Message::tool_result(o.call_id, "");
                msg.content = match o.output {
                    rw::FunctionOutput::Text(t) => vec![ContentPart::Text { text: t }],
                    rw::FunctionOutput::Parts(parts) => {
                        parts_of(parts, &format!("input[{i}].output"))?
                    }
                };
                out.push(msg);
            }
            rw::InputItem::Reasoning(r) => {
                tracing::info!(
                    target: "ripcord::gateway",
                    item = i,
                    reasoning_id = %r.id,
                    "a reasoning input item was dropped: no link of the chain takes reasoning back"
                );
            }
            rw::InputItem::ItemReference(r) => {
                return Err(unsupported(
                    format!("input[{i}]"),
                    format!(
                        "the item reference `{}` cannot be resolved by this gateway; send the item itself or use previous_response_id",
                        r.id
                    ),
                ));
            }
            other => {
                return Err(unsupported(
                    format!("input[{i}].type"),
                    format!(
                        "the input item type `{}` is not supported by this gateway",
                        other.type_name()
                    ),
                ));
            }
        }
    }
    Ok((out, stored))
}

/// The content parts of one message (or tool output) at `at`.
fn parts_of(parts: Vec<rw::ContentPart>, at: &str) -> Result<Vec<ContentPart>, GatewayError> {
    let mut out = Vec::with_capacity(parts.len());
    for (j, p) in parts.into_iter().enumerate() {
        match p {
            rw::ContentPart::InputText(t) => out.push(ContentPart::Text { text: t.text }),
            rw::ContentPart::OutputText(t) => out.push(ContentPart::Text { text: t.text }),
            rw::ContentPart::Refusal(r) => out.push(ContentPart::Text { text: r.refusal }),
            rw::ContentPart::InputImage(img) => match img.image_url {
                Some(url) => out.push(image_part(&url, img.detail)),
                None => {
                    return Err(unsupported(
                        format!("{at}.content[{j}].file_id"),
                        "images by file id need OpenAI's file store; send `image_url` (a URL or a data URL)",
                    ));
                }
            },
            other => {
                return Err(unsupported(
                    format!("{at}.content[{j}].type"),
                    format!(
                        "the content part type `{}` is not supported by this gateway",
                        other.type_name()
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// Responses' usage from ripcord's.
fn usage(u: &Usage) -> rw::Usage {
    rw::Usage::new(u.input_tokens, u.cached_input_tokens, u.output_tokens)
}

/// The status and incomplete details of an answer that finished with `reason`.
fn status_of(reason: &FinishReason) -> (rw::ResponseStatus, Option<rw::IncompleteDetails>) {
    let incomplete = |why: &str| {
        (
            rw::ResponseStatus::Incomplete,
            Some(rw::IncompleteDetails {
                reason: Some(why.to_owned()),
            }),
        )
    };
    match reason {
        FinishReason::Length => incomplete("max_output_tokens"),
        FinishReason::ContentFilter => incomplete("content_filter"),
        _ => (rw::ResponseStatus::Completed, None),
    }
}

/// The id of a message item of answer `id`.
pub(super) fn message_id(answer: &str, n: usize) -> String {
    let base = answer.strip_prefix("resp_").unwrap_or(answer);
    format!("msg_{base}_{n}")
}

/// The id of a function-call item of answer `id`.
pub(super) fn call_item_id(answer: &str, n: usize) -> String {
    let base = answer.strip_prefix("resp_").unwrap_or(answer);
    format!("fc_{base}_{n}")
}

/// The id of a reasoning item of answer `id`.
pub(super) fn reasoning_item_id(answer: &str, n: usize) -> String {
    let base = answer.strip_prefix("resp_").unwrap_or(answer);
    format!("rs_{base}_{n}")
}

/// A `reasoning` output item carrying `text` as its one summary part (the door shows the
/// serving model's reasoning text, or a vendor's summary, there).
pub(super) fn reasoning_item(id: String, text: &str, done: bool) -> rw::OutputItem {
    rw::OutputItem::Reasoning(rw::ReasoningItem {
        id,
        summary: if done {
            vec![rw::SummaryPart::text(text)]
        } else {
            Vec::new()
        },
        status: Some(if done {
            rw::ItemStatus::Completed
        } else {
            rw::ItemStatus::InProgress
        }),
        ..rw::ReasoningItem::default()
    })
}

/// The whole Responses object of an answer. Reasoning comes first, one `reasoning` item of its
/// text; a signature or a redacted block has no place on this wire and stays behind.
pub(super) fn response_object(
    echo: rw::Response,
    answer: &Answer,
    resp: &ChatResponse,
) -> rw::Response {
    let mut output = Vec::with_capacity(2 + resp.tool_calls.len());
    let reasoning = ripcord_core::reasoning::reasoning_text(&resp.reasoning);
    if !reasoning.is_empty() {
        output.push(reasoning_item(
            reasoning_item_id(&answer.id, 0),
            &reasoning,
            true,
        ));
    }
    if !resp.content.is_empty() || resp.tool_calls.is_empty() {
        output.push(rw::OutputItem::Message(rw::OutputMessage::assistant(
            message_id(&answer.id, 0),
            rw::ItemStatus::Completed,
            vec![rw::OutputContent::text(resp.content.clone())],
        )));
    }
    for (i, c) in resp.tool_calls.iter().enumerate() {
        output.push(rw::OutputItem::FunctionCall(rw::FunctionCall {
            call_id: c.id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
            id: Some(call_item_id(&answer.id, i)),
            status: Some(rw::ItemStatus::Completed),
        }));
    }
    let (status, incomplete_details) = status_of(&resp.finish_reason);
    rw::Response {
        id: answer.id.clone(),
        created_at: answer.created,
        completed_at: Some(answer.created),
        status: Some(status),
        incomplete_details,
        model: answer.model.clone(),
        output_text: Some(resp.content.clone()),
        output,
        usage: Some(usage(&resp.usage)),
        ..echo
    }
}

/// `GET /v1/responses/{id}`: a stored response, for its tenant only.
pub(super) async fn get_response(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
    Path(id): Path<String>,
) -> Response {
    match stored(&state, &authed, &id).await {
        Ok(doc) => axum::Json(doc.response.clone()).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `DELETE /v1/responses/{id}`.
pub(super) async fn delete_response(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
    Path(id): Path<String>,
) -> Response {
    let owner = state.owner(&authed);
    if state.responses.delete(&id, &owner).await {
        axum::Json(json!({"id": id, "object": "response.deleted", "deleted": true})).into_response()
    } else {
        not_found(&id).into_response()
    }
}

/// `GET /v1/responses/{id}/input_items`: the request's input items, newest first by default
/// (`order=asc` for oldest first), as OpenAI's list object.
pub(super) async fn input_items(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
    Path(id): Path<String>,
    axum::extract::Query(q): axum::extract::Query<BTreeMap<String, String>>,
) -> Response {
    let doc = match stored(&state, &authed, &id).await {
        Ok(d) => d,
        Err(e) => return e.into_response(),
    };
    let mut items = doc.input_items.clone();
    match q.get("order").map(String::as_str) {
        None | Some("desc") => items.reverse(),
        Some("asc") => {}
        Some(other) => {
            return unsupported("order", format!("`{other}` is not `asc` or `desc`"))
                .into_response();
        }
    }
    let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
        None => 20,
        Some(Ok(n)) if (1..=100).contains(&n) => n,
        Some(_) => {
            return unsupported("limit", "must be a number from 1 to 100").into_response();
        }
    };
    if let Some(after) = q.get("after") {
        match items.iter().position(|i| i["id"] == after.as_str()) {
            Some(p) => {
                items.drain(..=p);
            }
            None => {
                return unsupported("after", format!("no input item `{after}` in this response"))
                    .into_response();
            }
        }
    }
    let has_more = items.len() > limit;
    items.truncate(limit);
    let first = items
        .first()
        .map(|i| i["id"].clone())
        .unwrap_or(Value::Null);
    let last = items.last().map(|i| i["id"].clone()).unwrap_or(Value::Null);
    axum::Json(json!({"object": "list", "data": items, "first_id": first, "last_id": last, "has_more": has_more}))
        .into_response()
}

fn not_found(id: &str) -> GatewayError {
    GatewayError::new(
        404,
        "not_found",
        format!("Response with id '{id}' not found."),
    )
}

async fn stored(
    state: &GatewayState,
    authed: &Authed,
    id: &str,
) -> Result<Arc<StoredResponse>, GatewayError> {
    let owner = state.owner(authed);
    state
        .responses
        .get(id, &owner)
        .await
        .ok_or_else(|| not_found(id))
}
