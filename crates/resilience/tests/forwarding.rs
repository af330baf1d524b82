//! Every decorator answers the `ChatModel` hooks (`bounds_itself`, `refusal`) as its inner
//! model does, except where the `Decorator` docs list a deliberate exception: one table, one
//! row per decorator, so a decorator that silently drops a hook fails here.

// Test helpers outside `#[test]` functions unwrap too.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;

use ripcord_core::telemetry::TracedModel;
use ripcord_core::testing::ScriptedModel;
use ripcord_core::{ChatModel, Context, Error, ErrorKind};
use ripcord_resilience::*;

/// The refusal message `hooked` models answer with, so a row can tell it from the decorator's
/// own.
const REFUSED: &str = "the inner model refuses";

/// A model named "inner" whose hooks answer as told: it bounds itself when `bounds`, and
/// refuses with [`REFUSED`] when `refuses`.
fn hooked(bounds: bool, refuses: bool) -> ScriptedModel {
    let m = ScriptedModel::new("inner");
    let m = if bounds { m.bounding_itself() } else { m };
    if refuses {
        m.refusing(Error::new(ErrorKind::RateLimited, REFUSED))
    } else {
        m
    }
}

/// What a decorator answers for a hook.
#[derive(Debug, Clone, Copy)]
enum Hook {
    /// The inner model's answer.
    Forwards,
    /// Always this answer, whatever the inner model says (a documented exception).
    Always(bool),
}

/// One decorator: how to build it around an inner model, and what it answers.
struct Row {
    name: &'static str,
    wrap: fn(ScriptedModel) -> Box<dyn ChatModel>,
    bounds: Hook,
    refusal: Hook,
}

impl Row {
    /// A decorator that forwards both hooks: the rule, from which the other rows are exceptions.
    fn forwarding(name: &'static str, wrap: fn(ScriptedModel) -> Box<dyn ChatModel>) -> Row {
        Row {
            name,
            wrap,
            bounds: Hook::Forwards,
            refusal: Hook::Forwards,
        }
    }

    /// A decorator that forwards `bounds_itself` but never refuses ahead of a call.
    fn never_refusing(name: &'static str, wrap: fn(ScriptedModel) -> Box<dyn ChatModel>) -> Row {
        Row {
            refusal: Hook::Always(false),
            ..Row::forwarding(name, wrap)
        }
    }
}

fn rows() -> Vec<Row> {
    vec![
        Row::forwarding("Arc", |m| Box::new(Arc::new(m))),
        Row::forwarding("Box", |m| Box::new(Box::new(m))),
        Row::forwarding("TracedModel", |m| Box::new(TracedModel::new(m, "test"))),
        Row::forwarding("Timeout", |m| {
            Box::new(m.with_timeout(TimeoutPolicy::default()))
        }),
        Row::forwarding("Bulkhead", |m| {
            Box::new(m.with_bulkhead(BulkheadPolicy::default()))
        }),
        Row::forwarding("Health", |m| {
            Box::new(m.with_health(HealthPolicy::default()))
        }),
        Row::forwarding("Validate", |m| Box::new(m.with_validation(JsonValidator))),
        Row::forwarding("Redact", |m| {
            Box::new(m.with_redaction(RedactPolicy::builder().build().unwrap()))
        }),
        // A closed breaker answers for its own state only.
        Row::never_refusing("Breaker", |m| {
            Box::new(m.with_breaker(BreakerPolicy::default()))
        }),
        // Retry races every wait against the context itself; a later attempt may succeed.
        Row {
            name: "Retry",
            wrap: |m| Box::new(m.with_retry(RetryPolicy::default())),
            bounds: Hook::Always(true),
            refusal: Hook::Always(false),
        },
        // A budget check adds no wait, and a refused call would be settled at zero.
        Row::forwarding("Budget", |m| {
            Box::new(m.with_budget(BudgetPolicy::default()))
        }),
        // Its wait for capacity could outlast an inner breaker's open spell.
        Row::never_refusing("RateLimit", |m| {
            Box::new(m.with_rate_limit(RateLimitPolicy::default()))
        }),
        // A hit can serve what the inner model would refuse.
        Row::never_refusing("Cache", |m| Box::new(m.with_cache(CachePolicy::default()))),
        // Both sides answer alike here; the hedge model may serve while the primary refuses.
        Row::never_refusing("Hedge", |m| {
            // A twin of the primary, read through its hooks.
            let twin = hooked(m.bounds_itself(), m.refusal(&Context::new()).is_some());
            Box::new(m.with_hedge(twin, HedgePolicy::default()))
        }),
    ]
}

#[tokio::test]
async fn every_decorator_forwards_the_hooks_or_is_a_documented_exception() {
    let ctx = Context::new();
    let mut wrong = Vec::new();
    for row in rows() {
        for (bounds, refuses) in [(false, false), (true, true), (true, false), (false, true)] {
            let m = (row.wrap)(hooked(bounds, refuses));
            let want_bounds = match row.bounds {
                Hook::Forwards => bounds,
                Hook::Always(b) => b,
            };
            let want_refusal = match row.refusal {
                Hook::Forwards => refuses,
                Hook::Always(b) => b,
            };
            if m.bounds_itself() != want_bounds {
                wrong.push(format!(
                    "{}: bounds_itself {} over an inner model answering {bounds}",
                    row.name,
                    m.bounds_itself()
                ));
            }
            match m.refusal(&ctx) {
                Some(e) if want_refusal => {
                    if e.kind() != ErrorKind::RateLimited || !e.message().contains(REFUSED) {
                        wrong.push(format!("{}: refusal {e} is not the inner one", row.name));
                    }
                }
                None if !want_refusal => {}
                got => wrong.push(format!(
                    "{}: refusal {got:?} over an inner model that refuses: {refuses}",
                    row.name
                )),
            }
            // The identity always comes from the inner model.
            if ChatModel::id(&*m).name.as_ref() != "inner" {
                wrong.push(format!("{}: id {}", row.name, ChatModel::id(&*m)));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "decorators that drop a hook:\n{}",
        wrong.join("\n")
    );
}

/// Health books a forwarded refusal as it books a refused call: one call, no success.
#[tokio::test]
async fn health_books_a_forwarded_refusal_as_a_call() {
    let m = hooked(true, true).with_health(HealthPolicy::default());
    let handle = m.handle();
    assert!(m.refusal(&Context::new()).is_some());
    let snap = handle.snapshot();
    assert_eq!((snap.calls, snap.successes), (1, 0), "{snap:?}");
}
