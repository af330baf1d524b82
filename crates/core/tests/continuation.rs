//! `StreamPolicy::Continue`: a committed stream that is cut, stalls past its idle limit or
//! fails in-band goes on on the next link from the delivered text, and the consumer sees one
//! answer with one finish reason. On tokio's paused clock, with scripted models.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fail the test by panicking

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ripcord_core::chain::continuation::CONTINUE_INSTRUCTION;
use ripcord_core::testing::{ScriptedModel, StreamItem, text_stream};
use ripcord_core::{
    Capabilities, Chain, ChatModel, ChatRequest, ChatStream, Context, ContinuationMode, Error,
    ErrorKind, FinishReason, Provenance, Role, StreamEvent, StreamPolicy, TimeoutPhase, Usage,
};
use tokio::time::Instant;

use support::{arc, chain_of, ms};

fn ask() -> ChatRequest {
    ChatRequest::user("Why is the sky blue?")
}

/// `n` words of a first answer, one event each, `gap` apart.
fn words(n: usize, gap: Duration) -> (String, Vec<(Duration, StreamItem)>) {
    let mut text = String::new();
    let mut items = Vec::new();
    for i in 0..n {
        let w = format!("w{i} ");
        text.push_str(&w);
        items.push((gap, StreamItem::Event(StreamEvent::text(w))));
    }
    (text, items)
}

/// Every event with the time it arrived, since `t0`.
async fn drain(mut s: ChatStream, t0: Instant) -> Vec<(Duration, Result<StreamEvent, Error>)> {
    let mut out = Vec::new();
    while let Some(ev) = s.next().await {
        out.push((t0.elapsed(), ev));
    }
    out
}

fn text(events: &[(Duration, Result<StreamEvent, Error>)]) -> String {
    events
        .iter()
        .filter_map(|(_, e)| e.as_ref().ok()?.text_delta())
        .collect()
}

fn finishes(events: &[(Duration, Result<StreamEvent, Error>)]) -> Vec<FinishReason> {
    events
        .iter()
        .filter_map(|(_, e)| match e {
            Ok(StreamEvent::Finish { reason, .. }) => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

fn last_provenance(events: &[(Duration, Result<StreamEvent, Error>)]) -> Provenance {
    events
        .iter()
        .rev()
        .find_map(|(_, e)| match e {
            Ok(StreamEvent::Provenance { provenance }) => Some((**provenance).clone()),
            _ => None,
        })
        .unwrap()
}

/// Every event of one stream of `ask()` through `chain`, timed from its opening.
async fn events_of(chain: &Chain) -> Vec<(Duration, Result<StreamEvent, Error>)> {
    let s = chain.stream(&ask(), &Context::new()).await.unwrap();
    drain(s, Instant::now()).await
}

/// [`events_of`] the [`continuing`] chain of `a` and `b`.
async fn continued(
    a: &Arc<ScriptedModel>,
    b: &Arc<ScriptedModel>,
) -> Vec<(Duration, Result<StreamEvent, Error>)> {
    events_of(&continuing(a, b)).await
}

fn continuing(a: &Arc<ScriptedModel>, b: &Arc<ScriptedModel>) -> Chain {
    chain_of(&[a, b])
        .stream_policy(StreamPolicy::Continue)
        .build()
        .unwrap()
}

/// The three ways a committed stream fails, each after its first words.
enum Cut {
    /// The connection closes without a finish event, after 40 words.
    Truncated,
    /// 20 words, then the link's idle limit (5 s of silence) ends it.
    Stalled,
    /// An in-band error event (Anthropic's `overloaded_error`) after 30 words.
    InBand,
}

fn first_answer(cut: &Cut) -> (String, Vec<(Duration, StreamItem)>) {
    match cut {
        Cut::Truncated => words(40, ms(10)),
        Cut::Stalled => {
            let (t, mut items) = words(20, ms(10));
            items.push((
                Duration::from_secs(5),
                StreamItem::Error(Error::timeout(TimeoutPhase::StreamIdle, "no event for 5 s")),
            ));
            (t, items)
        }
        Cut::InBand => {
            let (t, mut items) = words(30, ms(10));
            items.push((
                ms(10),
                StreamItem::Error(Error::new(ErrorKind::Overloaded, "overloaded_error")),
            ));
            (t, items)
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_cut_a_stall_and_an_in_band_error_are_each_continued_on_the_next_link() {
    for cut in [Cut::Truncated, Cut::Stalled, Cut::InBand] {
        let (delivered, items) = first_answer(&cut);
        let a = arc(ScriptedModel::new("a").stream_items(items));
        let b = arc(ScriptedModel::new("b")
            .stream_items(text_stream(&["and the rest", " of the answer."], ms(10))));
        let chain = continuing(&a, &b);
        let t0 = Instant::now();
        let events = drain(chain.stream(&ask(), &Context::new()).await.unwrap(), t0).await;
        assert!(
            events.iter().all(|(_, e)| e.is_ok()),
            "no error reaches the consumer"
        );
        assert!(
            !events
                .iter()
                .any(|(_, e)| matches!(e, Ok(StreamEvent::Restarted { .. }))),
            "nothing to discard"
        );
        // One answer: the delivered text, then only the continuation; one finish reason.
        assert_eq!(
            text(&events),
            format!("{delivered}and the rest of the answer.")
        );
        assert_eq!(finishes(&events), [FinishReason::Stop]);
        // The continuing link saw the delivered text and the instruction.
        let asked = &b.requests()[0];
        let n = asked.messages.len();
        assert_eq!(asked.messages[n - 2].role, Role::Assistant);
        assert_eq!(asked.messages[n - 2].text(), delivered);
        assert_eq!(asked.messages[n - 1].text(), CONTINUE_INSTRUCTION);
        // Recorded: who continued, from where, how.
        let p = last_provenance(&events);
        assert_eq!(p.served_by.as_deref(), Some("a"));
        assert_eq!(p.continued_by.as_deref(), Some("b"));
        assert!(p.degraded);
        let c = &p.continuations[0];
        assert_eq!((&*c.from, &*c.by), ("a", "b"));
        assert_eq!(c.offset, delivered.len() as u64);
        assert_eq!(c.mode, ContinuationMode::Instruction);
        assert_eq!(p.attempts.len(), 2);
        assert!(p.attempts[0].error_kind.is_some());
        assert!(p.attempts[1].succeeded());
    }
}

#[tokio::test(start_paused = true)]
async fn time_to_first_token_is_the_primarys() {
    let (_, mut items) = words(40, ms(5));
    items[0].0 = ms(120);
    let a = arc(ScriptedModel::new("a").stream_items(items));
    let b = arc(ScriptedModel::new("b").stream_items(text_stream(&["rest."], ms(300))));
    let chain = continuing(&a, &b);
    let t0 = Instant::now();
    let events = drain(chain.stream(&ask(), &Context::new()).await.unwrap(), t0).await;
    let first = events
        .iter()
        .find(|(_, e)| matches!(e, Ok(ev) if ev.is_content()))
        .unwrap()
        .0;
    assert_eq!(
        first,
        ms(120),
        "no hold-back: the first token comes when the primary sends it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_prefill_link_continues_its_own_message_and_a_refused_prefill_falls_to_the_instruction() {
    let prefill = Capabilities::new(128_000, 4_096).with_assistant_prefill(true);
    let (delivered, items) = words(10, ms(5));
    let a = arc(ScriptedModel::new("a").stream_items(items.clone()));
    let b = arc(ScriptedModel::new("b")
        .with_caps(prefill.clone())
        .stream_items(text_stream(&["more."], ms(5))));
    let events = continued(&a, &b).await;
    assert_eq!(text(&events), format!("{delivered}more."));
    let asked = b.requests().pop().unwrap();
    let last = asked.messages.last().unwrap();
    assert_eq!(last.role, Role::Assistant);
    // Prefill without the trailing space (Anthropic refuses a final message ending in one).
    assert_eq!(last.text(), delivered.trim_end());
    assert_eq!(
        last_provenance(&events).continuations[0].mode,
        ContinuationMode::Prefill
    );

    // The same link refusing the prefill is asked again with the instruction.
    let a = arc(ScriptedModel::new("a").stream_items(items));
    let b = arc(ScriptedModel::new("b")
        .with_caps(prefill)
        .fail(ErrorKind::InvalidRequest)
        .stream_items(text_stream(&["more."], ms(5))));
    let events = continued(&a, &b).await;
    assert_eq!(text(&events), format!("{delivered}more."));
    assert_eq!(b.calls(), 2);
    assert_eq!(
        b.requests()[1].messages.last().unwrap().text(),
        CONTINUE_INSTRUCTION
    );
    assert_eq!(
        last_provenance(&events).continuations[0].mode,
        ContinuationMode::Instruction
    );
}

#[tokio::test(start_paused = true)]
async fn a_continuation_that_repeats_the_end_of_the_delivered_text_is_trimmed() {
    let first: Vec<(Duration, StreamItem)> = [
        "The sky is blue ",
        "because air scatters ",
        "short wavelengths",
    ]
    .iter()
    .map(|t| (ms(5), StreamItem::Event(StreamEvent::text(*t))))
    .collect();
    let a = arc(ScriptedModel::new("a").stream_items(first));
    let b = arc(ScriptedModel::new("b").stream_items(text_stream(
        &[
            "air scatters short",
            " wavelengths more",
            " than long ones.",
        ],
        ms(5),
    )));
    let events = continued(&a, &b).await;
    assert_eq!(
        text(&events),
        "The sky is blue because air scatters short wavelengths more than long ones."
    );
    let c = &last_provenance(&events).continuations[0];
    assert_eq!(
        c.overlap_trimmed,
        "air scatters short wavelengths".len() as u64
    );
}

#[tokio::test(start_paused = true)]
async fn tool_call_streams_and_requests_not_retry_safe_are_never_continued() {
    let tool = vec![
        (
            ms(5),
            StreamItem::Event(StreamEvent::ToolCallDelta {
                index: 0,
                id: Some("call_1".into()),
                name: Some("lookup".into()),
                arguments: "{\"q\":".into(),
            }),
        ),
        (
            ms(5),
            StreamItem::Error(Error::new(ErrorKind::Network, "reset")),
        ),
    ];
    let (_, text_items) = words(5, ms(5));
    let cases: [(Vec<(Duration, StreamItem)>, Context); 2] = [
        (tool, Context::new()),
        (text_items, Context::new().with_retry_safe(false)),
    ];
    for (items, ctx) in cases {
        let a = arc(ScriptedModel::new("a").stream_items(items));
        let b = arc(ScriptedModel::new("b").reply("never"));
        let events = drain(
            continuing(&a, &b).stream(&ask(), &ctx).await.unwrap(),
            Instant::now(),
        )
        .await;
        assert!(
            matches!(events.last(), Some((_, Err(_)))),
            "ends with the error"
        );
        assert_eq!(b.calls(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn with_no_link_left_the_stream_ends_with_its_error_not_a_static_reply() {
    let (_, items) = words(5, ms(5));
    let a = arc(ScriptedModel::new("a").stream_items(items));
    let chain = chain_of(&[&a])
        .stream_policy(StreamPolicy::Continue)
        .static_reply("busy")
        .build()
        .unwrap();
    let events = events_of(&chain).await;
    let (_, last) = events.last().unwrap();
    assert_eq!(
        last.as_ref().unwrap_err().kind(),
        ErrorKind::InvalidResponse
    );
    assert!(!text(&events).contains("busy"));
}

#[tokio::test(start_paused = true)]
async fn a_continuation_long_after_the_deadline_gets_a_fresh_budget() {
    // The chain's deadline (2 s) bounds the time to first content; the cut comes at 10 s.
    let mut items = vec![(ms(5), StreamItem::Event(StreamEvent::text("long ")))];
    items.push((
        Duration::from_secs(10),
        StreamItem::Error(Error::new(ErrorKind::Network, "reset")),
    ));
    let a = arc(ScriptedModel::new("a").stream_items(items));
    let b = arc(ScriptedModel::new("b").stream_items(text_stream(&["answer."], ms(5))));
    let chain = chain_of(&[&a, &b])
        .stream_policy(StreamPolicy::Continue)
        .deadline(Duration::from_secs(2))
        .build()
        .unwrap();
    let events = events_of(&chain).await;
    assert_eq!(text(&events), "long answer.", "{events:?}");
    let _ = Usage::default();
}
