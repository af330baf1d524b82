//! Every decorator answers the `ChatModel` hooks (`bounds_itself`, `refusal`) as its inner
//! model does, except where the `Decorator` docs list a deliberate exception: one table, one
//! row per decorator, so a decorator that silently drops a hook fails here.

// Test helpers outside `#[test]` functions unwrap too.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;

use async_trait::async_trait;
use ripcord_core::telemetry::TracedModel;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, Context, Error, ErrorKind, ModelId, Result,
};
use ripcord_resilience::*;

/// A model whose hooks answer as told.
#[derive(Debug)]
struct Hooked {
    id: ModelId,
    caps: Capabilities,
    bounds: bool,
    refuses: bool,
}

/// The refusal message `Hooked` answers with, so a row can tell it from the decorator's own.
const REFUSED: &str = "the inner model refuses";

impl Hooked {
    fn new(bounds: bool, refuses: bool) -> Self {
        Hooked {
            id: ModelId::new("inner", "inner-1"),
            caps: Capabilities::new(4096, 256),
            bounds,
            refuses,
        }
    }
}

#[async_trait]
impl ChatModel for Hooked {
    fn id(&self) -> &ModelId {
        &self.id
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    async fn chat(&self, _req: &ChatRequest, _ctx: &Context) -> Result<ChatResponse> {
        Ok(ChatResponse::new("ok"))
    }

    fn bounds_itself(&self) -> bool {
        self.bounds
    }

    fn refusal(&self, _ctx: &Context) -> Option<Error> {
        self.refuses
            .then(|| Error::new(ErrorKind::RateLimited, REFUSED))
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
    wrap: fn(Hooked) -> Box<dyn ChatModel>,
    bounds: Hook,
    refusal: Hook,
}

fn rows() -> Vec<Row> {
    vec![
        Row {
            name: "Arc",
            wrap: |m| Box::new(Arc::new(m)),
            bounds: Hook::Forwards,
            refusal: Hook::Forwards,
        },
        Row {
            name: "Box",
            wrap: |m| Box::new(Box::new(m)),
            bounds: Hook::Forwards,
            refusal: Hook::Forwards,
        },
        Row {
            name: "TracedModel",
            wrap: |m| Box::new(TracedModel::new(m, "test")),
            bounds: Hook::Forwards,
            refusal: Hook::Forwards,
        },
        Row {
            name: "Timeout",
            wrap: |m| Box::new(m.with_timeout(TimeoutPolicy::default())),
            bounds: Hook::Forwards,
            refusal: Hook::Forwards,
        },
        Row {
            name: "Bulkhead",
            wrap: |m| Box::new(m.with_bulkhead(BulkheadPolicy::default())),
            bounds: Hook::Forwards,
            refusal: Hook::Forwards,
        },
        Row {
            name: "Health",
            wrap: |m| Box::new(m.with_health(HealthPolicy::default())),
            bounds: Hook::Forwards,
            refusal: Hook::Forwards,
        },
        Row {
            name: "Validate",
            wrap: |m| Box::new(m.with_validation(JsonValidator)),
            bounds: Hook::Forwards,
            refusal: Hook::Forwards,
        },
        Row {
            name: "Redact",
            wrap: |m| Box::new(m.with_redaction(RedactPolicy::builder().build().unwrap())),
            bounds: Hook::Forwards,
            refusal: Hook::Forwards,
        },
        // A closed breaker answers for its own state only.
        Row {
            name: "Breaker",
            wrap: |m| Box::new(m.with_breaker(BreakerPolicy::default())),
            bounds: Hook::Forwards,
            refusal: Hook::Always(false),
        },
        // Retry races every wait against the context itself; a later attempt may succeed.
        Row {
            name: "Retry",
            wrap: |m| Box::new(m.with_retry(RetryPolicy::default())),
            bounds: Hook::Always(true),
            refusal: Hook::Always(false),
        },
        // A budget check adds no wait, and a refused call would be settled at zero.
        Row {
            name: "Budget",
            wrap: |m| Box::new(m.with_budget(BudgetPolicy::default())),
            bounds: Hook::Forwards,
            refusal: Hook::Forwards,
        },
        // Its wait for capacity could outlast an inner breaker's open spell.
        Row {
            name: "RateLimit",
            wrap: |m| Box::new(m.with_rate_limit(RateLimitPolicy::default())),
            bounds: Hook::Forwards,
            refusal: Hook::Always(false),
        },
        // A hit can serve what the inner model would refuse.
        Row {
            name: "Cache",
            wrap: |m| Box::new(m.with_cache(CachePolicy::default())),
            bounds: Hook::Forwards,
            refusal: Hook::Always(false),
        },
        // Both sides answer alike here; the hedge model may serve while the primary refuses.
        Row {
            name: "Hedge",
            wrap: |m| {
                let (bounds, refuses) = (m.bounds, m.refuses);
                Box::new(m.with_hedge(Hooked::new(bounds, refuses), HedgePolicy::default()))
            },
            bounds: Hook::Forwards,
            refusal: Hook::Always(false),
        },
    ]
}

#[tokio::test]
async fn every_decorator_forwards_the_hooks_or_is_a_documented_exception() {
    let ctx = Context::new();
    let mut wrong = Vec::new();
    for row in rows() {
        for (bounds, refuses) in [(false, false), (true, true), (true, false), (false, true)] {
            let m = (row.wrap)(Hooked::new(bounds, refuses));
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
    let m = Hooked::new(true, true).with_health(HealthPolicy::default());
    let handle = m.handle();
    assert!(m.refusal(&Context::new()).is_some());
    let snap = handle.snapshot();
    assert_eq!((snap.calls, snap.successes), (1, 0), "{snap:?}");
}
