//! `max_batch`: concurrent answers share one session's batched decode steps, and each answer is
//! what it would have been alone (tiny random-weight model, real ONNX Runtime).
#![allow(clippy::unwrap_used)] // test helpers fail the test by panicking

mod common;

use std::time::Duration;

use futures::StreamExt;
use futures::future::join_all;
use ripcord_core::{
    CancellationToken, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, ErrorKind,
    FinishReason, StreamEvent,
};
use ripcord_local_onnx::{LocalLlama, Variant};

use common::Q;

fn model(max_batch: usize, variant: Variant) -> Option<LocalLlama> {
    let dir = common::tiny()?;
    Some(
        LocalLlama::builder(dir)
            .threads(1)
            .variant(variant)
            .max_batch(max_batch)
            .build()
            .unwrap(),
    )
}

/// Each fused variant alone (one answer at a time) and batched (four at once); none once the
/// tiny model is not prepared.
fn solo_and_batched() -> Vec<(Variant, LocalLlama, LocalLlama)> {
    [Variant::Q8, Variant::Q4]
        .into_iter()
        .map_while(|v| Some((v, model(1, v)?, model(4, v).unwrap())))
        .collect()
}

/// Different prompts (one long enough to be prefilled in several chunks), lengths, a stop
/// sequence and a seeded sampler.
fn requests(solo_answer: &str) -> Vec<ChatRequest> {
    let long = format!(
        "{} {Q}",
        "Tell me about rivers, bridges and old towns. ".repeat(12)
    );
    let chars: Vec<(usize, char)> = solo_answer.char_indices().collect();
    let (from, _) = chars[chars.len() / 2];
    let (to, _) = chars[chars.len() / 2 + 4];
    vec![
        ChatRequest::user(Q).with_max_tokens(30),
        ChatRequest::user(long).with_max_tokens(20),
        ChatRequest::user("Name three colours.").with_max_tokens(25),
        ChatRequest::user(Q)
            .with_max_tokens(30)
            .with_stop(&solo_answer[from..to]),
        ChatRequest::user("Count to five.")
            .with_max_tokens(18)
            .with_temperature(1.0)
            .with_seed(7),
    ]
}

fn same(a: &ChatResponse, b: &ChatResponse, what: &str) {
    assert_eq!(a.content, b.content, "{what}");
    assert_eq!(a.finish_reason, b.finish_reason, "{what}");
    assert_eq!(a.usage.input_tokens, b.usage.input_tokens, "{what}");
    assert_eq!(a.usage.output_tokens, b.usage.output_tokens, "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batched_answers_are_the_answers_each_gets_alone() {
    for (variant, solo, batched) in solo_and_batched() {
        let ctx = Context::new();
        let first = solo
            .chat(&ChatRequest::user(Q).with_max_tokens(30), &ctx)
            .await
            .unwrap();
        let reqs = requests(&first.content);
        let mut alone = Vec::new();
        for r in &reqs {
            alone.push(solo.chat(r, &ctx).await.unwrap());
        }
        assert_eq!(
            alone[3].finish_reason,
            FinishReason::Stop,
            "the stop sequence cut"
        );
        // All five at once: four share the batch, the fifth waits for a place and joins when
        // the first one leaves.
        let together = join_all(reqs.iter().map(|r| batched.chat(r, &ctx))).await;
        for (i, (a, b)) in alone.iter().zip(together).enumerate() {
            same(
                a,
                &b.unwrap(),
                &format!("{variant}: request {i} alone vs batched"),
            );
        }
        // Streamed too, the deltas add up to the same text.
        let streams = join_all(reqs.iter().map(|r| batched.stream(r, &ctx))).await;
        let texts = join_all(streams.into_iter().map(|s| text(s.unwrap()))).await;
        for (i, (a, t)) in alone.iter().zip(texts).enumerate() {
            assert_eq!(a.content, t, "{variant}: request {i} streamed");
        }
    }
}

/// Slots are sized for the answers, not the window: a running answer's slot holds its prompt
/// and `max_tokens`; an answer that needs a longer one grows every slot (copying the running
/// answers' keys and values across), and both answers are still what each gets alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_longer_answer_joining_grows_the_slots_and_keeps_the_running_answer() {
    for (variant, solo, batched) in solo_and_batched() {
        let ctx = Context::new();
        // Short: fits the smallest slot (256 tokens). Long: a prompt of ~400 tokens, so its
        // slot needs 512.
        let short = ChatRequest::user(Q).with_max_tokens(60);
        let long = ChatRequest::user(format!(
            "{} {Q}",
            "Tell me about rivers, bridges and old towns. ".repeat(36)
        ))
        .with_max_tokens(20);
        let short_alone = solo.chat(&short, &ctx).await.unwrap();
        let long_alone = solo.chat(&long, &ctx).await.unwrap();
        assert!(
            long_alone.usage.input_tokens > 256,
            "the long prompt must need a bigger slot: {:?}",
            long_alone.usage
        );

        let mut running = batched.stream(&short, &ctx).await.unwrap();
        let mut short_text = String::new();
        // The short answer is in its slot and decoding before the long one arrives.
        while short_text.is_empty() {
            if let StreamEvent::TextDelta { text } = running.next().await.unwrap().unwrap() {
                short_text.push_str(&text);
            }
        }
        let (long_batched, rest) = tokio::join!(batched.chat(&long, &ctx), text(running));
        short_text.push_str(&rest);
        assert_eq!(
            short_text, short_alone.content,
            "{variant}: the running answer"
        );
        same(
            &long_alone,
            &long_batched.unwrap(),
            &format!("{variant}: the answer that grew the slots"),
        );
    }
}

async fn text(mut s: ChatStream) -> String {
    let mut out = String::new();
    while let Some(ev) = s.next().await {
        if let StreamEvent::TextDelta { text } = ev.unwrap() {
            out.push_str(&text);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_a_dropped_and_a_slow_answer_do_not_disturb_the_others() {
    let Some(solo) = model(1, Variant::Q8) else {
        return;
    };
    let dir = common::tiny().unwrap();
    let batched = LocalLlama::builder(dir)
        .threads(1)
        .max_batch(4)
        .stream_buffer(1)
        .build()
        .unwrap();
    let ctx = Context::new();
    let short = ChatRequest::user("Name three colours.").with_max_tokens(24);
    let expected = solo.chat(&short, &ctx).await.unwrap();
    let long = ChatRequest::user(Q).with_max_tokens(470);

    // A: cancelled after its first text. B: dropped after its first text. C: never read.
    let token = CancellationToken::new();
    let cancel_ctx = Context::new().with_cancellation(token.clone());
    let mut a = batched.stream(&long, &cancel_ctx).await.unwrap();
    let mut b = batched.stream(&long, &ctx).await.unwrap();
    let mut slow = batched.stream(&long, &ctx).await.unwrap();
    assert!(a.next().await.unwrap().unwrap().is_content());
    assert!(b.next().await.unwrap().unwrap().is_content());
    assert!(slow.next().await.unwrap().unwrap().is_content());
    token.cancel();
    drop(b);
    // D runs to the end while C's reader sits behind a full buffer.
    let d = tokio::time::timeout(Duration::from_secs(60), batched.chat(&short, &ctx))
        .await
        .unwrap()
        .unwrap();
    same(
        &expected,
        &d,
        "beside a cancelled, a dropped and a slow answer",
    );
    let mut after = 0;
    let last = loop {
        match a.next().await {
            Some(Ok(_)) => after += 1,
            Some(Err(e)) => break e,
            None => panic!("the cancelled stream ended without an error"),
        }
    };
    assert_eq!(last.kind(), ErrorKind::Cancelled);
    assert!(after < 40, "{after} events after cancel");
    // The slow reader's answer is intact once it reads.
    let rest = text(slow).await;
    assert!(!rest.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_deadline_is_per_answer() {
    let Some(batched) = model(2, Variant::Q8) else {
        return;
    };
    let short = ChatRequest::user(Q).with_max_tokens(12);
    let long = ChatRequest::user(Q).with_max_tokens(470);
    let tight = Context::new().with_timeout(Duration::from_millis(40));
    let free = Context::new();
    let (cut, whole) = tokio::join!(
        async {
            match batched.stream(&long, &tight).await {
                Ok(s) => ripcord_core::stream::collect(s).await,
                Err(e) => Err(e),
            }
        },
        batched.chat(&short, &free)
    );
    assert_eq!(cut.unwrap_err().kind(), ErrorKind::DeadlineExceeded);
    assert_eq!(whole.unwrap().usage.output_tokens, 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_batch_bounds_the_answers_and_is_refused_where_it_cannot_work() {
    let Some(dir) = common::tiny() else { return };
    let two = LocalLlama::builder(&dir)
        .threads(1)
        .max_batch(2)
        .stream_buffer(1)
        .build()
        .unwrap();
    let long = ChatRequest::user(Q).with_max_tokens(470);
    let mut h1 = two.stream(&long, &Context::new()).await.unwrap();
    let mut h2 = two.stream(&long, &Context::new()).await.unwrap();
    assert!(h1.next().await.unwrap().unwrap().is_content());
    assert!(h2.next().await.unwrap().unwrap().is_content());
    // Both places are taken: a third call waits (here: until its deadline).
    common::assert_waits_out_its_deadline(&two).await;
    drop(h1);
    let r = common::chat_within_a_minute(&two, 2).await;
    assert_eq!(r.usage.output_tokens, 2);
    drop(h2);

    // The plain graph grows its cache per answer: it cannot batch.
    let e = LocalLlama::builder(&dir)
        .variant(Variant::Fp32)
        .max_batch(2)
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ModelNotFound);
    assert!(
        e.message().contains("max_batch = 2 needs a fused variant"),
        "{e}"
    );
    assert!(e.message().contains("model.onnx"), "{e}");
    let e = LocalLlama::builder(&dir)
        .max_batch(2)
        .max_sessions(2)
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidRequest);
    assert!(e.message().contains("max_sessions = 2"), "{e}");
    let e = LocalLlama::builder(&dir).max_batch(0).build().unwrap_err();
    assert!(e.message().contains("max_batch"), "{e}");
}
