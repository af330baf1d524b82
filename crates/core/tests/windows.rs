//! Context windows: a link whose window is unknown is tried, not judged; the window a vendor
//! states in its context-length error is what the chain knows afterwards; every window skip
//! says both numbers; `trim = oldest` retries the link that said "too long" with a trimmed
//! conversation. On tokio's paused clock.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::chain::Trim;
use ripcord_core::testing::{ScriptedModel, conversation};
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ContextLimit, Error, ErrorKind, SkipReason,
};

use support::{arc, chain_of, chat_ok};

/// A model none of the tables knows: the vendor default window, marked a guess.
fn unknown(name: &str) -> ScriptedModel {
    ScriptedModel::new(name)
        .with_caps(Capabilities::new(128_000, 4_096).with_context_window_known(false))
}

/// "This model's maximum context length is `window` tokens", as an adapter reports it.
fn too_long(window: u32, counted: Option<u32>) -> Error {
    let limit = ContextLimit::new(window);
    let limit = match counted {
        Some(n) => limit.with_prompt_tokens(n),
        None => limit,
    };
    Error::new(
        ErrorKind::ContextLengthExceeded,
        format!("This model's maximum context length is {window} tokens"),
    )
    .with_context_limit(limit)
}

/// A prompt of roughly `tokens` tokens in one user message.
fn prompt_of(tokens: usize) -> ChatRequest {
    ChatRequest::user("word ".repeat(tokens))
}

#[tokio::test(start_paused = true)]
async fn a_prompt_too_long_for_an_unknown_primary_falls_back_to_an_unknown_backup() {
    // Both models are missing from the tables: before, both got the same guessed window, the
    // backup was judged unable to take what the primary refused and skipped — silently.
    let a = arc(unknown("a").fail_with(too_long(8_192, Some(10_300)), Duration::ZERO));
    let b = arc(unknown("b").reply("from b"));
    let chain = chain_of(&[&a, &b]).build().unwrap();
    let r = chat_ok(&chain, &prompt_of(10_000)).await;
    assert_eq!(r.served_by(), "b");
    assert!(
        r.provenance.skipped.is_empty(),
        "{:?}",
        r.provenance.skipped
    );
    assert_eq!(
        r.provenance.attempts[0].error_kind,
        Some(ErrorKind::ContextLengthExceeded)
    );
}

#[tokio::test(start_paused = true)]
async fn the_stated_window_is_learned_for_later_calls_and_skips_say_both_numbers() {
    let a = arc(unknown("a").fail_with(too_long(8_192, None), Duration::ZERO));
    let b = arc(unknown("b").reply("from b"));
    let chain = chain_of(&[&a, &b]).build().unwrap();
    assert_eq!(
        chain.link_window("a"),
        None,
        "unknown until the vendor says"
    );
    chat_ok(&chain, &prompt_of(10_000)).await;
    assert_eq!(chain.link_window("a"), Some(8_192));
    assert_eq!(a.calls(), 1);

    // The next long prompt is judged by the stated window: no second refused call.
    let r = chat_ok(&chain, &prompt_of(12_000)).await;
    assert_eq!(r.served_by(), "b");
    assert_eq!(a.calls(), 1);
    let skip = &r.provenance.skipped[0];
    assert_eq!(skip.reason, SkipReason::ContextWindow);
    assert_eq!(&*skip.provider, "a");
    assert_eq!(skip.window, Some(8_192));
    assert!(skip.prompt_tokens.is_some_and(|p| p > 8_192), "{skip:?}");

    // A short prompt still goes to the primary.
    let a2 = arc(unknown("a2")
        .fail_with(too_long(8_192, None), Duration::ZERO)
        .reply("short ok"));
    let chain = chain_of(&[&a2, &b]).build().unwrap();
    chat_ok(&chain, &prompt_of(10_000)).await;
    assert_eq!(chat_ok(&chain, &prompt_of(10)).await.served_by(), "a2");
}

#[tokio::test(start_paused = true)]
async fn a_known_window_too_small_is_skipped_with_both_numbers_also_when_the_call_fails() {
    let small = arc(ScriptedModel::new("small").with_caps(Capabilities::new(1_000, 500)));
    let chain = chain_of(&[&small]).build().unwrap();
    let e = chain
        .chat(
            &prompt_of(5_000).with_max_tokens(200),
            &ripcord_core::Context::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(small.calls(), 0);
    let skip = &e.skipped()[0];
    assert_eq!(skip.reason, SkipReason::ContextWindow);
    assert_eq!(skip.window, Some(1_000));
    assert_eq!(skip.output_tokens, Some(200));
    assert!(skip.prompt_tokens.is_some_and(|p| p > 1_000));
}

#[tokio::test(start_paused = true)]
async fn a_configured_window_is_judged_and_an_unknown_one_is_tried() {
    // The same guessed number, once marked known (configured) and once not.
    let known = arc(ScriptedModel::new("known").with_caps(Capabilities::new(4_096, 512)));
    let guess = arc(ScriptedModel::new("guess")
        .with_caps(Capabilities::new(4_096, 512).with_context_window_known(false)));
    let chain = chain_of(&[&known, &guess]).build().unwrap();
    let r = chat_ok(&chain, &prompt_of(8_000)).await;
    assert_eq!(r.served_by(), "guess");
    assert_eq!(known.calls(), 0);
    assert_eq!(r.provenance.skipped.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn trim_oldest_retries_the_link_that_said_too_long_with_a_trimmed_conversation() {
    // The vendor counts more tokens than ripcord estimates: the trim must fit its count.
    let req = conversation(10, 400);
    let estimate = ripcord_core::tokens::estimate_request(&req);
    let a = arc(unknown("a")
        .fail_with(
            too_long(4_000, Some(estimate + estimate / 5)),
            Duration::ZERO,
        )
        .reply("trimmed answer"));
    let b = arc(unknown("b").reply("from b"));
    let chain = chain_of(&[&a, &b]).trim(Trim::Oldest).build().unwrap();
    let r = chat_ok(&chain, &req).await;
    assert_eq!(r.served_by(), "a");
    assert_eq!(a.calls(), 2);
    assert_eq!(b.calls(), 0);
    assert!(r.provenance.trimmed_messages > 0);
    // Trimmed so that ripcord's estimate, scaled by the vendor's count, fits 4 000.
    let kept = req.messages.len() - r.provenance.trimmed_messages as usize;
    assert!(kept >= 2 && kept < req.messages.len());
}

#[tokio::test(start_paused = true)]
async fn without_trim_or_without_a_stated_window_the_chain_moves_on() {
    let req = conversation(10, 400);
    let bare = || {
        Error::new(
            ErrorKind::ContextLengthExceeded,
            "Input token length too long",
        )
    };
    let a = arc(unknown("a")
        .fail_with(bare(), Duration::ZERO)
        .reply("never"));
    let b = arc(unknown("b").reply("from b"));
    let chain = chain_of(&[&a, &b]).trim(Trim::Oldest).build().unwrap();
    assert_eq!(chat_ok(&chain, &req).await.served_by(), "b");
    assert_eq!(a.calls(), 1);
    assert_eq!(
        chain.link_window("a"),
        None,
        "nothing stated, nothing learned"
    );
    let _ = Arc::clone(&a);
}
