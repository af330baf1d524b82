//! The fallback chain: order, dispositions, skip rules, routes, deadline, static reply, nesting.
//! All on tokio's paused clock: elapsed times are exact.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::testing::ScriptedModel;
use ripcord_core::{
    BuildError, Capabilities, Chain, ChatModel, ChatRequest, ChatResponse, Context, Error,
    ErrorKind, ImageSource, Locality, LocalityRequirement, Message, ResponseFormat, SkipReason,
    ToolSpec,
};
use tokio::time::Instant;

use support::{arc, ask, chain_of, chat_ok};

#[tokio::test(start_paused = true)]
async fn first_link_serves_when_healthy() {
    let a = arc(ScriptedModel::new("a").reply("from a"));
    let b = arc(ScriptedModel::new("b").reply("from b"));
    let chain = chain_of(&[&a, &b]).build().unwrap();
    let r = chat_ok(&chain, &ask()).await;
    assert_eq!(r.text(), "from a");
    assert_eq!(r.served_by(), "a");
    assert!(!r.degraded());
    assert_eq!(r.provenance.attempts.len(), 1);
    assert_eq!(b.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn fallback_kinds_move_to_the_next_link_and_record_every_attempt() {
    for kind in [
        ErrorKind::Overloaded,
        ErrorKind::QuotaExhausted,
        ErrorKind::Auth,
        ErrorKind::RegionBlocked,
        ErrorKind::ModelNotFound,
        ErrorKind::ServerError,
        ErrorKind::Timeout,
        ErrorKind::CircuitOpen,
    ] {
        let a = arc(ScriptedModel::new("a").fail(kind));
        let b = arc(ScriptedModel::new("b").reply("from b"));
        let chain = chain_of(&[&a, &b]).build().unwrap();
        let r = chat_ok(&chain, &ask()).await;
        assert_eq!(r.served_by(), "b", "{kind}");
        assert!(r.degraded());
        let kinds: Vec<_> = r.provenance.attempts.iter().map(|a| a.error_kind).collect();
        assert_eq!(kinds, vec![Some(kind), None], "{kind}");
        assert_eq!(chain.stats().fallbacks, 1);
    }
}

#[tokio::test(start_paused = true)]
async fn fail_fast_kinds_stop_the_chain() {
    for kind in [ErrorKind::ContentFiltered, ErrorKind::InvalidRequest] {
        let a = arc(ScriptedModel::new("a").fail(kind));
        let b = arc(ScriptedModel::new("b").reply("from b"));
        let chain = chain_of(&[&a, &b])
            .static_reply("unavailable")
            .build()
            .unwrap();
        let e = chain.chat(&ask(), &Context::new()).await.unwrap_err();
        assert_eq!(e.kind(), kind);
        assert_eq!(b.calls(), 0, "content is not shopped around: {kind}");
        assert_eq!(e.attempts().len(), 1);
        assert_eq!(
            chain.stats().static_replies,
            0,
            "no static reply for {kind}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn cancellation_stops_the_chain_without_a_static_reply() {
    let ctx = Context::new();
    let token = ctx.cancellation().clone();
    let a = arc(ScriptedModel::new("a").hang());
    let b = arc(ScriptedModel::new("b").reply("b"));
    let chain = chain_of(&[&a, &b])
        .static_reply("unavailable")
        .build()
        .unwrap();
    let req = ask();
    let call = chain.chat(&req, &ctx);
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        token.cancel();
    };
    let (r, ()) = tokio::join!(call, cancel);
    assert_eq!(r.unwrap_err().kind(), ErrorKind::Cancelled);
    assert_eq!(b.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn exhausted_chain_without_static_reply_returns_every_error() {
    let a = arc(ScriptedModel::new("a").fail(ErrorKind::Overloaded));
    let b = arc(ScriptedModel::new("b").fail(ErrorKind::ServerError));
    let chain = chain_of(&[&a, &b]).build().unwrap();
    let e = chain.chat(&ask(), &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ServerError);
    let providers: Vec<_> = e
        .causes()
        .iter()
        .map(|c| c.provider().unwrap().to_owned())
        .collect();
    assert_eq!(providers, ["a", "b"]);
    assert_eq!(e.attempts().len(), 2);
    assert_eq!(chain.stats().failures, 1);
}

#[tokio::test(start_paused = true)]
async fn static_reply_is_honest_degraded_and_counted() {
    let a = arc(ScriptedModel::new("a").fail(ErrorKind::Overloaded));
    let chain = chain_of(&[&a])
        .static_reply("The assistant is unavailable right now.")
        .intent_reply(
            "billing",
            "Billing help is down; email billing@example.com.",
        )
        .build()
        .unwrap();
    let r = chat_ok(&chain, &ask()).await;
    assert_eq!(r.text(), "The assistant is unavailable right now.");
    assert!(r.degraded() && r.provenance.static_reply);
    assert_eq!(r.served_by(), "static");
    assert_eq!(
        r.provenance.attempts[0].error_kind,
        Some(ErrorKind::Overloaded)
    );
    let r = chain
        .chat(&ask(), &Context::new().with_intent("billing"))
        .await
        .unwrap();
    assert_eq!(r.text(), "Billing help is down; email billing@example.com.");
    assert_eq!(chain.stats().static_replies, 2);
    assert_eq!(chain.stats().calls, 2);
}

#[tokio::test(start_paused = true)]
async fn links_without_tools_are_skipped_for_tool_requests() {
    let plain = arc(ScriptedModel::new("plain").with_caps(Capabilities::new(8192, 1024)));
    let tooled = arc(ScriptedModel::new("tooled").reply("called"));
    let chain = chain_of(&[&plain, &tooled]).build().unwrap();
    let req = ask().with_tool(ToolSpec::new(
        "f",
        "does f",
        serde_json::json!({"type": "object"}),
    ));
    let r = chat_ok(&chain, &req).await;
    assert_eq!(r.served_by(), "tooled");
    assert_eq!(plain.calls(), 0);
    assert_eq!(r.provenance.skipped[0].reason, SkipReason::NoTools);
    assert_eq!(r.provenance.attempts.len(), 1, "a skip is not an attempt");
}

#[tokio::test(start_paused = true)]
async fn links_without_vision_or_json_are_skipped() {
    let plain = arc(ScriptedModel::new("plain").with_caps(Capabilities::new(8192, 1024)));
    let full = arc(ScriptedModel::new("full").reply("ok"));
    let chain = chain_of(&[&plain, &full]).build().unwrap();
    let img = ChatRequest::new(vec![Message::user("what's this").with_image(
        ImageSource::Url {
            url: "https://x/y.png".into(),
        },
    )]);
    let r = chat_ok(&chain, &img).await;
    assert_eq!(r.provenance.skipped[0].reason, SkipReason::NoVision);
    let json = ask().with_response_format(ResponseFormat::Json);
    let r = chat_ok(&chain, &json).await;
    assert_eq!(r.provenance.skipped[0].reason, SkipReason::NoJson);
    assert_eq!(plain.calls(), 0);
    assert_eq!(full.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn local_only_requests_never_reach_cloud_links() {
    let cloud = arc(ScriptedModel::new("cloud").reply("cloud"));
    let local = arc(ScriptedModel::new("local")
        .with_caps(Capabilities::new(8192, 1024).with_locality(Locality::Local))
        .reply("local"));
    let chain = chain_of(&[&cloud, &local]).build().unwrap();
    let ctx = Context::new().with_locality(LocalityRequirement::LocalOnly);
    let r = chain.chat(&ask(), &ctx).await.unwrap();
    assert_eq!(r.served_by(), "local");
    assert_eq!(cloud.calls(), 0);
    assert_eq!(r.provenance.skipped[0].reason, SkipReason::Locality);
}

#[tokio::test(start_paused = true)]
async fn region_requirements_pick_links_in_allowed_regions() {
    let us = arc(ScriptedModel::new("us").with_caps(
        Capabilities::new(8192, 1024).with_locality(Locality::cloud_in("openai", "us")),
    ));
    let eu = arc(ScriptedModel::new("eu")
        .with_caps(Capabilities::new(8192, 1024).with_locality(Locality::cloud_in("mistral", "eu")))
        .reply("eu"));
    let chain = chain_of(&[&us, &eu]).build().unwrap();
    let ctx = Context::new().with_locality(LocalityRequirement::Regions(vec!["eu".into()]));
    assert_eq!(chain.chat(&ask(), &ctx).await.unwrap().served_by(), "eu");
    assert_eq!(us.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn links_whose_window_is_too_small_are_skipped() {
    let small = arc(ScriptedModel::new("small").with_caps(Capabilities::new(2_000, 512)));
    let large = arc(ScriptedModel::new("large").reply("large"));
    let chain = chain_of(&[&small, &large]).build().unwrap();
    // ~6000 tokens of English: far beyond 2k even at the estimate's low end.
    let long = "The quick brown fox jumps over the lazy dog. ".repeat(600);
    let r = chat_ok(&chain, &ChatRequest::user(long)).await;
    assert_eq!(r.served_by(), "large");
    assert_eq!(r.provenance.skipped[0].reason, SkipReason::ContextWindow);
    assert_eq!(small.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_borderline_prompt_is_sent_rather_than_skipped() {
    // ~1000 tokens into a 1100-token window with max_tokens 50: the low end of the estimate fits,
    // so the link is tried (a vendor refusal would be classified and fall back).
    let small = arc(ScriptedModel::new("small")
        .with_caps(Capabilities::new(1_100, 512))
        .reply("small"));
    let chain = chain_of(&[&small]).build().unwrap();
    let text = "The quick brown fox jumps over the lazy dog. ".repeat(100);
    let r = chain
        .chat(
            &ChatRequest::user(text).with_max_tokens(50),
            &Context::new(),
        )
        .await
        .unwrap();
    assert_eq!(r.served_by(), "small");
}

#[tokio::test(start_paused = true)]
async fn per_kind_routes_pick_the_named_link() {
    // (a's failure, the link that serves, b's calls): other kinds still go in order.
    for (kind, served_by, b_calls) in [
        (ErrorKind::RateLimited, "c", 0),
        (ErrorKind::Overloaded, "b", 1),
    ] {
        let a = arc(ScriptedModel::new("a").fail(kind));
        let b = arc(ScriptedModel::new("b").reply("b"));
        let c = arc(ScriptedModel::new("c").reply("c"));
        let chain = chain_of(&[&a, &b, &c])
            .route(ErrorKind::RateLimited, "c")
            .build()
            .unwrap();
        let r = chat_ok(&chain, &ask()).await;
        assert_eq!(r.served_by(), served_by, "{kind:?}");
        assert_eq!(b.calls(), b_calls, "{kind:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn after_a_route_the_remaining_links_are_tried_in_order() {
    // `a` has the smallest window: after its context-length failure, larger ones are tried.
    let a = arc(ScriptedModel::new("a")
        .with_caps(ripcord_core::Capabilities::new(8_000, 1_000))
        .fail(ErrorKind::ContextLengthExceeded));
    let b = arc(ScriptedModel::new("b").reply("b"));
    let c = arc(ScriptedModel::new("c").fail(ErrorKind::Overloaded));
    let chain = chain_of(&[&a, &b, &c])
        .route(ErrorKind::ContextLengthExceeded, "c")
        .build()
        .unwrap();
    let r = chat_ok(&chain, &ask()).await;
    assert_eq!(r.served_by(), "b");
    let order: Vec<_> = r
        .provenance
        .attempts
        .iter()
        .map(|a| a.provider.to_string())
        .collect();
    assert_eq!(order, ["a", "c", "b"]);
}

/// The answer of a chain of `links` with `deadline` and the static reply "busy", and how long it
/// took.
#[allow(clippy::unwrap_used)] // a test helper fails the test by panicking
async fn busy_reply(links: &[&Arc<ScriptedModel>], deadline: Duration) -> (ChatResponse, Duration) {
    let chain = chain_of(links)
        .deadline(deadline)
        .static_reply("busy")
        .build()
        .unwrap();
    let t0 = Instant::now();
    let r = chat_ok(&chain, &ask()).await;
    (r, t0.elapsed())
}

#[tokio::test(start_paused = true)]
async fn nothing_waits_past_the_deadline() {
    let a = arc(ScriptedModel::new("a").hang());
    let b = arc(ScriptedModel::new("b").hang());
    let (r, took) = busy_reply(&[&a, &b], Duration::from_secs(2)).await;
    assert_eq!(took, Duration::from_secs(2));
    assert!(r.provenance.static_reply);
    assert_eq!(
        r.provenance.attempts[0].error_kind,
        Some(ErrorKind::DeadlineExceeded)
    );
    assert_eq!(b.calls(), 0, "the deadline was spent on the first link");
}

#[tokio::test(start_paused = true)]
async fn a_link_that_bounds_itself_reports_its_own_timeout_at_the_deadline() {
    // Not raced by the chain: the link's own error (kind and phase, tagged with the link)
    // reaches the caller, at exactly the deadline.
    let a = arc(ScriptedModel::new("a").hang().bounding_itself());
    assert!(a.bounds_itself());
    let chain = chain_of(&[&a])
        .deadline(Duration::from_secs(2))
        .build()
        .unwrap();
    assert!(chain.bounds_itself(), "a chain bounds its own calls");
    let t0 = Instant::now();
    let e = chain.chat(&ask(), &Context::new()).await.unwrap_err();
    assert_eq!(t0.elapsed(), Duration::from_secs(2));
    assert_eq!(e.kind(), ErrorKind::DeadlineExceeded, "{e}");
    let first = &e.attempts()[0];
    assert_eq!(first.provider.as_ref(), "a");
    assert_eq!(first.error_kind, Some(ErrorKind::Timeout), "{e}");
    assert!(e.to_string().contains("timeout (total)"), "{e}");

    // A link that does not bound itself is cut by the chain's own timer.
    let b = arc(ScriptedModel::new("b").hang());
    assert!(!b.bounds_itself());
    let chain = chain_of(&[&b])
        .deadline(Duration::from_secs(2))
        .build()
        .unwrap();
    let t0 = Instant::now();
    let e = chain.chat(&ask(), &Context::new()).await.unwrap_err();
    assert_eq!(t0.elapsed(), Duration::from_secs(2));
    assert_eq!(e.kind(), ErrorKind::DeadlineExceeded, "{e}");
    assert_eq!(
        e.attempts()[0].error_kind,
        Some(ErrorKind::DeadlineExceeded),
        "{e}"
    );
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_call_ends_it_whether_or_not_the_link_bounds_itself() {
    for bounding in [false, true] {
        let mut a = ScriptedModel::new("a").hang();
        if bounding {
            a = a.bounding_itself();
        }
        let chain = chain_of(&[&arc(a)]).build().unwrap();
        let ctx = Context::new();
        let cancel = ctx.cancellation().clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            cancel.cancel();
        });
        let t0 = Instant::now();
        let e = chain.chat(&ask(), &ctx).await.unwrap_err();
        assert_eq!(t0.elapsed(), Duration::from_secs(1), "bounding: {bounding}");
        assert_eq!(e.kind(), ErrorKind::Cancelled, "bounding: {bounding}: {e}");
    }
}

#[tokio::test(start_paused = true)]
async fn deadline_without_static_reply_is_deadline_exceeded() {
    let a = arc(ScriptedModel::new("a").reply_after("late", Duration::from_secs(60)));
    let chain = chain_of(&[&a]).build().unwrap();
    let t0 = Instant::now();
    let e = chain.chat(&ask(), &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DeadlineExceeded);
    assert_eq!(t0.elapsed(), ripcord_core::chain::DEFAULT_DEADLINE);
}

#[tokio::test(start_paused = true)]
async fn an_earlier_context_deadline_wins() {
    let a = arc(ScriptedModel::new("a").hang());
    let chain = chain_of(&[&a])
        .deadline(Duration::from_secs(30))
        .build()
        .unwrap();
    let t0 = Instant::now();
    let e = chain
        .chat(
            &ask(),
            &Context::new().with_timeout(Duration::from_millis(750)),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DeadlineExceeded);
    assert_eq!(t0.elapsed(), Duration::from_millis(750));
}

#[tokio::test(start_paused = true)]
async fn a_link_can_reserve_budget_for_the_links_after_it() {
    let a = arc(ScriptedModel::new("a").hang());
    let b = arc(ScriptedModel::new("b").reply_after("b", Duration::from_secs(1)));
    let chain = chain_of(&[&a])
        .reserve(Duration::from_secs(5))
        .link_arc(b.clone())
        .deadline(Duration::from_secs(15))
        .build()
        .unwrap();
    let t0 = Instant::now();
    let r = chat_ok(&chain, &ask()).await;
    assert_eq!(r.served_by(), "b");
    assert_eq!(t0.elapsed(), Duration::from_secs(11));
    assert_eq!(
        r.provenance.attempts[0].error_kind,
        Some(ErrorKind::Timeout)
    );
}

#[tokio::test(start_paused = true)]
async fn the_last_remaining_link_gets_the_whole_budget() {
    // A reserve never cuts the last link's attempt short.
    let a = arc(ScriptedModel::new("a").reply_after("slow but valid", Duration::from_secs(12)));
    let chain = chain_of(&[&a])
        .reserve(Duration::from_secs(5))
        .deadline(Duration::from_secs(15))
        .build()
        .unwrap();
    let r = chat_ok(&chain, &ask()).await;
    assert_eq!(r.text(), "slow but valid");
}

#[tokio::test(start_paused = true)]
async fn when_every_link_is_cooling_down_the_chain_waits_for_the_earliest() {
    // When every link is cooling down and one is back within the deadline, wait for it.
    let refuse = |after_ms| {
        Error::new(ErrorKind::CircuitOpen, "open").with_retry_after(Duration::from_millis(after_ms))
    };
    // a is still cooling down when the chain comes back; b is re-admitted after 800 ms.
    let a = arc(ScriptedModel::new("a")
        .fail_with(refuse(3_000), Duration::ZERO)
        .fail_with(refuse(2_200), Duration::ZERO)
        .reply("a is back"));
    let b = arc(ScriptedModel::new("b")
        .fail_with(refuse(800), Duration::ZERO)
        .reply("b is back"));
    let chain = chain_of(&[&a, &b]).static_reply("busy").build().unwrap();
    let t0 = Instant::now();
    let r = chat_ok(&chain, &ask()).await;
    assert_eq!(t0.elapsed(), Duration::from_millis(800));
    assert_eq!(r.served_by(), "b");
    assert_eq!((a.calls(), b.calls()), (2, 2));
}

#[tokio::test(start_paused = true)]
async fn a_readmission_beyond_the_deadline_means_static_reply_now() {
    let refuse = Error::new(ErrorKind::LocalRateLimited, "limited")
        .with_retry_after(Duration::from_secs(60));
    let a = arc(ScriptedModel::new("a").fail_with(refuse, Duration::ZERO));
    let (r, took) = busy_reply(&[&a], Duration::from_secs(5)).await;
    assert_eq!(took, Duration::ZERO);
    assert!(r.provenance.static_reply);
}

#[tokio::test(start_paused = true)]
async fn chains_nest() {
    let a = arc(ScriptedModel::new("a").fail(ErrorKind::Overloaded));
    let b = arc(ScriptedModel::new("b").reply("inner b"));
    let inner = chain_of(&[&a, &b]).name("inner").build().unwrap();
    let c = arc(ScriptedModel::new("c").reply("c"));
    let outer = Chain::builder()
        .link(inner)
        .link_arc(c.clone())
        .name("outer")
        .build()
        .unwrap();
    let r = chat_ok(&outer, &ask()).await;
    assert_eq!(r.text(), "inner b");
    assert_eq!(r.served_by(), "b");
    assert!(r.degraded(), "the inner chain fell back");
    assert_eq!(r.provenance.attempts.len(), 2);
    assert_eq!(c.calls(), 0);
    assert_eq!(outer.id().name.as_ref(), "outer");
}

#[tokio::test(start_paused = true)]
async fn fallback_notice_is_attached_to_fallback_answers() {
    let a = arc(ScriptedModel::new("a").fail(ErrorKind::Overloaded));
    let b = arc(ScriptedModel::new("b").reply("b"));
    let chain = chain_of(&[&a, &b])
        .fallback_notice("Answered by a backup model.")
        .build()
        .unwrap();
    let r = chat_ok(&chain, &ask()).await;
    assert_eq!(
        r.provenance.notice.as_deref(),
        Some("Answered by a backup model.")
    );
}

#[test]
fn invalid_chains_are_construction_errors() {
    assert_eq!(
        Chain::builder().static_reply("x").build().unwrap_err(),
        BuildError::NoLinks
    );
    let e = Chain::builder()
        .link(ScriptedModel::new("a"))
        .link(ScriptedModel::new("a"))
        .build()
        .unwrap_err();
    assert_eq!(e, BuildError::DuplicateLink("a".into()));
    let e = Chain::builder()
        .link(ScriptedModel::new("a"))
        .route(ErrorKind::RateLimited, "zz")
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("\"zz\""), "{e}");
    let e = Chain::builder()
        .link(ScriptedModel::new("a"))
        .deadline(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e, BuildError::ZeroDeadline);
    let e = Chain::builder()
        .link(ScriptedModel::new("a"))
        .reserve(Duration::from_secs(50))
        .build()
        .unwrap_err();
    assert_eq!(e, BuildError::ReserveTooLarge("a".into()));
    let e: Error = BuildError::NoLinks.into();
    assert_eq!(e.kind(), ErrorKind::InvalidRequest);
}

#[test]
fn the_chain_reports_the_union_of_its_links_capabilities() {
    let chain = Chain::builder()
        .link(ScriptedModel::new("a").with_caps(Capabilities::new(8_000, 1_000)))
        .link(ScriptedModel::new("b").with_caps(Capabilities::new(200_000, 8_000).with_tools(true)))
        .build()
        .unwrap();
    let caps = chain.capabilities();
    assert_eq!(caps.context_window, 200_000);
    assert!(caps.tools);
}

#[tokio::test(start_paused = true)]
async fn context_sleep_never_waits_for_nothing() {
    let ctx = Context::new().with_timeout(Duration::from_secs(1));
    let t0 = Instant::now();
    let e = ctx.sleep(Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DeadlineExceeded);
    assert_eq!(t0.elapsed(), Duration::ZERO);
    ctx.sleep(Duration::from_millis(300)).await.unwrap();
    assert_eq!(t0.elapsed(), Duration::from_millis(300));
}

/// A link that refuses up front (as an open breaker does) while `refusals` last, and answers
/// calls otherwise; counts both.
#[derive(Debug)]
struct Refuser {
    inner: ScriptedModel,
    refusals: std::sync::Mutex<Vec<Error>>,
    asked: std::sync::atomic::AtomicUsize,
}

impl Refuser {
    fn new(inner: ScriptedModel, refusals: Vec<Error>) -> Arc<Refuser> {
        Arc::new(Refuser {
            inner,
            refusals: std::sync::Mutex::new(refusals),
            asked: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn asked(&self) -> usize {
        self.asked.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl ChatModel for Refuser {
    fn id(&self) -> &ripcord_core::ModelId {
        self.inner.id()
    }
    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }
    async fn chat(
        &self,
        req: &ChatRequest,
        ctx: &Context,
    ) -> ripcord_core::Result<ripcord_core::ChatResponse> {
        self.inner.chat(req, ctx).await
    }
    fn refusal(&self, _ctx: &Context) -> Option<Error> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut r = self
            .refusals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (!r.is_empty()).then(|| r.remove(0))
    }
}

#[tokio::test(start_paused = true)]
async fn a_link_that_refuses_up_front_is_skipped_without_a_call() {
    let open = || {
        Error::new(ErrorKind::CircuitOpen, "open")
            .with_provider("a", "m")
            .with_retry_after(Duration::from_millis(300))
    };
    let a = Refuser::new(
        ScriptedModel::new("a").reply("a is back"),
        vec![open(), open()],
    );
    let b = arc(ScriptedModel::new("b").reply("b"));
    let chain = Chain::builder()
        .link_arc(a.clone())
        .link_arc(b.clone())
        .build()
        .unwrap();
    let r = chat_ok(&chain, &ask()).await;
    assert_eq!(r.served_by(), "b");
    assert!(r.degraded());
    assert_eq!(r.provenance.attempts.len(), 2);
    assert_eq!(r.provenance.attempts[0].provider.as_ref(), "a");
    assert_eq!(
        r.provenance.attempts[0].error_kind,
        Some(ErrorKind::CircuitOpen)
    );
    assert_eq!((a.asked(), a.inner.calls(), b.calls()), (1, 0, 1));

    // Alone, a refusing link is waited for, then asked again and called.
    let lone = Chain::builder().link_arc(a.clone()).build().unwrap();
    let t0 = Instant::now();
    let r = chat_ok(&lone, &ask()).await;
    assert_eq!(t0.elapsed(), Duration::from_millis(300));
    assert_eq!(r.text(), "a is back");
    assert_eq!((a.asked(), a.inner.calls()), (3, 1));
}

#[tokio::test(start_paused = true)]
async fn an_up_front_refusal_that_fails_fast_stops_the_chain() {
    let bad = Error::new(ErrorKind::InvalidRequest, "refused up front");
    let a = Refuser::new(ScriptedModel::new("a").reply("a"), vec![bad]);
    let b = arc(ScriptedModel::new("b").reply("b"));
    let chain = Chain::builder()
        .link_arc(a.clone())
        .link_arc(b.clone())
        .static_reply("busy")
        .build()
        .unwrap();
    let e = chain.chat(&ask(), &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidRequest);
    assert_eq!(e.attempts().len(), 1);
    assert_eq!((a.inner.calls(), b.calls()), (0, 0));
}
