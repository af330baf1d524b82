//! `ripcord chat`: one question through the chain, streamed to stdout with a provenance line on
//! stderr, or as one JSON object with `--json`.

use std::io::Write;

use futures::StreamExt;
use ripcord_core::stream::Collector;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, Context, Error, Message, Provenance, StreamEvent, Usage,
};
use serde_json::{Value, json};

/// What to ask.
#[derive(Debug, Clone, Default)]
pub struct ChatArgs {
    /// The user's prompt.
    pub prompt: String,
    /// An optional system prompt.
    pub system: Option<String>,
    /// Stream tokens as they arrive.
    pub stream: bool,
    /// Print one JSON object instead of text.
    pub json: bool,
    /// `max_tokens`.
    pub max_tokens: Option<u32>,
    /// Temperature.
    pub temperature: Option<f32>,
}

impl ChatArgs {
    /// The request these arguments describe.
    pub fn request(&self) -> ChatRequest {
        let mut messages = Vec::with_capacity(2);
        if let Some(s) = &self.system {
            messages.push(Message::system(s.clone()));
        }
        messages.push(Message::user(self.prompt.clone()));
        let mut req = ChatRequest::new(messages);
        req.max_tokens = self.max_tokens;
        req.temperature = self.temperature;
        req
    }
}

/// How one `ripcord chat` call ended, with its provenance.
///
/// The `--json` object and the stderr line are both rendered from [`ChatOutcome::provenance`],
/// so they cannot tell different stories about the same call.
#[derive(Debug)]
pub struct ChatOutcome {
    /// The answer, or the error that ended the call.
    pub result: Result<ChatResponse, Error>,
    /// The text delivered before a streamed call failed (empty otherwise).
    pub partial: String,
    /// The last provenance a stream announced before it failed, if any.
    announced: Option<Provenance>,
}

impl ChatOutcome {
    /// An outcome without a stream's partial text or announced provenance.
    pub fn new(result: Result<ChatResponse, Error>) -> Self {
        ChatOutcome {
            result,
            partial: String::new(),
            announced: None,
        }
    }

    /// The record of the call: the answer's provenance, or for a failure every attempt the
    /// error carries (the stream's announced provenance fills in what the error does not
    /// say, such as skipped links). A failed call is always degraded: no full answer came.
    pub fn provenance(&self) -> Provenance {
        match &self.result {
            Ok(r) => r.provenance.clone(),
            Err(e) => {
                let mut p = self.announced.clone().unwrap_or_default();
                if !e.attempts().is_empty() || p.attempts.is_empty() {
                    p.attempts = e.attempts().to_vec();
                }
                if p.skipped.is_empty() {
                    p.skipped = e.skipped().to_vec();
                }
                p.served_by = None;
                p.static_reply = false;
                p.degraded = true;
                p.notice = None;
                p
            }
        }
    }
}

/// The `--json` object for a finished call.
pub fn json_result(outcome: &ChatOutcome) -> Value {
    let p = outcome.provenance();
    match &outcome.result {
        Ok(r) => json!({
            "content": r.content,
            "served_by": if p.static_reply { Some("static") } else { p.served_by.as_deref() },
            "degraded": p.degraded,
            "static_reply": p.static_reply,
            "notice": p.notice,
            "model": r.model,
            "finish_reason": r.finish_reason.as_str(),
            "usage": usage_json(&r.usage),
            "attempts": attempts_json(&p),
            "skipped": p.skipped,
            "error": null,
        }),
        Err(e) => json!({
            "content": outcome.partial,
            "served_by": null,
            "degraded": p.degraded,
            "static_reply": false,
            "usage": usage_json(&Usage::default()),
            "attempts": attempts_json(&p),
            "skipped": p.skipped,
            "error": {
                "kind": e.kind().as_str(),
                "status": e.status().map(|s| s.as_u16()),
                "message": e.to_string(),
            },
        }),
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cached_input_tokens": u.cached_input_tokens,
        "cost_usd": u.cost_usd,
    })
}

fn attempts_json(p: &Provenance) -> Value {
    Value::Array(
        p.attempts
            .iter()
            .map(|a| {
                json!({
                    "provider": a.provider,
                    "model": a.model,
                    "error_kind": a.error_kind.map(|k| k.as_str()),
                    "status": a.status,
                    "latency_ms": a.latency.as_secs_f64() * 1000.0,
                })
            })
            .collect(),
    )
}

/// The one-line provenance summary printed on stderr.
pub fn provenance_line(outcome: &ChatOutcome) -> String {
    let p = outcome.provenance();
    let outcome = match &outcome.result {
        Ok(_) if p.static_reply => "static reply".to_owned(),
        Ok(r) => format!("served by {}", r.served_by()),
        Err(e) => format!("failed: {}", e.kind()),
    };
    let attempts: Vec<String> = p
        .attempts
        .iter()
        .map(|a| {
            let result = a.error_kind.map_or("ok", |k| k.as_str());
            let status = a.status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
            format!(
                "{}/{} {result}{status} {:.0}ms",
                a.provider,
                a.model,
                a.latency.as_secs_f64() * 1000.0
            )
        })
        .collect();
    let mut line = format!(
        "[ripcord] {outcome}; degraded: {}; attempts: {}",
        p.degraded,
        if attempts.is_empty() {
            "none".to_owned()
        } else {
            attempts.join(", ")
        }
    );
    for s in &p.skipped {
        line.push_str(&format!("; skipped {} ({})", s.provider, s.reason.as_str()));
    }
    line
}

/// Runs one chat call, writing text to `out` as it arrives (unless `--json`), and returns how
/// it ended for the provenance line / JSON.
///
/// # Errors
///
/// Only I/O errors of `out`; the chain's own failure is in the returned result.
pub async fn run(
    model: &dyn ChatModel,
    args: &ChatArgs,
    out: &mut (dyn Write + Send),
) -> std::io::Result<ChatOutcome> {
    let req = args.request();
    let ctx = Context::new();
    if !args.stream {
        let result = model.chat(&req, &ctx).await;
        if let (false, Ok(r)) = (args.json, &result) {
            writeln!(out, "{}", r.content)?;
        }
        return Ok(ChatOutcome::new(result));
    }
    let mut stream = match model.stream(&req, &ctx).await {
        Ok(s) => s,
        Err(e) => return Ok(ChatOutcome::new(Err(e))),
    };
    let mut collector = Collector::new();
    let mut partial = String::new();
    let mut announced = None;
    while let Some(ev) = stream.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                if !args.json {
                    writeln!(out)?;
                }
                return Ok(ChatOutcome {
                    result: Err(e),
                    partial,
                    announced,
                });
            }
        };
        match &ev {
            StreamEvent::TextDelta { text } => {
                partial.push_str(text);
                if !args.json {
                    write!(out, "{text}")?;
                    out.flush()?;
                }
            }
            StreamEvent::Restarted { reason, .. } => {
                partial.clear();
                if !args.json {
                    writeln!(
                        out,
                        "\n[ripcord: the answer restarted on another model after {reason}; discard the text above]"
                    )?;
                }
            }
            StreamEvent::Provenance { provenance } => announced = Some((**provenance).clone()),
            _ => {}
        }
        collector.push(ev);
    }
    if !args.json {
        writeln!(out)?;
    }
    Ok(ChatOutcome {
        result: collector.finish(),
        partial: String::new(),
        announced,
    })
}
