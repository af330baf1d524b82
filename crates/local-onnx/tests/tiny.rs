//! `LocalLlama` end to end on the tiny random-weight model (real ONNX Runtime, real tokenizer,
//! real template; nonsense answers by design, milliseconds per token).
#![allow(clippy::unwrap_used)] // test helpers fail the test by panicking

mod common;

use std::time::Duration;

use futures::StreamExt;
use ripcord_core::testing::ScriptedModel;
use ripcord_core::{
    CancellationToken, Chain, ChatModel, ChatRequest, ChatStream, Context, ErrorKind, FinishReason,
    ImageSource, Locality, Message, Price, StreamEvent, ToolSpec,
};
use ripcord_local_onnx::{LocalLlama, Variant};

use common::Q;

fn tiny_model() -> Option<LocalLlama> {
    let dir = common::tiny()?;
    Some(LocalLlama::builder(dir).threads(1).build().unwrap())
}

/// Every event of a stream, failing the test on an error event.
async fn events(mut s: ChatStream) -> Vec<StreamEvent> {
    let mut out = Vec::new();
    while let Some(ev) = s.next().await {
        out.push(ev.unwrap());
    }
    out
}

fn deltas(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(StreamEvent::text_delta)
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_answers_with_usage_id_and_local_free_capabilities() {
    let Some(m) = tiny_model() else { return };
    assert_eq!(m.id().name.as_ref(), "local");
    assert_eq!(m.id().model.as_ref(), "tiny-llama");
    let caps = m.capabilities();
    assert_eq!(caps.locality, Locality::Local);
    assert_eq!(caps.price, Some(Price::FREE));
    assert_eq!(caps.context_window, 512);
    assert!(caps.streaming && !caps.tools && !caps.vision);
    assert!(m.is_loaded());

    let r = m
        .chat(&ChatRequest::user(Q).with_max_tokens(20), &Context::new())
        .await
        .unwrap();
    assert!(!r.text().trim().is_empty());
    assert_eq!(r.finish_reason, FinishReason::Length);
    assert_eq!(r.usage.output_tokens, 20);
    // SmolLM2's template adds its default system prompt: 37 tokens in all.
    assert_eq!(r.usage.input_tokens, 37);
    assert_eq!(r.usage.cost_usd, Some(0.0));
    assert_eq!(r.model, "tiny-llama");
    let named = LocalLlama::builder(m.dir()).name("backup").build().unwrap();
    assert_eq!(named.id().name.as_ref(), "backup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_deltas_are_whole_characters_and_add_up_to_the_chat_answer() {
    let Some(m) = tiny_model() else { return };
    let req = ChatRequest::user(Q).with_max_tokens(120);
    let full = m.chat(&req, &Context::new()).await.unwrap();
    let ev = events(m.stream(&req, &Context::new()).await.unwrap()).await;
    let parts = deltas(&ev);
    assert!(parts.len() > 20, "{} deltas", parts.len());
    assert_eq!(parts.concat(), full.content);
    if !full.content.contains('\u{FFFD}') {
        assert!(parts.iter().all(|p| !p.contains('\u{FFFD}')));
    }
    assert!(matches!(ev[ev.len() - 2], StreamEvent::Usage { .. }));
    assert!(matches!(
        ev[ev.len() - 1],
        StreamEvent::Finish {
            reason: FinishReason::Length,
            ..
        }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greedy_is_deterministic_and_a_seed_makes_sampling_reproducible() {
    let Some(m) = tiny_model() else { return };
    let ctx = Context::new();
    let greedy = ChatRequest::user(Q).with_max_tokens(24);
    let a = m.chat(&greedy, &ctx).await.unwrap().content;
    assert_eq!(a, m.chat(&greedy, &ctx).await.unwrap().content);

    let sampled = |seed| {
        ChatRequest::user(Q)
            .with_max_tokens(24)
            .with_temperature(1.0)
            .with_seed(seed)
    };
    let s1 = m.chat(&sampled(1), &ctx).await.unwrap().content;
    assert_eq!(s1, m.chat(&sampled(1), &ctx).await.unwrap().content);
    let s2 = m.chat(&sampled(2), &ctx).await.unwrap().content;
    assert_ne!(s1, s2);
    assert_ne!(s1, a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_sequence_cuts_the_answer_right_before_it() {
    let Some(m) = tiny_model() else { return };
    let ctx = Context::new();
    let full = m
        .chat(&ChatRequest::user(Q).with_max_tokens(40), &ctx)
        .await
        .unwrap()
        .content;
    // A stop sequence from the middle of the answer, crossing token boundaries.
    let chars: Vec<(usize, char)> = full.char_indices().collect();
    assert!(chars.len() > 40, "{full:?}");
    let (from, _) = chars[chars.len() / 2];
    let (to, _) = chars[chars.len() / 2 + 5];
    let stop = &full[from..to];
    let at = full.find(stop).unwrap();

    let req = ChatRequest::user(Q).with_max_tokens(40).with_stop(stop);
    let cut = m.chat(&req, &ctx).await.unwrap();
    assert_eq!(cut.content, full[..at]);
    assert_eq!(cut.finish_reason, FinishReason::Stop);
    assert!(cut.usage.output_tokens < 40);
    // Streamed, no delta ever shows a piece of the stop sequence.
    let ev = events(m.stream(&req, &ctx).await.unwrap()).await;
    assert_eq!(deltas(&ev).concat(), full[..at]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_window_is_enforced() {
    let Some(dir) = common::tiny() else { return };
    let m = LocalLlama::builder(&dir).build().unwrap();
    let e = m
        .chat(&ChatRequest::user(Q).with_max_tokens(500), &Context::new())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ContextLengthExceeded);
    assert!(
        e.message().contains("37 tokens") && e.message().contains("512"),
        "{e}"
    );
    assert_eq!(e.provider(), Some("local"));
    m.chat(&ChatRequest::user(Q).with_max_tokens(475), &Context::new())
        .await
        .unwrap();

    // A smaller window: the default answer length shrinks to what fits.
    let small = LocalLlama::builder(&dir)
        .context_window(48)
        .build()
        .unwrap();
    assert_eq!(small.capabilities().context_window, 48);
    let r = small
        .chat(&ChatRequest::user(Q), &Context::new())
        .await
        .unwrap();
    assert_eq!(r.usage.output_tokens, 48 - 37);
    assert_eq!(r.finish_reason, FinishReason::Length);
    let long = "word ".repeat(40);
    let e = small
        .chat(&ChatRequest::user(long), &Context::new())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ContextLengthExceeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_mid_stream_ends_it_and_frees_the_session() {
    let Some(m) = tiny_model() else { return };
    let token = CancellationToken::new();
    let ctx = Context::new().with_cancellation(token.clone());
    let mut s = m
        .stream(&ChatRequest::user(Q).with_max_tokens(470), &ctx)
        .await
        .unwrap();
    let first = s.next().await.unwrap().unwrap();
    assert!(first.is_content());
    token.cancel();
    let mut after = Vec::new();
    while let Some(ev) = s.next().await {
        after.push(ev);
    }
    let last = after.pop().unwrap();
    assert_eq!(last.unwrap_err().kind(), ErrorKind::Cancelled);
    assert!(after.len() < 40, "{} events after cancel", after.len());
    // One session: the next call gets it.
    let r = common::chat_within_a_minute(&m, 4).await;
    assert_eq!(r.usage.output_tokens, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_stops_generation_and_frees_the_session() {
    let Some(m) = tiny_model() else { return };
    let mut s = m
        .stream(&ChatRequest::user(Q).with_max_tokens(470), &Context::new())
        .await
        .unwrap();
    assert!(s.next().await.unwrap().unwrap().is_content());
    drop(s);
    let r = common::chat_within_a_minute(&m, 4).await;
    assert_eq!(r.usage.output_tokens, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_stops_a_long_answer() {
    let Some(m) = tiny_model() else { return };
    let ctx = Context::new().with_timeout(Duration::from_millis(30));
    let res = match m
        .stream(&ChatRequest::user(Q).with_max_tokens(470), &ctx)
        .await
    {
        Ok(s) => ripcord_core::stream::collect(s).await,
        Err(e) => Err(e),
    };
    assert_eq!(res.unwrap_err().kind(), ErrorKind::DeadlineExceeded);
}

/// A model of `sessions` sessions, and a stream of `req` on it holding one of them (its first
/// text read, its buffer of one full).
async fn holding_a_session(
    dir: &std::path::Path,
    sessions: usize,
    req: &ChatRequest,
) -> (LocalLlama, ChatStream) {
    let m = LocalLlama::builder(dir)
        .max_sessions(sessions)
        .stream_buffer(1)
        .build()
        .unwrap();
    let mut held = m.stream(req, &Context::new()).await.unwrap();
    assert!(held.next().await.unwrap().unwrap().is_content());
    (m, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_answers_are_bounded_by_max_sessions() {
    let Some(dir) = common::tiny() else { return };
    let req = ChatRequest::user(Q).with_max_tokens(470);
    // One session: while a stream holds it, another call waits (here: until its deadline).
    let (one, held) = holding_a_session(&dir, 1, &req).await;
    common::assert_waits_out_its_deadline(&one).await;
    drop(held);
    one.chat(&ChatRequest::user(Q).with_max_tokens(2), &Context::new())
        .await
        .unwrap();

    // Two sessions: the second call runs beside the held stream.
    let (two, held) = holding_a_session(&dir, 2, &req).await;
    let r = common::chat_within_a_minute(&two, 2).await;
    assert_eq!(r.usage.output_tokens, 2);
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lazy_loading_happens_on_the_first_call() {
    let Some(dir) = common::tiny() else { return };
    let m = LocalLlama::builder(&dir).eager(false).build().unwrap();
    assert!(!m.is_loaded());
    assert_eq!(m.count_tokens("Hello world").await.unwrap(), 2);
    assert!(m.is_loaded());
    m.chat(&ChatRequest::user(Q).with_max_tokens(3), &Context::new())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_it_cannot_serve_are_invalid_requests() {
    let Some(m) = tiny_model() else { return };
    let ctx = Context::new();
    let tools = ChatRequest::user(Q).with_tool(ToolSpec::new(
        "f",
        "d",
        serde_json::json!({"type": "object"}),
    ));
    assert_eq!(
        m.chat(&tools, &ctx).await.unwrap_err().kind(),
        ErrorKind::InvalidRequest
    );
    let image = ChatRequest::new(vec![Message::user(Q).with_image(ImageSource::Url {
        url: "https://x/y.png".into(),
    })]);
    assert_eq!(
        m.chat(&image, &ctx).await.unwrap_err().kind(),
        ErrorKind::InvalidRequest
    );
    assert_eq!(
        m.chat(&ChatRequest::new(vec![]), &ctx)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidRequest
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_falls_back_past_a_broken_local_model_and_serves_from_a_working_one() {
    let Some(dir) = common::tiny() else { return };
    let broken_dir = common::copy_model(&dir, "broken-llama");
    // The default variant's file is the one loaded.
    std::fs::write(
        broken_dir.join(Variant::default().file_name()),
        b"not an onnx file",
    )
    .unwrap();
    // Lazy: the broken file is found at the first call, which the chain treats as a failed link.
    let broken = LocalLlama::builder(&broken_dir)
        .eager(false)
        .name("broken")
        .build()
        .unwrap();
    let chain = Chain::builder()
        .link(broken)
        .link(LocalLlama::builder(&dir).name("local").build().unwrap())
        .link(ScriptedModel::new("never").reply("unused"))
        .build()
        .unwrap();
    let r = chain
        .chat(&ChatRequest::user(Q).with_max_tokens(5), &Context::new())
        .await
        .unwrap();
    assert_eq!(r.served_by(), "local");
    assert!(r.degraded());
    let first = &r.provenance.attempts[0];
    assert_eq!(first.error_kind, Some(ErrorKind::ModelNotFound));
    std::fs::remove_dir_all(broken_dir.parent().unwrap()).unwrap();
}

/// The library here is the CPU-only build: `device = cuda` is refused at build (eager load),
/// naming the device and the model, as a load failure the chain falls back past.
#[test]
fn cuda_on_a_cpu_only_library_is_refused_naming_the_device() {
    let Some(dir) = common::tiny() else { return };
    let e = LocalLlama::builder(&dir)
        .threads(1)
        .device(ripcord_local_onnx::Device::Cuda)
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ModelNotFound, "{e}");
    assert!(
        e.message()
            .starts_with("local model unavailable: device \"cuda\""),
        "{e}"
    );
    assert!(e.message().contains("no CUDA execution provider"), "{e}");
    assert!(e.message().contains(&dir.display().to_string()), "{e}");
    // The same folder on the CPU loads.
    LocalLlama::builder(&dir)
        .threads(1)
        .device(ripcord_local_onnx::Device::Cpu)
        .build()
        .unwrap();
}
