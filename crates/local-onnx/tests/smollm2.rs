//! The real model: SmolLM2-135M-Instruct, converted by `cargo xtask setup-model`, must know
//! the capital of France — in fp32 and in the int8 variant.

mod common;

use ripcord_core::{ChatModel, ChatRequest, Context, FinishReason};
use ripcord_local_onnx::LocalLlama;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smollm2_knows_the_capital_of_france() {
    let Some(dir) = common::model_or_skip(ripcord_local_onnx::default_model_dir()) else {
        return;
    };
    for file in ["model.onnx", "model.int8.onnx"] {
        let m = LocalLlama::builder(&dir)
            .model_file(file)
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
