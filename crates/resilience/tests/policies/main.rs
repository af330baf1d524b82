//! Integration tests of the resilience policies, on paused tokio time with scripted models.

// Test helpers outside `#[test]` functions unwrap too (`allow-unwrap-in-tests` covers only those).
#![allow(clippy::unwrap_used, clippy::panic)]

mod accounting;
mod blame;
mod breaker;
mod bulkhead;
mod compose;
mod extras;
mod limits;
mod retry;
mod support;
mod timeout;
