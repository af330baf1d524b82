//! Every frame kind of ConverseStream through the framer and the decoder.

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue};
use ripcord_core::stream::Collector;
use ripcord_core::{FinishReason, ToolCall};

use super::*;
use crate::test_support::usage_counts;

fn frame(headers: &[(&str, &str)], payload: &str) -> Vec<u8> {
    let mut m = Message::new(payload.as_bytes().to_vec());
    for (k, v) in headers {
        m = m.add_header(Header::new(
            k.to_string(),
            HeaderValue::String(v.to_string().into()),
        ));
    }
    let mut out = Vec::new();
    write_message_to(&m, &mut out).unwrap();
    out
}

fn event(name: &str, payload: &str) -> Vec<u8> {
    frame(
        &[
            (":event-type", name),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload,
    )
}

fn exception(name: &str, message: &str) -> Vec<u8> {
    frame(
        &[
            (":exception-type", name),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        &serde_json::json!({ "message": message }).to_string(),
    )
}

/// A whole answer: text, a tool call in two pieces, reasoning, stop, usage.
fn answer() -> Vec<Vec<u8>> {
    vec![
        event("messageStart", r#"{"p":"abcd","role":"assistant"}"#),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"Thinking about Oslo."}},"p":"ab"}"#,
        ),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"EqoBCkgIARAB"}}}"#,
        ),
        event("contentBlockStop", r#"{"contentBlockIndex":0}"#),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":1,"delta":{"text":"Let me "}}"#,
        ),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":1,"delta":{"text":"check."}}"#,
        ),
        event("contentBlockStop", r#"{"contentBlockIndex":1}"#),
        event(
            "contentBlockStart",
            r#"{"contentBlockIndex":2,"start":{"toolUse":{"toolUseId":"tooluse_1","name":"weather"}}}"#,
        ),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":2,"delta":{"toolUse":{"input":"{\"city\":"}}}"#,
        ),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":2,"delta":{"toolUse":{"input":"\"Oslo\"}"}}}"#,
        ),
        event("contentBlockStop", r#"{"contentBlockIndex":2}"#),
        event("messageStop", r#"{"stopReason":"tool_use"}"#),
        event(
            "metadata",
            r#"{"usage":{"inputTokens":25,"outputTokens":30,"totalTokens":85,"cacheReadInputTokens":20,"cacheWriteInputTokens":10},"metrics":{"latencyMs":420}}"#,
        ),
    ]
}

/// Feeds `bytes` in pieces of `piece` bytes; returns the events and the last step.
fn run(bytes: &[u8], piece: usize, json: bool) -> (Vec<StreamEvent>, Result<Step>) {
    let mut f = EventStreamFramer::new();
    let mut d = BedrockDecoder::new(JsonMode(json), None, "us.anthropic.claude".to_owned());
    let mut out = VecDeque::new();
    let mut last = Ok(Step::More);
    'outer: for chunk in bytes.chunks(piece.max(1)) {
        f.push(chunk).unwrap();
        while let Some(m) = f.next_frame() {
            last = match m {
                Ok(m) => Decoder::event(&mut d, m, &mut out),
                Err(e) => Err(e),
            };
            if !matches!(last, Ok(Step::More)) {
                break 'outer;
            }
        }
    }
    (out.into_iter().collect(), last)
}

fn collect(events: Vec<StreamEvent>) -> ripcord_core::ChatResponse {
    let mut c = Collector::new();
    for e in events {
        c.push(e);
    }
    c.finish().unwrap()
}

#[test]
fn every_event_kind_in_any_chunking() {
    let bytes: Vec<u8> = answer().concat();
    for piece in [1, 7, 64, bytes.len()] {
        let (events, last) = run(&bytes, piece, false);
        assert!(matches!(last, Ok(Step::Done)), "piece {piece}: {last:?}");
        assert!(matches!(
            events.last(),
            Some(StreamEvent::Finish {
                reason: FinishReason::ToolCalls,
                ..
            })
        ));
        let r = collect(events);
        assert_eq!(r.content, "Let me check.", "reasoning is not the answer");
        assert_eq!(
            r.reasoning,
            vec![
                ripcord_core::ReasoningBlock::thinking("Thinking about Oslo.")
                    .with_signature("EqoBCkgIARAB")
            ]
        );
        assert_eq!(
            r.tool_calls,
            vec![ToolCall::new("tooluse_1", "weather", "{\"city\":\"Oslo\"}")]
        );
        assert_eq!(usage_counts(&r.usage), (55, 20, 30));
        assert_eq!(r.model, "us.anthropic.claude");
    }
}

#[test]
fn json_mode_streams_the_forced_tool_as_text() {
    let bytes = [
        event("messageStart", r#"{"role":"assistant"}"#),
        event(
            "contentBlockStart",
            r#"{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"t","name":"json_response"}}}"#,
        ),
        event("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"n\":"}}}"#),
        event("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"toolUse":{"input":"3}"}}}"#),
        event("messageStop", r#"{"stopReason":"tool_use"}"#),
        event("metadata", r#"{"usage":{"inputTokens":1,"outputTokens":2}}"#),
    ]
    .concat();
    let (events, _) = run(&bytes, 5, true);
    let r = collect(events);
    assert_eq!(r.content, "{\"n\":3}");
    assert!(r.tool_calls.is_empty());
    assert_eq!(r.finish_reason, FinishReason::Stop);
}

#[test]
fn exception_frames_are_classified_mid_stream() {
    for (t, kind) in [
        ("throttlingException", ErrorKind::RateLimited),
        ("modelStreamErrorException", ErrorKind::ServerError),
        ("serviceUnavailableException", ErrorKind::Overloaded),
        ("validationException", ErrorKind::InvalidRequest),
        ("internalServerException", ErrorKind::ServerError),
    ] {
        let mut frames = answer();
        frames.truncate(6);
        frames.push(exception(t, "something went wrong"));
        let (events, last) = run(&frames.concat(), 13, false);
        assert_eq!(
            events.iter().filter(|e| e.is_content()).count(),
            4,
            "{t}: the reasoning (text, signature) and the text before the exception were delivered"
        );
        let e = last.unwrap_err();
        assert_eq!(e.kind(), kind, "{t}");
        assert_eq!(e.message(), "something went wrong");
    }
    let err = frame(
        &[
            (":message-type", "error"),
            (":error-code", "InternalFailure"),
            (":error-message", "An internal error occurred"),
        ],
        "",
    );
    let (_, last) = run(&err, 100, false);
    let e = last.unwrap_err();
    assert_eq!(
        (e.kind(), e.message()),
        (ErrorKind::ServerError, "An internal error occurred")
    );
}

#[test]
fn a_bad_checksum_is_an_invalid_response() {
    let mut bytes = answer().concat();
    // Flip one payload byte of the first frame: its message CRC no longer matches.
    bytes[40] ^= 0x20;
    let (events, last) = run(&bytes, 1000, false);
    assert!(events.is_empty());
    let e = last.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidResponse);
    assert!(e.message().contains("corrupt event-stream frame"), "{e}");
    // A prelude that claims an absurd length fails at once, without buffering it.
    let (_, last) = run(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0], 8, false);
    assert_eq!(last.unwrap_err().kind(), ErrorKind::InvalidResponse);
}

#[test]
fn truncation_and_clean_ends() {
    let frames = answer();
    // Cut inside a frame: a partial frame stays buffered.
    let mut bytes = frames[..5].concat();
    bytes.extend_from_slice(&frames[5][..10]);
    let mut f = EventStreamFramer::new();
    f.push(&bytes).unwrap();
    let mut n = 0;
    while let Some(m) = f.next_frame() {
        m.unwrap();
        n += 1;
    }
    assert_eq!(n, 5);
    assert!(f.has_partial());
    // Without messageStop there is no clean end.
    let mut d = BedrockDecoder::new(JsonMode(false), None, "m".into());
    let mut out = VecDeque::new();
    assert!(!d.clean_end(&mut out));
    // Everything but metadata: complete, without usage.
    let mut f = EventStreamFramer::new();
    f.push(&frames[..frames.len() - 1].concat()).unwrap();
    let mut d = BedrockDecoder::new(JsonMode(false), None, "m".into());
    let mut out = VecDeque::new();
    while let Some(m) = f.next_frame() {
        assert!(matches!(
            Decoder::event(&mut d, m.unwrap(), &mut out),
            Ok(Step::More)
        ));
    }
    assert!(!f.has_partial());
    assert!(d.clean_end(&mut out));
    assert!(matches!(
        out.back(),
        Some(StreamEvent::Finish {
            reason: FinishReason::ToolCalls,
            ..
        })
    ));
}

#[test]
fn guardrail_stop_and_malformed_events() {
    let bytes = [
        event("messageStart", r#"{"role":"assistant"}"#),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"text":"Sorry, the model cannot answer this question."}}"#,
        ),
        event("messageStop", r#"{"stopReason":"guardrail_intervened"}"#),
    ]
    .concat();
    let (_, last) = run(&bytes, 100, false);
    let e = last.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ContentFiltered);
    assert!(e.message().contains("cannot answer"), "{e}");

    let (_, last) = run(
        &event("contentBlockDelta", "{\"contentBlockIndex\":"),
        100,
        false,
    );
    match last {
        Ok(Step::Malformed(e)) => assert!(e.message().contains("contentBlockDelta"), "{e}"),
        other => panic!("expected a malformed step, got {other:?}"),
    }
    let (_, last) = run(
        &event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":99999999,"delta":{"text":"x"}}"#,
        ),
        100,
        false,
    );
    assert_eq!(last.unwrap_err().kind(), ErrorKind::InvalidResponse);
    let (_, last) = run(
        &event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":3,"delta":{"toolUse":{"input":"{}"}}}"#,
        ),
        100,
        false,
    );
    assert!(last.unwrap_err().message().contains("never started"));
}
