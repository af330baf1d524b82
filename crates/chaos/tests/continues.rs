//! Token streams and continuing replies over real HTTP: a reply streamed one word per delta is
//! cut after exactly N words, and a continuing reply answers a continuation request (assistant
//! prefill or an instruction after the delivered text) with only the rest of its text.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fail the test by panicking

mod support;

use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Reply, Wire};
use serde_json::{Value, json};
use support::*;

const ANSWER: &str = "one two three four five six seven eight nine ten";

async fn fake(wire: Wire) -> FakeVendor {
    let reply = Reply::words(ANSWER).continuing();
    FakeVendor::start_with(wire, FakeOptions::default().with_reply(reply))
        .await
        .unwrap()
}

/// The text deltas of a stream, in order.
async fn deltas(fake: &FakeVendor, body: Value) -> Vec<String> {
    let resp = client()
        .post(chat_url(fake))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (events, _) = SseReader::new(resp).collect().await;
    events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .filter_map(|e| {
            let v = e.json();
            let t = match fake.wire() {
                Wire::OpenAi => v["choices"][0]["delta"]["content"].as_str(),
                _ => v["delta"]["text"].as_str(),
            };
            // OpenAI's role chunk carries an empty content.
            t.filter(|t| !t.is_empty()).map(str::to_owned)
        })
        .collect()
}

fn with_messages(wire: Wire, messages: Value) -> Value {
    let mut b = chat_body(wire, true);
    b["messages"] = messages;
    b
}

#[tokio::test]
async fn a_word_stream_sends_one_delta_per_word_and_cuts_after_n_words() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let f = fake(wire).await;
        let whole = deltas(&f, chat_body(wire, true)).await;
        assert_eq!(whole.len(), 10, "{wire:?}: {whole:?}");
        assert_eq!(whole[0], "one");
        assert_eq!(whole[1], " two");
        assert_eq!(whole.concat(), ANSWER);
        f.set_script(ripcord_chaos::Script::Always(Behavior::TruncatedStream {
            after_chunks: 4,
        }));
        let cut = deltas(&f, chat_body(wire, true)).await;
        assert_eq!(cut.concat(), "one two three four", "{wire:?}");
    }
}

#[tokio::test]
async fn a_continuing_reply_streams_only_the_rest_after_prefill_or_instruction() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let f = fake(wire).await;
        // Prefill: the delivered text is the last message (trailing whitespace left out).
        let prefill = with_messages(
            wire,
            json!([
                {"role": "user", "content": "count"},
                {"role": "assistant", "content": "one two three four"},
            ]),
        );
        let rest = deltas(&f, prefill).await;
        assert_eq!(rest[0], " five", "{wire:?}");
        assert_eq!(rest.concat(), " five six seven eight nine ten");
        // Instruction: the delivered text, then a user turn asking to go on (content parts).
        let instruction = with_messages(
            wire,
            json!([
                {"role": "user", "content": "count"},
                {"role": "assistant", "content": [{"type": "text", "text": "one two three four five six "}]},
                {"role": "user", "content": "Continue exactly where it stops."},
            ]),
        );
        let rest = deltas(&f, instruction).await;
        assert_eq!(rest.concat(), " seven eight nine ten", "{wire:?}");
        // An assistant turn that is not the answer's start gets the whole answer.
        let other = with_messages(
            wire,
            json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "Hello there."},
                {"role": "user", "content": "count"},
            ]),
        );
        assert_eq!(deltas(&f, other).await.concat(), ANSWER, "{wire:?}");
    }
}

#[tokio::test]
async fn a_reply_that_does_not_continue_ignores_the_assistant_turn() {
    let f = FakeVendor::start_with(
        Wire::OpenAi,
        FakeOptions::default().with_reply(Reply::words(ANSWER)),
    )
    .await
    .unwrap();
    let prefill = with_messages(
        Wire::OpenAi,
        json!([
            {"role": "user", "content": "count"},
            {"role": "assistant", "content": "one two"},
        ]),
    );
    assert_eq!(deltas(&f, prefill).await.concat(), ANSWER);
}
