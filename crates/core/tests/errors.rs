//! The error taxonomy: names, dispositions, data kept, display and source chain.

use std::error::Error as _;
use std::time::Duration;

use ripcord_core::{Disposition, Error, ErrorKind, StatusCode, TimeoutPhase};

/// The table of `docs/errors.md`, row by row (the test below checks the document says the same).
const TABLE: &[(ErrorKind, &str, Disposition)] = &[
    (
        ErrorKind::RateLimited,
        "rate_limited",
        Disposition::Retry { after: None },
    ),
    (
        ErrorKind::QuotaExhausted,
        "quota_exhausted",
        Disposition::Fallback,
    ),
    (ErrorKind::Overloaded, "overloaded", Disposition::Fallback),
    (
        ErrorKind::ServerError,
        "server_error",
        Disposition::Retry { after: None },
    ),
    (
        ErrorKind::Timeout,
        "timeout",
        Disposition::Retry { after: None },
    ),
    (
        ErrorKind::Network,
        "network",
        Disposition::Retry { after: None },
    ),
    (ErrorKind::Auth, "auth", Disposition::Fallback),
    (
        ErrorKind::PermissionDenied,
        "permission_denied",
        Disposition::Fallback,
    ),
    (
        ErrorKind::RegionBlocked,
        "region_blocked",
        Disposition::Fallback,
    ),
    (
        ErrorKind::ModelNotFound,
        "model_not_found",
        Disposition::Fallback,
    ),
    (
        ErrorKind::PayloadTooLarge,
        "payload_too_large",
        Disposition::Fallback,
    ),
    (
        ErrorKind::ContextLengthExceeded,
        "context_length_exceeded",
        Disposition::Fallback,
    ),
    (
        ErrorKind::ContentFiltered,
        "content_filtered",
        Disposition::FailFast,
    ),
    (
        ErrorKind::InvalidRequest,
        "invalid_request",
        Disposition::FailFast,
    ),
    (
        ErrorKind::InvalidResponse,
        "invalid_response",
        Disposition::Retry { after: None },
    ),
    (
        ErrorKind::CircuitOpen,
        "circuit_open",
        Disposition::Fallback,
    ),
    (
        ErrorKind::LocalRateLimited,
        "local_rate_limited",
        Disposition::Fallback,
    ),
    (
        ErrorKind::BudgetExhausted,
        "budget_exhausted",
        Disposition::Fallback,
    ),
    (
        ErrorKind::DeadlineExceeded,
        "deadline_exceeded",
        Disposition::FailFast,
    ),
    (ErrorKind::Cancelled, "cancelled", Disposition::FailFast),
];

#[test]
fn every_kind_has_its_row_in_the_design_table() {
    assert_eq!(TABLE.len(), ErrorKind::ALL.len());
    for (kind, name, disposition) in TABLE {
        assert_eq!(kind.as_str(), *name, "{kind:?}");
        assert_eq!(kind.disposition(), *disposition, "{kind:?}");
        assert_eq!(
            Error::new(*kind, "x").disposition(),
            *disposition,
            "{kind:?}"
        );
        assert_eq!(ErrorKind::parse(name), Some(*kind));
        let json = serde_json::to_string(kind).unwrap();
        assert_eq!(json, format!("\"{name}\""));
        assert_eq!(serde_json::from_str::<ErrorKind>(&json).unwrap(), *kind);
    }
    assert_eq!(ErrorKind::parse("nope"), None);
}

#[test]
fn rate_limited_carries_retry_after_into_the_disposition() {
    let e = Error::new(ErrorKind::RateLimited, "slow down")
        .with_retry_after(Duration::from_millis(1500));
    assert_eq!(
        e.disposition(),
        Disposition::Retry {
            after: Some(Duration::from_millis(1500))
        }
    );
    assert_eq!(e.retry_after(), Some(Duration::from_millis(1500)));
}

#[test]
fn quota_exhausted_is_never_retried_even_with_a_retry_after() {
    // Same status as a rate limit, opposite action.
    let e = Error::new(ErrorKind::QuotaExhausted, "insufficient_quota")
        .with_status(StatusCode(429))
        .with_retry_after(Duration::from_secs(1));
    assert_eq!(e.disposition(), Disposition::Fallback);
    assert!(e.kind().needs_alert());
}

#[test]
fn auth_is_fallback_and_alerts() {
    let e = Error::new(ErrorKind::Auth, "bad key").with_status(StatusCode(401));
    assert_eq!(e.disposition(), Disposition::Fallback);
    assert!(e.kind().needs_alert());
    assert!(!ErrorKind::RateLimited.needs_alert());
}

#[test]
fn timeouts_keep_their_phase() {
    for phase in [
        TimeoutPhase::Connect,
        TimeoutPhase::FirstToken,
        TimeoutPhase::StreamIdle,
        TimeoutPhase::Total,
    ] {
        let e = Error::timeout(phase, "took too long");
        assert_eq!(e.kind(), ErrorKind::Timeout);
        assert_eq!(e.timeout_phase(), Some(phase));
        assert!(e.is_timeout());
        assert!(e.to_string().contains(phase.as_str()), "{e}");
    }
}

#[test]
fn local_refusals_and_caller_side_kinds() {
    for k in [
        ErrorKind::CircuitOpen,
        ErrorKind::LocalRateLimited,
        ErrorKind::BudgetExhausted,
    ] {
        assert!(k.is_local_refusal());
        assert!(k.is_caller_side());
    }
    assert!(!ErrorKind::ServerError.is_local_refusal());
    assert!(ErrorKind::ContentFiltered.is_caller_side());
    assert!(!ErrorKind::Overloaded.is_caller_side());
}

#[test]
fn vendor_facts_are_kept_as_data_and_displayed_once() {
    let io = std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "connection reset by peer",
    );
    let e = Error::new(ErrorKind::Network, "request failed")
        .with_provider("openai", "gpt-4o")
        .with_status(StatusCode(502))
        .with_vendor_code("bad_gateway")
        .with_source(io);
    assert_eq!(e.provider(), Some("openai"));
    assert_eq!(e.model(), Some("gpt-4o"));
    assert_eq!(e.status(), Some(StatusCode(502)));
    assert_eq!(e.vendor_code(), Some("bad_gateway"));
    assert_eq!(e.message(), "request failed");
    let text = e.to_string();
    assert_eq!(
        text,
        "openai/gpt-4o: network (HTTP 502, bad_gateway): request failed"
    );
    // The cause is reachable through source(), not repeated in Display.
    assert!(!text.contains("reset by peer"));
    assert_eq!(e.source().unwrap().to_string(), "connection reset by peer");
    // Clone keeps the cause's text in the message, since sources are not Clone.
    assert!(e.clone().message().contains("reset by peer"));
}

#[test]
fn exhausted_keeps_every_error_in_order() {
    let a = Error::new(ErrorKind::Overloaded, "a").with_provider("a", "m");
    let b = Error::new(ErrorKind::RateLimited, "b")
        .with_provider("b", "m")
        .with_retry_after(Duration::from_secs(3));
    let e = Error::exhausted(vec![a, b]);
    assert_eq!(e.kind(), ErrorKind::RateLimited);
    assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
    assert_eq!(e.causes().len(), 2);
    assert_eq!(e.causes()[0].provider(), Some("a"));
    assert_eq!(e.causes()[1].provider(), Some("b"));
    assert!(
        e.to_string()
            .starts_with("rate_limited: all 2 links failed ["),
        "{e}"
    );
    assert_eq!(e.source().unwrap().to_string(), e.causes()[1].to_string());
}

#[test]
fn error_summary_serialises_with_snake_case_kind() {
    let e = Error::new(ErrorKind::ContextLengthExceeded, "too long").with_status(StatusCode(400));
    let s = ripcord_core::ErrorSummary::from(&e);
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["kind"], "context_length_exceeded");
    assert_eq!(v["status"], 400);
}

/// `docs/errors.md` says what the code does: one row per kind, with the same disposition.
#[test]
fn the_documented_table_matches_the_code() {
    let doc = include_str!("../../../docs/errors.md");
    let rows: Vec<(&str, &str)> = doc
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((name, *cells.get(3)?))
        })
        .collect();
    assert_eq!(
        rows.len(),
        ErrorKind::ALL.len(),
        "one row per kind in docs/errors.md"
    );
    for (name, said) in rows {
        let kind = ErrorKind::parse(name)
            .unwrap_or_else(|| panic!("docs/errors.md names an unknown kind {name:?}"));
        let expected = match kind.disposition() {
            Disposition::Retry { .. } => "retry",
            Disposition::Fallback => "fallback",
            Disposition::FailFast => "fail fast",
            other => panic!("docs/errors.md has no word for {other:?}"),
        };
        assert!(
            said.starts_with(expected),
            "docs/errors.md says {name} is {said:?}, the code says {expected}"
        );
    }
}
