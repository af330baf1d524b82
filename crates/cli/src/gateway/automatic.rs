//! hyper's own refusals, given a JSON body like every other error of the gateway.
//!
//! When hyper (1.x) cannot parse a request head it answers by itself, before any service
//! runs: 431 when the head is larger than its read buffer or has too many headers, 414 when
//! the URI is too long, 400 for a bad request line or header. It writes just the head —
//! `HTTP/1.1 431 Request Header Fields Too Large`, `connection: close`, `content-length: 0`,
//! `date` — and offers no hook to change it (its `on_parse_error` writes the head with no
//! body). The accept loop's socket wrapper ([`super::server`]) recognises exactly that
//! response as it is written and sends, in its place, the same head with a JSON body in the
//! OpenAI error shape (the request was never parsed, so its path and door are unknown).
//!
//! Nothing else the gateway sends matches: every 4xx the router answers carries a JSON body
//! (the front door reshapes any that would not), so a 4xx head with `content-length: 0` is
//! hyper's.

use serde_json::json;

/// What hyper's automatic answer to an unparseable request says, by status.
fn described(status: &[u8]) -> Option<(&'static str, &'static str)> {
    match status {
        b"400" => Some((
            "invalid_request",
            "the request could not be parsed as HTTP/1.1 (a bad request line or header)",
        )),
        b"414" => Some((
            "uri_too_long",
            "the request's URI is longer than this gateway accepts",
        )),
        b"431" => Some((
            "request_header_fields_too_large",
            "the request's header block is larger than this gateway accepts (too many or too large headers)",
        )),
        _ => None,
    }
}

/// The bytes to send instead of `head` when it is hyper's own refusal of an unparseable
/// request (see the module docs), with how many bytes of `head` it replaces (the head, up to
/// and including its blank line); `None` for anything else.
pub(super) fn replacement(head: &[u8]) -> Option<(Vec<u8>, usize)> {
    let rest = head.strip_prefix(b"HTTP/1.1 ")?;
    let status = rest.get(..3)?;
    let (code, message) = described(status)?;
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let block = &head[..end];
    let lines: Vec<&[u8]> = block[..end - 4].split(|b| *b == b'\n').collect();
    let empty = lines
        .iter()
        .any(|l| l.trim_ascii().eq_ignore_ascii_case(b"content-length: 0"));
    let typed = lines
        .iter()
        .any(|l| l.len() >= 13 && l[..13].eq_ignore_ascii_case(b"content-type:"));
    if !empty || typed {
        return None;
    }
    let body = json!({"error": {
        "message": message,
        "type": "invalid_request_error",
        "param": null,
        "code": code,
    }})
    .to_string();
    let mut out = Vec::with_capacity(end + body.len() + 64);
    for (i, line) in lines.iter().enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if i > 0 && line.eq_ignore_ascii_case(b"content-length: 0") {
            out.extend_from_slice(b"content-type: application/json\r\n");
            out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
        } else {
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body.as_bytes());
    Some((out, end))
}

#[cfg(test)]
mod tests {
    use super::replacement;

    #[test]
    fn hypers_own_431_414_and_400_get_a_json_body_and_a_matching_length() {
        for (status, code) in [
            (
                "431 Request Header Fields Too Large",
                "request_header_fields_too_large",
            ),
            ("414 URI Too Long", "uri_too_long"),
            ("400 Bad Request", "invalid_request"),
        ] {
            let head = format!(
                "HTTP/1.1 {status}\r\nconnection: close\r\ncontent-length: 0\r\ndate: Wed, 02 Dec 2026 04:34:49 GMT\r\n\r\n"
            );
            let (out, used) = replacement(head.as_bytes()).unwrap();
            assert_eq!(used, head.len());
            let text = String::from_utf8(out).unwrap();
            let (h, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(h.starts_with(&format!("HTTP/1.1 {status}\r\n")), "{h}");
            assert!(h.contains("connection: close\r\n"), "{h}");
            assert!(h.contains("content-type: application/json"), "{h}");
            assert!(
                h.contains(&format!("content-length: {}", body.len())),
                "{h}"
            );
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            assert_eq!(v["error"]["code"], code);
            assert_eq!(v["error"]["type"], "invalid_request_error");
        }
    }

    #[test]
    fn the_gateways_own_answers_are_left_alone() {
        for head in [
            // A 400 of the router: it has a body and a type.
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 80\r\n\r\n",
            // A 200 with an empty body.
            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            // A 404 with a body.
            "HTTP/1.1 404 Not Found\r\ncontent-length: 12\r\n\r\n",
            // Half a head.
            "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n",
        ] {
            assert!(replacement(head.as_bytes()).is_none(), "{head}");
        }
    }
}
