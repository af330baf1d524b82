//! One exchange on a model endpoint: validate the request like the vendor would, pick the
//! behaviour from the script, and play it on the connection.
//!
//! Every behaviour is expressed with the same few moves — write the head, write a run of
//! pre-framed SSE events, sleep, stall until the client leaves, reset — so the faults are
//! identical across wires and only the event bodies differ.

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use super::{After, Route, Shared, lock};
use crate::google_token::TokenCheck;
use crate::http::{Conn, Framing, Incoming, LAST_CHUNK, write_chunk, write_head, write_sse};
use crate::openai::Ctx;
use crate::script::{Behavior, RawEnd};
use crate::{Wire, anthropic, bedrock, gemini, openai, openai_responses};

mod play;

use play::{End, Pace, cut, frames, head_sse, malformed, send_json, success};

struct Job {
    wire: Wire,
    /// The OpenAI Responses wire (`…/responses`) rather than the wire's chat route.
    responses: bool,
    stream: bool,
    include_usage: bool,
    model: String,
    response_id: String,
    request_id: String,
    created: u64,
    close: bool,
    /// The embeddings body, computed while validating.
    prepared: Option<Vec<u8>>,
    /// The text of the request's last assistant message, read only when the server's reply
    /// continues its own start ([`Reply::continues`]).
    delivered: Option<String>,
}

impl Job {
    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            id: &self.response_id,
            model: &self.model,
            created: self.created,
        }
    }

    fn request_id_header(&self) -> (&'static str, &str) {
        request_id_header(self.wire, &self.request_id)
    }
}

fn request_id_header(wire: Wire, request_id: &str) -> (&'static str, &str) {
    match wire {
        Wire::OpenAi | Wire::Gemini => ("x-request-id", request_id),
        Wire::Anthropic => ("request-id", request_id),
        Wire::Bedrock => ("x-amzn-requestid", request_id),
    }
}

fn default_model(wire: Wire, embeddings: bool) -> &'static str {
    match (wire, embeddings) {
        (Wire::OpenAi, false) => "gpt-4o-mini",
        (Wire::OpenAi, true) => "text-embedding-3-small",
        (Wire::Anthropic, _) => "claude-sonnet-4-5",
        (Wire::Bedrock, _) => "anthropic.claude-3-haiku-20240307-v1:0",
        (Wire::Gemini, false) => "gemini-2.5-flash",
        (Wire::Gemini, true) => "gemini-embedding-001",
    }
}

/// Holds the answer until the client leaves, and counts that it left.
async fn hold(shared: &Shared, conn: &mut Conn) {
    conn.wait_until_client_gone().await;
    shared.abandoned.fetch_add(1, Ordering::SeqCst);
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(super) async fn respond(
    shared: &Shared,
    conn: &mut Conn,
    out: &mut Vec<u8>,
    req: &Incoming,
    route: Route,
) -> After {
    let wire = shared.wire;
    let n = shared.responses.fetch_add(1, Ordering::Relaxed) + 1;
    let request_id = format!("req_ripcord{n:08}");
    let close = !req.keep_alive;
    let (embeddings, azure) = match route {
        Route::Chat { azure } => (false, azure),
        Route::Responses => (false, false),
        Route::Embeddings { azure } => (true, azure),
        Route::Models => {
            let model = shared
                .reply
                .model
                .as_deref()
                .unwrap_or(default_model(wire, false));
            let body = match wire {
                Wire::OpenAi => openai::models(model, unix_now()),
                Wire::Anthropic => anthropic::models(model),
                Wire::Bedrock => Vec::new(),
                Wire::Gemini => gemini::models(model),
            };
            return send_json(conn, out, wire, 200, &request_id, &body, close).await;
        }
        Route::MethodNotAllowed | Route::NotFound => {
            let (status, what) = if route == Route::NotFound {
                (404, "Not Found")
            } else {
                (405, "Method Not Allowed")
            };
            let body = match wire {
                Wire::OpenAi => crate::vendor_error::openai_error(
                    &format!("Invalid URL ({} {})", req.method, req.path),
                    Some("invalid_request_error"),
                    None,
                    None,
                ),
                Wire::Anthropic => {
                    let kind = if status == 404 {
                        "not_found_error"
                    } else {
                        "invalid_request_error"
                    };
                    crate::vendor_error::anthropic_error(kind, what, &request_id)
                }
                Wire::Bedrock => bedrock::error_body(what),
                Wire::Gemini if status == 404 => gemini::google_error(
                    404,
                    "NOT_FOUND",
                    &format!(
                        "The requested URL {} was not found on this server.",
                        req.path
                    ),
                ),
                Wire::Gemini => gemini::google_error(
                    405,
                    "INVALID_ARGUMENT",
                    &format!("Method {} is not allowed on {}.", req.method, req.path),
                ),
            };
            return send_json(conn, out, wire, status, &request_id, body.as_bytes(), close).await;
        }
    };

    // Bedrock authenticates before anything else; a refusal never reaches the script.
    if wire == Wire::Bedrock
        && let Err(d) = bedrock::authenticate(req)
    {
        let header = bedrock::error_type_header(d.error_type);
        let body = bedrock::error_body(&d.message);
        write_head(
            out,
            d.status,
            Some("application/json"),
            &[
                ("x-amzn-requestid", &request_id),
                ("x-amzn-errortype", &header),
            ],
            Framing::Length(body.len()),
            close,
        );
        out.extend_from_slice(body.as_bytes());
        return sent(conn.send(out).await);
    }

    // Vertex AI checks the access token before anything else.
    let tokens = lock(&shared.tokens).clone();
    if let Some(registry) = tokens {
        let authorization = req
            .headers
            .iter()
            .find(|(n, _)| n == "authorization")
            .map(|(_, v)| v.as_str());
        let body = match registry.check(authorization) {
            TokenCheck::Valid => None,
            TokenCheck::Expired => Some(gemini::token_expired(&req.path)),
            TokenCheck::Unknown => Some(gemini::unauthenticated()),
        };
        if let Some(body) = body {
            return send_json(conn, out, wire, 401, &request_id, body.as_bytes(), close).await;
        }
    }

    // Validate like the vendor would; a bad request never reaches the script.
    let responses = route == Route::Responses;
    let job = match prepare(
        shared, req, embeddings, azure, responses, n, request_id, close,
    ) {
        Ok(job) => job,
        Err((request_id, body)) => {
            return send_json(conn, out, wire, 400, &request_id, body.as_bytes(), close).await;
        }
    };

    let behavior = {
        let mut slot = lock(&shared.script);
        let elapsed = Instant::now().saturating_duration_since(slot.since);
        slot.plan.pick(elapsed)
    };
    // A continuation of the fake's own answer gets the rest of it.
    let rest = job.delivered.as_deref().and_then(|d| shared.reply.after(d));
    let reply = rest.as_ref().unwrap_or(&shared.reply);
    let Some(behavior) = behavior else {
        return success(conn, out, &job, reply, Pace::Now).await;
    };
    match &*behavior {
        Behavior::Ok => success(conn, out, &job, reply, Pace::Now).await,
        Behavior::Reply(custom) => success(conn, out, &job, custom, Pace::Now).await,
        Behavior::Stream {
            first_token,
            between,
        } => {
            let pace = Pace::Delays {
                first: *first_token,
                between: *between,
                before_head: true,
            };
            success(conn, out, &job, reply, pace).await
        }
        Behavior::SlowFirstToken(delay) => {
            let pace = Pace::Delays {
                first: *delay,
                between: Duration::ZERO,
                before_head: false,
            };
            success(conn, out, &job, reply, pace).await
        }
        Behavior::Status {
            status,
            body,
            headers,
        } => {
            let mut all: Vec<(&str, &str)> = headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            all.push(job.request_id_header());
            write_head(out, *status, None, &all, Framing::Length(body.len()), close);
            out.extend_from_slice(body.as_bytes());
            sent(conn.send(out).await)
        }
        Behavior::HangBeforeHeaders => {
            hold(shared, conn).await;
            After::Close
        }
        Behavior::StallMidStream { after_chunks } => {
            cut(shared, conn, out, &job, reply, *after_chunks, End::Stall).await
        }
        Behavior::ResetBeforeResponse => After::Reset,
        Behavior::ResetMidStream { after_chunks } => {
            cut(shared, conn, out, &job, reply, *after_chunks, End::Reset).await
        }
        Behavior::MalformedJson => malformed(conn, out, &job, reply).await,
        Behavior::StopWithoutDone | Behavior::MalformedEvents { .. } if !job.stream => {
            success(conn, out, &job, reply, Pace::Now).await
        }
        Behavior::StopWithoutDone => {
            let f = frames(&job, reply, false);
            head_sse(out, &job);
            // Everything but the terminator, the last frame (Gemini has no terminator: the
            // finish chunk is the end, and the whole stream goes out).
            let end = match job.wire {
                Wire::Gemini => f.len(),
                _ => f.len().saturating_sub(1),
            };
            out.extend_from_slice(f.bytes(0..end));
            out.extend_from_slice(LAST_CHUNK);
            sent(conn.send(out).await)
        }
        Behavior::MalformedEvents { count } => {
            let f = frames(&job, reply, false);
            let at = f.cut_after(1);
            head_sse(out, &job);
            out.extend_from_slice(f.bytes(0..at));
            let (event, data): (Option<&str>, &[u8]) = match job.wire {
                Wire::OpenAi if job.responses => (
                    Some("response.output_text.delta"),
                    openai_responses::BROKEN_EVENT,
                ),
                Wire::OpenAi => (None, b"{\"choices\":[{\"delta\":{\"content\":"),
                Wire::Anthropic => (
                    Some("content_block_delta"),
                    b"{\"type\":\"content_block_delta\",\"index\":",
                ),
                Wire::Bedrock => (Some("contentBlockDelta"), b"{\"contentBlockIndex\":"),
                Wire::Gemini => (None, b"{\"candidates\":[{\"content\":"),
            };
            for _ in 0..*count {
                if job.wire == Wire::Bedrock {
                    write_chunk(out, &bedrock::event("contentBlockDelta", data));
                    continue;
                }
                let mut sse = Vec::with_capacity(data.len() + 32);
                write_sse(&mut sse, event, data);
                write_chunk(out, &sse);
            }
            out.extend_from_slice(f.bytes(at..f.len()));
            out.extend_from_slice(LAST_CHUNK);
            sent(conn.send(out).await)
        }
        Behavior::TruncatedStream { after_chunks } => {
            cut(shared, conn, out, &job, reply, *after_chunks, End::Clean).await
        }
        Behavior::InBandError {
            after_chunks,
            error,
        } => {
            cut(
                shared,
                conn,
                out,
                &job,
                reply,
                *after_chunks,
                End::Error(error),
            )
            .await
        }
        Behavior::ResponseFailed {
            after_chunks,
            error,
        } => {
            let end = if job.responses {
                End::Failed(error)
            } else {
                End::Error(error)
            };
            cut(shared, conn, out, &job, reply, *after_chunks, end).await
        }
        Behavior::Raw(raw) => {
            let mut all: Vec<(&str, &str)> = raw
                .headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            all.push(job.request_id_header());
            let (framing, close) = match raw.end {
                RawEnd::Length => (Framing::Length(raw.body.len()), close),
                RawEnd::ShortOfLength => (Framing::Length(raw.body.len() + 64), true),
                RawEnd::Chunked => (Framing::Chunked, close),
                RawEnd::ChunkedCut => (Framing::Chunked, true),
            };
            write_head(out, raw.status, None, &all, framing, close);
            match raw.end {
                RawEnd::Length | RawEnd::ShortOfLength => out.extend_from_slice(&raw.body),
                RawEnd::Chunked => {
                    write_chunk(out, &raw.body);
                    out.extend_from_slice(LAST_CHUNK);
                }
                RawEnd::ChunkedCut => write_chunk(out, &raw.body),
            }
            match (conn.send(out).await, raw.end) {
                (false, _) => After::Close,
                (true, RawEnd::ShortOfLength | RawEnd::ChunkedCut) => After::Close,
                (true, _) => After::Continue,
            }
        }
        Behavior::Error(error) => {
            let r = error.response(wire, &job.model, &job.request_id);
            let mut headers: Vec<(&str, &str)> =
                r.headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            headers.push(job.request_id_header());
            write_head(
                out,
                r.status,
                r.content_type,
                &headers,
                Framing::Length(r.body.len()),
                close,
            );
            out.extend_from_slice(r.body.as_bytes());
            sent(conn.send(out).await)
        }
    }
}

fn sent(ok: bool) -> After {
    if ok { After::Continue } else { After::Close }
}

/// Parses and validates a model request. On failure: the request id and a 400 body.
#[expect(
    clippy::too_many_arguments,
    reason = "one exchange's parts, each used once; a struct would only rename them"
)]
fn prepare(
    shared: &Shared,
    req: &Incoming,
    embeddings: bool,
    azure: bool,
    responses: bool,
    n: u64,
    request_id: String,
    close: bool,
) -> Result<Job, (String, String)> {
    let wire = shared.wire;
    let mut job = Job {
        wire,
        responses,
        stream: false,
        include_usage: false,
        model: String::new(),
        response_id: match wire {
            Wire::OpenAi if responses => format!("resp_ripcord{n:08}"),
            Wire::OpenAi => format!("chatcmpl-ripcord{n:08}"),
            Wire::Anthropic => format!("msg_ripcord{n:08}"),
            Wire::Bedrock => format!("bedrock{n:08}"),
            Wire::Gemini => format!("ripcord-resp-{n:08}"),
        },
        request_id,
        created: unix_now(),
        close,
        prepared: None,
        delivered: None,
    };
    let fail = |job: Job, body: String| Err((job.request_id, body));
    let requested_model: Option<String>;
    match wire {
        Wire::OpenAi if embeddings => {
            let body: serde_json::Value = match serde_json::from_slice(&req.body) {
                Ok(v) => v,
                Err(_) => return fail(job, openai::invalid_json_error()),
            };
            requested_model = body
                .get("model")
                .and_then(|m| m.as_str())
                .map(str::to_owned);
            if requested_model.is_none() && !azure {
                return fail(job, openai::missing_param_error("model"));
            }
            let model = requested_model
                .as_deref()
                .unwrap_or(default_model(wire, true));
            match openai::embeddings(&body, model, shared.embedding_dimensions) {
                Ok(bytes) => job.prepared = Some(bytes),
                Err(message) => return fail(job, message),
            }
        }
        Wire::OpenAi if responses => {
            let probe: openai_responses::ResponsesProbe<'_> =
                match serde_json::from_slice(&req.body) {
                    Ok(p) => p,
                    Err(_) => return fail(job, openai::invalid_json_error()),
                };
            if probe.model.is_none() {
                return fail(job, openai::missing_param_error("model"));
            }
            if probe.input.is_none() {
                return fail(job, openai::missing_param_error("input"));
            }
            job.stream = probe.stream.unwrap_or(false);
            requested_model = probe.model.map(|m| m.into_owned());
        }
        Wire::OpenAi => {
            let probe: openai::ChatProbe<'_> = match serde_json::from_slice(&req.body) {
                Ok(p) => p,
                Err(_) => return fail(job, openai::invalid_json_error()),
            };
            if probe.model.is_none() && !azure {
                return fail(job, openai::missing_param_error("model"));
            }
            if probe.messages.is_none() {
                return fail(job, openai::missing_param_error("messages"));
            }
            job.stream = probe.stream.unwrap_or(false);
            job.include_usage = probe
                .stream_options
                .and_then(|o| o.include_usage)
                .unwrap_or(false);
            requested_model = probe.model.map(|m| m.into_owned());
        }
        Wire::Anthropic => {
            let probe: anthropic::MessagesProbe<'_> = match serde_json::from_slice(&req.body) {
                Ok(p) => p,
                Err(e) => {
                    let body = anthropic::invalid_json_error(&job.request_id, &e.to_string());
                    return fail(job, body);
                }
            };
            // Claude on Vertex: the model is in the URL, the version in the body.
            let url_model = azure
                .then(|| gemini::model_and_method(&req.path).map(|(m, _)| m.to_owned()))
                .flatten();
            for (field, present) in [
                ("model", probe.model.is_some() || azure),
                (
                    "anthropic_version",
                    probe.anthropic_version.is_some() || !azure,
                ),
                ("max_tokens", probe.max_tokens.is_some()),
                ("messages", probe.messages.is_some()),
            ] {
                if !present {
                    let body = anthropic::missing_field_error(&job.request_id, field);
                    return fail(job, body);
                }
            }
            if let Some(body) = anthropic::thinking_error(&job.request_id, &req.body) {
                return fail(job, body);
            }
            job.stream = probe.stream.unwrap_or(false);
            requested_model = url_model.or_else(|| probe.model.map(|m| m.into_owned()));
        }
        Wire::Gemini => {
            let (model, method) = gemini::model_and_method(&req.path).unwrap_or(("", ""));
            requested_model = Some(model.to_owned());
            let body: serde_json::Value = match serde_json::from_slice(&req.body) {
                Ok(v) => v,
                Err(_) => {
                    let body = gemini::google_error(
                        400,
                        "INVALID_ARGUMENT",
                        "Invalid JSON payload received. Unexpected token.",
                    );
                    return fail(job, body);
                }
            };
            if embeddings {
                let batch = method == "batchEmbedContents";
                let answer = if method == "predict" {
                    gemini::predictions(&body, shared.embedding_dimensions)
                } else {
                    gemini::embeddings(&body, batch, shared.embedding_dimensions)
                };
                match answer {
                    Ok(bytes) => job.prepared = Some(bytes),
                    Err(message) => return fail(job, message),
                }
            } else {
                let has_contents = body
                    .get("contents")
                    .and_then(|c| c.as_array())
                    .is_some_and(|c| !c.is_empty());
                if !has_contents {
                    let body = gemini::google_error(
                        400,
                        "INVALID_ARGUMENT",
                        "* GenerateContentRequest.contents: contents is not specified",
                    );
                    return fail(job, body);
                }
                job.stream = method == "streamGenerateContent";
            }
        }
        Wire::Bedrock => {
            let probe: bedrock::ConverseProbe = match serde_json::from_slice(&req.body) {
                Ok(p) => p,
                Err(_) => return fail(job, bedrock::invalid_json_error()),
            };
            if probe.messages.is_none() {
                return fail(job, bedrock::missing_messages_error());
            }
            let path = req
                .path
                .split_once('?')
                .map_or(req.path.as_str(), |(p, _)| p);
            job.stream = path.ends_with("/converse-stream");
            requested_model = bedrock::model_of(path);
        }
    }
    if shared.reply.continues && !embeddings {
        job.delivered = last_assistant_text(&req.body);
    }
    job.model = match (&shared.reply.model, requested_model) {
        (Some(fixed), _) if !embeddings => fixed.clone(),
        (_, Some(asked)) => asked,
        (_, None) => default_model(wire, embeddings).to_owned(),
    };
    Ok(job)
}

/// The text of the last assistant turn of a chat body on any wire: `messages` (OpenAI,
/// Anthropic, Bedrock) or `contents` (Gemini, role `model`), whose content is a string or a list
/// of parts with `text`. `None` when there is none or the body is not JSON.
fn last_assistant_text(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let turns = v
        .get("messages")
        .or_else(|| v.get("contents"))?
        .as_array()?;
    let turn = turns.iter().rev().find(|m| {
        matches!(
            m.get("role").and_then(|r| r.as_str()),
            Some("assistant" | "model")
        )
    })?;
    let content = turn.get("content").or_else(|| turn.get("parts"))?;
    match content {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
                .collect(),
        ),
        _ => None,
    }
}
