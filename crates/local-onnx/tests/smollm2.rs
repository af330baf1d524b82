//! The real model: SmolLM2-135M-Instruct, converted by `cargo xtask setup-model`, must know
//! the capital of France — in every shipped variant (fp32, q8, q4).

mod common;

use ripcord_core::{ChatModel, ChatRequest, Context, FinishReason};
use ripcord_local_onnx::{LocalLlama, Variant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_variant_knows_the_capital_of_france() {
    let Some(dir) = common::model_or_skip(ripcord_local_onnx::default_model_dir()) else {
        return;
    };
    for variant in Variant::ALL {
        let file = variant.file_name();
        assert!(
            dir.join(file).is_file(),
            "{file} is missing from {}: run `cargo xtask setup-model`",
            dir.display()
        );
        let m = LocalLlama::builder(&dir)
            .variant(variant)
            .threads(1)
            .build()
            .unwrap();
        let req = ChatRequest::user("What is the capital of France?").with_max_tokens(32);
        let r = m.chat(&req, &Context::new()).await.unwrap();
        println!(
            "{file}: {:?} ({:?}, {} tokens)",
            r.text(),
            r.finish_reason,
            r.usage.output_tokens
        );
        assert!(r.text().contains("Paris"), "{file}: {:?}", r.text());
        // It ends its turn with <|im_end|> (not shown) well before the limit.
        assert_eq!(r.finish_reason, FinishReason::Stop, "{file}");
        assert!(!r.text().contains("<|im_end|>"));
    }
}

/// Without a variant the builder picks the default one (q8) when the folder has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_is_the_q8_variant() {
    let Some(dir) = common::model_or_skip(ripcord_local_onnx::default_model_dir()) else {
        return;
    };
    let req = ChatRequest::user("What is the capital of France?").with_max_tokens(16);
    let default = LocalLlama::builder(&dir).threads(1).build().unwrap();
    let q8 = LocalLlama::builder(&dir)
        .variant(Variant::Q8)
        .threads(1)
        .build()
        .unwrap();
    assert_eq!(
        default.greedy_tokens(&req, 16).await.unwrap(),
        q8.greedy_tokens(&req, 16).await.unwrap()
    );
}
