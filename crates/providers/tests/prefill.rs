//! Assistant prefill on the OpenAI-compatible presets, against the chaos fake: DeepSeek's chat
//! prefix completion (`"prefix": true` on the beta base URL), vLLM's `continue_final_message`,
//! none elsewhere; and a chain continuing a cut stream through them — by prefill where the
//! link has it, by the instruction where it has not or refuses the prefill.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Reply, Script, VendorError, Wire};
use ripcord_core::chain::continuation::CONTINUE_INSTRUCTION;
use ripcord_core::{
    Chain, ChatModel, ChatRequest, Context, ContinuationMode, Message, StreamEvent, StreamPolicy,
    stream,
};
use ripcord_providers::OpenAiConfig;
use ripcord_providers::compat::{self, OpenAiCompatible, Preset};
use serde_json::Value;
use support::*;

const ANSWER: &str = "Rayleigh scattering sends the short blue wavelengths of sunlight across the whole sky while the long red ones pass straight through the air.";

async fn continuing_fake() -> FakeVendor {
    let reply = Reply::words(ANSWER).continuing();
    FakeVendor::start_with(Wire::OpenAi, FakeOptions::default().with_reply(reply))
        .await
        .unwrap()
}

fn link(preset: Preset, fake: &FakeVendor, name: &str) -> OpenAiCompatible {
    OpenAiCompatible::from_config(
        preset,
        OpenAiConfig::new("some-model", KEY)
            .with_base_url(fake.base_url())
            .with_timeouts(timeouts()),
    )
    .unwrap()
    .named(name)
}

fn prefilled() -> ChatRequest {
    ChatRequest::new(vec![
        Message::user("Why is the sky blue?"),
        Message::assistant("Rayleigh scattering sends"),
    ])
}

fn body(fake: &FakeVendor, i: usize) -> Value {
    fake.requests()[i].json().unwrap()
}

#[tokio::test]
async fn deepseek_prefills_on_its_beta_url_and_vllm_in_the_body() {
    let fake = continuing_fake().await;
    // DeepSeek: the continuation goes to {base}/beta/chat/completions with `prefix: true`.
    let ds = link(compat::deepseek(), &fake, "deepseek");
    assert!(ds.capabilities().assistant_prefill);
    let text = stream::collect(ds.stream(&prefilled(), &Context::new()).await.unwrap())
        .await
        .unwrap()
        .text()
        .to_owned();
    assert_eq!(format!("Rayleigh scattering sends{text}"), ANSWER);
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/beta/chat/completions");
    let b = body(&fake, 0);
    assert_eq!(b["messages"][1]["role"], "assistant");
    assert_eq!(b["messages"][1]["prefix"], true);
    assert!(b["messages"][0].get("prefix").is_none());
    // Any other DeepSeek call keeps the usual endpoint and no `prefix`.
    chat_ok(&ds, &ChatRequest::user("hi")).await;
    assert_eq!(fake.requests()[1].path, "/chat/completions");
    assert!(body(&fake, 1)["messages"][0].get("prefix").is_none());

    // vLLM: the usual endpoint, the two flags in the body.
    let vllm = link(compat::vllm(), &fake, "vllm");
    assert!(vllm.capabilities().assistant_prefill);
    chat_ok(&vllm, &prefilled()).await;
    assert_eq!(fake.requests()[2].path, "/chat/completions");
    let b = body(&fake, 2);
    assert_eq!(b["continue_final_message"], true);
    assert_eq!(b["add_generation_prompt"], false);
    assert!(b["messages"][1].get("prefix").is_none());

    // A preset without prefill (Groq) sends the conversation as it is and says so.
    let groq = link(compat::groq(), &fake, "groq");
    assert!(!groq.capabilities().assistant_prefill);
    chat_ok(&groq, &prefilled()).await;
    let b = body(&fake, 3);
    assert!(b.get("continue_final_message").is_none());
    assert!(b["messages"][1].get("prefix").is_none());
}

/// A chain whose primary cuts its stream after `after` words, continued on `backup`.
async fn cut_then(backup: OpenAiCompatible, after: usize) -> (String, ripcord_core::Provenance) {
    let primary_fake = FakeVendor::start_with(
        Wire::OpenAi,
        FakeOptions::default()
            .with_reply(Reply::words(ANSWER))
            .with_script(Script::Always(Behavior::TruncatedStream {
                after_chunks: after,
            })),
    )
    .await
    .unwrap();
    let primary = link(compat::groq(), &primary_fake, "primary");
    let chain = Chain::builder()
        .link_arc(Arc::new(primary) as Arc<dyn ChatModel>)
        .link_arc(Arc::new(backup) as Arc<dyn ChatModel>)
        .stream_policy(StreamPolicy::Continue)
        .build()
        .unwrap();
    let mut s = chain
        .stream(&ChatRequest::user("Why is the sky blue?"), &Context::new())
        .await
        .unwrap();
    let mut text = String::new();
    let mut provenance = None;
    use futures::StreamExt;
    while let Some(ev) = s.next().await {
        match ev.unwrap() {
            StreamEvent::TextDelta { text: t } => text.push_str(&t),
            StreamEvent::Provenance { provenance: p } => provenance = Some(*p),
            _ => {}
        }
    }
    (text, provenance.unwrap())
}

#[tokio::test]
async fn a_cut_stream_continues_by_prefill_on_deepseek_and_by_instruction_when_refused() {
    // DeepSeek continues by prefill, on its beta URL.
    let ds_fake = continuing_fake().await;
    let (text, p) = cut_then(link(compat::deepseek(), &ds_fake, "deepseek"), 8).await;
    assert_eq!(text, ANSWER, "one answer, nothing repeated or dropped");
    let c = &p.continuations[0];
    assert_eq!((&*c.from, &*c.by), ("primary", "deepseek"));
    assert_eq!(c.mode, ContinuationMode::Prefill);
    let asked = &ds_fake.requests()[0];
    assert_eq!(asked.path, "/beta/chat/completions");
    let b = asked.json().unwrap();
    let last = b["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["prefix"], true);
    assert_eq!(
        last["content"],
        ANSWER.split(' ').take(8).collect::<Vec<_>>().join(" ")
    );

    // The same link refusing the prefill (a 400) is asked again with the instruction.
    let refusing = continuing_fake().await;
    refusing.set_script(Script::Sequence(vec![
        Behavior::Error(VendorError::InvalidRequest),
        Behavior::Ok,
    ]));
    let (text, p) = cut_then(link(compat::deepseek(), &refusing, "deepseek"), 8).await;
    assert_eq!(text, ANSWER);
    assert_eq!(p.continuations[0].mode, ContinuationMode::Instruction);
    let sent = refusing.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].path, "/beta/chat/completions");
    assert_eq!(sent[1].path, "/chat/completions");
    let b = sent[1].json().unwrap();
    let msgs = b["messages"].as_array().unwrap();
    assert_eq!(msgs.last().unwrap()["content"], CONTINUE_INSTRUCTION);
    assert!(msgs.iter().all(|m| m.get("prefix").is_none()));

    // A link without prefill gets the instruction at once.
    let plain = continuing_fake().await;
    let (text, p) = cut_then(link(compat::groq(), &plain, "groq"), 8).await;
    assert_eq!(text, ANSWER);
    assert_eq!(p.continuations[0].mode, ContinuationMode::Instruction);
    assert_eq!(plain.requests().len(), 1);
}
