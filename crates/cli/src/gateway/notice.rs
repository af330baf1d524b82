//! The degradation notice on every chat door, JSON and streams, and the record of the links a
//! call passed over.
//!
//! When a fallback link served (not the primary, and not the static reply, whose text already
//! says the service is unavailable), the route's notice — its `intent_notices` text for the
//! call's `x-ripcord-intent`, else its `fallback_notice` — goes where SDKs pass it through
//! untouched: the `x-ripcord-notice` response header and a `ripcord.notice` field beside the
//! door's standard ones (top level of a JSON answer; beside a stream's last event, where the
//! gateway already puts the chain's final record). Chat UIs show neither, so with
//! `fallback_notice_in_text = true` it is also written before the answer's text, where the
//! user reads it. A stream learns that a fallback serves at its commit point, before the
//! headers go out; a stream that falls over later (continued on another link) carries the
//! notice in its last event only.
//!
//! Header values are visible ASCII: a notice with other characters is percent-encoded in the
//! header (UTF-8, as RFC 8187 encodes parameters), and unchanged in the body.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::Response;
use ripcord_core::{ChatResponse, Provenance, StreamEvent};
use serde_json::{Value, json};

use crate::config::Route;

/// `x-ripcord-notice`: the degradation notice.
pub(super) const NOTICE: HeaderName = HeaderName::from_static("x-ripcord-notice");
/// `x-ripcord-skipped`: every link the chain passed over without a call, `link=reason`.
pub(super) const SKIPPED: HeaderName = HeaderName::from_static("x-ripcord-skipped");

/// A route's notice settings.
#[derive(Debug, Clone, Default)]
pub(super) struct RouteNotice {
    in_text: bool,
    default: Option<String>,
    by_intent: BTreeMap<String, String>,
}

impl RouteNotice {
    /// The settings of a configured route.
    pub(super) fn of(r: &Route) -> Self {
        RouteNotice {
            in_text: r.spec.fallback_notice_in_text,
            default: r.spec.fallback_notice.clone(),
            by_intent: r.spec.intent_notices.clone(),
        }
    }

    /// The notice for an answer with provenance `p` to a call with `intent`: `None` unless a
    /// fallback link served and the route has a text for it.
    pub(super) fn text_for(&self, intent: Option<&str>, p: &Provenance) -> Option<String> {
        if !p.degraded || p.static_reply || p.served_by.is_none() {
            return None;
        }
        intent
            .and_then(|i| self.by_intent.get(i))
            .cloned()
            .or_else(|| p.notice.clone())
            .or_else(|| self.default.clone())
    }

    /// Whether the notice also goes into the answer's text.
    pub(super) fn in_text(&self) -> bool {
        self.in_text
    }
}

/// What a call's answer needs to carry its notice: the route's settings and the call's intent.
#[derive(Debug, Clone, Default)]
pub(super) struct NoticeCall {
    route: RouteNotice,
    intent: Option<String>,
}

impl NoticeCall {
    /// The settings of route `route` (the default route when `None`) for a call with `intent`.
    pub(super) fn new(notices: &[RouteNotice], route: Option<usize>, intent: Option<&str>) -> Self {
        NoticeCall {
            route: notices.get(route.unwrap_or(0)).cloned().unwrap_or_default(),
            intent: intent.map(str::to_owned),
        }
    }

    /// The notice for an answer with provenance `p`, if it gets one.
    pub(super) fn text_for(&self, p: &Provenance) -> Option<String> {
        self.route.text_for(self.intent.as_deref(), p)
    }

    /// Writes the notice into a whole answer's text when the route asks for it (an answer
    /// that is only tool calls is left alone: text beside them would change what it is).
    pub(super) fn write_into_text(&self, notice: &str, resp: &mut ChatResponse) {
        if self.route.in_text() && (!resp.content.is_empty() || resp.tool_calls.is_empty()) {
            resp.content = format!("{notice}\n\n{}", resp.content);
        }
    }

    /// The text event that opens a stream with the notice, when the route asks for it.
    pub(super) fn opening_event(&self, notice: &str) -> Option<StreamEvent> {
        self.route.in_text().then(|| StreamEvent::TextDelta {
            text: format!("{notice}\n\n"),
        })
    }
}

/// The notice as a header value (percent-encoded beyond visible ASCII).
pub(super) fn header_value(notice: &str) -> Option<HeaderValue> {
    let mut out = String::with_capacity(notice.len());
    for b in notice.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    HeaderValue::from_str(&out).ok()
}

/// Sets `x-ripcord-notice`.
pub(super) fn set_header(h: &mut HeaderMap, notice: &str) {
    if let Some(v) = header_value(notice) {
        h.insert(NOTICE, v);
    }
}

/// `x-ripcord-skipped`, when the chain passed over any link.
pub(super) fn set_skipped(h: &mut HeaderMap, p: &Provenance) {
    if p.skipped.is_empty() {
        return;
    }
    let list: Vec<String> = p
        .skipped
        .iter()
        .map(|s| format!("{}={}", s.provider, s.reason.as_str()))
        .collect();
    if let Ok(v) = HeaderValue::from_str(&list.join(", ")) {
        h.insert(SKIPPED, v);
    }
}

/// `record` (a stream's final `ripcord` object, if any) with the notice in it.
pub(super) fn with_notice(record: Option<Value>, notice: Option<&str>) -> Option<Value> {
    let Some(n) = notice else {
        return record;
    };
    let mut r = record.unwrap_or_else(|| json!({}));
    if let Some(o) = r.as_object_mut() {
        o.insert("notice".to_owned(), json!(n));
    }
    Some(r)
}

/// A whole JSON answer with `ripcord.notice` at its top level and the `x-ripcord-notice`
/// header; an answer that is not a JSON object keeps its body and gets the header only.
pub(super) async fn annotate(resp: Response, notice: &str) -> Response {
    let (mut parts, body) = resp.into_parts();
    set_header(&mut parts.headers, notice);
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        // A body the gateway rendered itself cannot fail to read; say so rather than hide it.
        Err(e) => {
            tracing::warn!(error = %e, "the answer's body could not be read to add its notice");
            return Response::from_parts(parts, Body::empty());
        }
    };
    let Ok(mut v) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let Some(o) = v.as_object_mut() else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    match o.get_mut("ripcord").and_then(Value::as_object_mut) {
        Some(r) => {
            r.insert("notice".to_owned(), json!(notice));
        }
        None => {
            o.insert("ripcord".to_owned(), json!({ "notice": notice }));
        }
    }
    match serde_json::to_vec(&v) {
        Ok(out) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(out))
        }
        Err(_) => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn served_by_backup() -> Provenance {
        let mut p = Provenance::default();
        p.served_by = Some(Arc::from("backup"));
        p.degraded = true;
        p
    }

    #[test]
    fn the_intent_notice_wins_and_only_fallbacks_get_one() {
        let route = RouteNotice {
            in_text: false,
            default: Some("a backup answered".into()),
            by_intent: [("billing".to_owned(), "billing is degraded".to_owned())].into(),
        };
        let p = served_by_backup();
        assert_eq!(
            route.text_for(Some("billing"), &p).as_deref(),
            Some("billing is degraded")
        );
        assert_eq!(
            route.text_for(Some("other"), &p).as_deref(),
            Some("a backup answered")
        );
        assert_eq!(route.text_for(None, &Provenance::default()), None);
        let mut stat = served_by_backup();
        stat.static_reply = true;
        assert_eq!(route.text_for(None, &stat), None);
    }

    #[test]
    fn a_notice_beyond_ascii_is_percent_encoded_in_the_header() {
        let v = header_value("Réponse de secours 100%").unwrap();
        assert_eq!(v.to_str().unwrap(), "R%C3%A9ponse de secours 100%25");
    }
}
