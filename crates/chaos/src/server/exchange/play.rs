//! Playing a picked behaviour on the connection: the head, the body or the pre-framed SSE
//! events, and the faults (a cut, a stall, malformed JSON), identical across wires.

use std::time::Duration;

use super::{After, Job, Shared, hold, request_id_header, sent};
use crate::http::{
    Conn, Frames, Framing, LAST_CHUNK, broken_json, write_chunk, write_head, write_sse,
};
use crate::reply::Reply;
use crate::vendor_error::VendorError;
use crate::{Wire, anthropic, bedrock, gemini, openai, openai_responses};

pub(super) async fn send_json(
    conn: &mut Conn,
    out: &mut Vec<u8>,
    wire: Wire,
    status: u16,
    request_id: &str,
    body: &[u8],
    close: bool,
) -> After {
    let id_header = request_id_header(wire, request_id);
    let error_type;
    let mut headers = vec![id_header];
    if wire == Wire::Bedrock && status >= 400 {
        error_type = bedrock::error_type_header(bedrock::refusal_type(status));
        headers.push(("x-amzn-errortype", &error_type));
    }
    write_head(
        out,
        status,
        Some("application/json"),
        &headers,
        Framing::Length(body.len()),
        close,
    );
    out.extend_from_slice(body);
    sent(conn.send(out).await)
}

/// When the parts of a successful answer go out.
#[derive(Clone, Copy)]
pub(super) enum Pace {
    /// All at once.
    Now,
    /// Streams: headers at once, the first event after `first`, later chunks `between` apart.
    /// JSON: the whole response after `first` (`before_head`) or the head at once and the body
    /// after `first`.
    Delays {
        first: Duration,
        between: Duration,
        before_head: bool,
    },
}

/// The full JSON body of a successful answer.
fn json_body(job: &Job, reply: &Reply) -> Vec<u8> {
    if let Some(prepared) = &job.prepared {
        return prepared.clone();
    }
    match job.wire {
        Wire::OpenAi if job.responses => openai_responses::response(job.ctx(), reply),
        Wire::OpenAi => openai::completion(job.ctx(), reply),
        Wire::Anthropic => anthropic::message(job.ctx(), reply),
        Wire::Bedrock => bedrock::converse(reply),
        Wire::Gemini => gemini::response(job.ctx(), reply),
    }
}

pub(super) fn frames(job: &Job, reply: &Reply, broken: bool) -> Frames {
    match job.wire {
        Wire::OpenAi if job.responses => openai_responses::stream_frames(job.ctx(), reply, broken),
        Wire::OpenAi => openai::stream_frames(job.ctx(), reply, job.include_usage, broken),
        Wire::Anthropic => anthropic::stream_frames(job.ctx(), reply, broken),
        Wire::Bedrock => bedrock::stream_frames(job.ctx(), reply, broken),
        Wire::Gemini => gemini::stream_frames(job.ctx(), reply, broken),
    }
}

fn head_json(out: &mut Vec<u8>, job: &Job, len: usize) {
    write_head(
        out,
        200,
        Some("application/json"),
        &[job.request_id_header()],
        Framing::Length(len),
        job.close,
    );
}

pub(super) fn head_sse(out: &mut Vec<u8>, job: &Job) {
    let content_type = match job.wire {
        Wire::Bedrock => bedrock::EVENT_STREAM,
        _ => "text/event-stream; charset=utf-8",
    };
    write_head(
        out,
        200,
        Some(content_type),
        &[job.request_id_header(), ("cache-control", "no-cache")],
        Framing::Chunked,
        job.close,
    );
}

pub(super) async fn success(
    conn: &mut Conn,
    out: &mut Vec<u8>,
    job: &Job,
    reply: &Reply,
    pace: Pace,
) -> After {
    if !job.stream {
        let body = json_body(job, reply);
        match pace {
            Pace::Now => {}
            Pace::Delays {
                first,
                before_head: true,
                ..
            } => tokio::time::sleep(first).await,
            Pace::Delays { first, .. } => {
                head_json(out, job, body.len());
                if !conn.send(out).await {
                    return After::Close;
                }
                out.clear();
                tokio::time::sleep(first).await;
                return sent(conn.send(&body).await);
            }
        }
        head_json(out, job, body.len());
        out.extend_from_slice(&body);
        return sent(conn.send(out).await);
    }

    let f = frames(job, reply, false);
    head_sse(out, job);
    let Pace::Delays { first, between, .. } = pace else {
        out.extend_from_slice(f.bytes(0..f.len()));
        out.extend_from_slice(LAST_CHUNK);
        return sent(conn.send(out).await);
    };
    if !conn.send(out).await {
        return After::Close;
    }
    tokio::time::sleep(first).await;
    // Send up to and including each content frame; sleep `between` before each later one.
    let mut start = 0;
    for (k, &content) in f.content().iter().enumerate() {
        if k > 0 && !between.is_zero() {
            tokio::time::sleep(between).await;
        }
        if !conn.send(f.bytes(start..content + 1)).await {
            return After::Close;
        }
        start = content + 1;
    }
    out.clear();
    out.extend_from_slice(f.bytes(start..f.len()));
    out.extend_from_slice(LAST_CHUNK);
    sent(conn.send(out).await)
}

/// How a cut-short answer ends.
pub(super) enum End<'a> {
    Stall,
    Reset,
    /// A clean end without the tail.
    Clean,
    /// The vendor's in-band error, then a clean end.
    Error(&'a VendorError),
    /// The Responses wire's `response.failed`, then a clean end.
    Failed(&'a VendorError),
}

pub(super) async fn cut(
    shared: &Shared,
    conn: &mut Conn,
    out: &mut Vec<u8>,
    job: &Job,
    reply: &Reply,
    after: usize,
    end: End<'_>,
) -> After {
    if !job.stream {
        let body = match end {
            // Bedrock has no error object in a 200 body: the error is the HTTP answer.
            End::Error(error) if job.wire == Wire::Bedrock => {
                let r = error.response(job.wire, &job.model, &job.request_id);
                let mut headers: Vec<(&str, &str)> =
                    r.headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
                headers.push(job.request_id_header());
                let framing = Framing::Length(r.body.len());
                write_head(out, r.status, r.content_type, &headers, framing, job.close);
                out.extend_from_slice(r.body.as_bytes());
                return sent(conn.send(out).await);
            }
            End::Failed(error) => {
                let body = openai_responses::failed_response(job.ctx(), error);
                head_json(out, job, body.len());
                out.extend_from_slice(&body);
                return sent(conn.send(out).await);
            }
            End::Error(error) => {
                let body = error.json_body(job.wire, &job.model, &job.request_id);
                head_json(out, job, body.len());
                out.extend_from_slice(body.as_bytes());
                return sent(conn.send(out).await);
            }
            _ => json_body(job, reply),
        };
        // Announce the whole body, send half of it.
        head_json(out, job, body.len());
        out.extend_from_slice(&body[..body.len() / 2]);
        if !conn.send(out).await {
            return After::Close;
        }
        return match end {
            End::Stall => {
                hold(shared, conn).await;
                After::Close
            }
            End::Reset => After::Reset,
            End::Clean | End::Error(_) | End::Failed(_) => After::Close,
        };
    }

    let f = frames(job, reply, false);
    let upto = match end {
        End::Error(_) if after == 0 => 0,
        _ => f.cut_after(after),
    };
    head_sse(out, job);
    out.extend_from_slice(f.bytes(0..upto));
    // The last frame after the cut (none for a clean end), then the stream's end.
    let last = match end {
        End::Stall => {
            if !conn.send(out).await {
                return After::Close;
            }
            hold(shared, conn).await;
            return After::Close;
        }
        End::Reset => {
            if !conn.send(out).await {
                return After::Close;
            }
            return After::Reset;
        }
        End::Clean => Vec::new(),
        End::Error(error) if job.wire == Wire::Bedrock => bedrock::exception(
            &bedrock::exception_type(error),
            bedrock::error_parts(error).1,
        ),
        End::Error(error) if job.responses => sse_frame(
            Some("error"),
            &openai_responses::error_event(error, &job.model, upto),
        ),
        End::Failed(error) => sse_frame(
            Some("response.failed"),
            &openai_responses::failed_event(job.ctx(), error, upto),
        ),
        End::Error(error) => {
            let json = error.json_body(job.wire, &job.model, &job.request_id);
            let event = match job.wire {
                Wire::OpenAi => openai::INBAND_ERROR_EVENT,
                Wire::Anthropic => anthropic::INBAND_ERROR_EVENT,
                Wire::Bedrock => None,
                // Google's in-band error is a plain `data:` chunk holding the error object.
                Wire::Gemini => None,
            };
            sse_frame(event, json.as_bytes())
        }
    };
    write_chunk(out, &last);
    out.extend_from_slice(LAST_CHUNK);
    sent(conn.send(out).await)
}

/// One server-sent event of `data`, named `event` if given.
fn sse_frame(event: Option<&str>, data: &[u8]) -> Vec<u8> {
    let mut sse = Vec::with_capacity(data.len() + 32);
    write_sse(&mut sse, event, data);
    sse
}

pub(super) async fn malformed(
    conn: &mut Conn,
    out: &mut Vec<u8>,
    job: &Job,
    reply: &Reply,
) -> After {
    if job.stream {
        let f = frames(job, reply, true);
        head_sse(out, job);
        out.extend_from_slice(f.bytes(0..f.len()));
        out.extend_from_slice(LAST_CHUNK);
    } else {
        let body = json_body(job, reply);
        let broken = broken_json(&body);
        head_json(out, job, broken.len());
        out.extend_from_slice(broken);
    }
    sent(conn.send(out).await)
}
