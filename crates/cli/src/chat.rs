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

/// The `--json` object for a finished call.
pub fn json_result(result: &Result<ChatResponse, Error>) -> Value {
    match result {
        Ok(r) => json!({
            "content": r.content,
            "served_by": if r.provenance.static_reply { Some("static") } else { r.provenance.served_by.as_deref() },
            "degraded": r.provenance.degraded,
            "static_reply": r.provenance.static_reply,
            "notice": r.provenance.notice,
            "model": r.model,
            "finish_reason": r.finish_reason.as_str(),
            "usage": usage_json(&r.usage),
            "attempts": attempts_json(&r.provenance),
            "skipped": r.provenance.skipped,
            "error": null,
        }),
        Err(e) => {
            let mut p = Provenance::default();
            p.attempts = e.attempts().to_vec();
            json!({
                "content": "",
                "served_by": null,
                "degraded": true,
                "static_reply": false,
                "usage": usage_json(&Usage::default()),
                "attempts": attempts_json(&p),
                "error": {"kind": e.kind().as_str(), "message": e.to_string()},
            })
        }
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
pub fn provenance_line(result: &Result<ChatResponse, Error>) -> String {
    let (p, outcome) = match result {
        Ok(r) if r.provenance.static_reply => (r.provenance.clone(), "static reply".to_owned()),
        Ok(r) => (r.provenance.clone(), format!("served by {}", r.served_by())),
        Err(e) => {
            let mut p = Provenance::default();
            p.attempts = e.attempts().to_vec();
            (p, format!("failed: {}", e.kind()))
        }
    };
    let attempts: Vec<String> = p
        .attempts
        .iter()
        .map(|a| {
            let outcome = a.error_kind.map_or("ok", |k| k.as_str());
            format!(
                "{}/{} {} {:.0}ms",
                a.provider,
                a.model,
                outcome,
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

/// Runs one chat call, writing text to `out` as it arrives (unless `--json`), and returns the
/// result for the provenance line / JSON.
///
/// # Errors
///
/// Only I/O errors of `out`; the chain's own failure is in the returned result.
pub async fn run(
    model: &dyn ChatModel,
    args: &ChatArgs,
    out: &mut (dyn Write + Send),
) -> std::io::Result<Result<ChatResponse, Error>> {
    let req = args.request();
    let ctx = Context::new();
    if !args.stream {
        let result = model.chat(&req, &ctx).await;
        if let (false, Ok(r)) = (args.json, &result) {
            writeln!(out, "{}", r.content)?;
        }
        return Ok(result);
    }
    let mut stream = match model.stream(&req, &ctx).await {
        Ok(s) => s,
        Err(e) => return Ok(Err(e)),
    };
    let mut collector = Collector::new();
    while let Some(ev) = stream.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                if !args.json {
                    writeln!(out)?;
                }
                return Ok(Err(e));
            }
        };
        if !args.json {
            match &ev {
                StreamEvent::TextDelta { text } => {
                    write!(out, "{text}")?;
                    out.flush()?;
                }
                StreamEvent::Restarted { reason, .. } => {
                    writeln!(
                        out,
                        "\n[ripcord: the answer restarted on another model after {reason}; discard the text above]"
                    )?;
                }
                _ => {}
            }
        }
        collector.push(ev);
    }
    if !args.json {
        writeln!(out)?;
    }
    Ok(collector.finish())
}
