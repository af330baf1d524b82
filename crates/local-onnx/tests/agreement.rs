//! The greedy-agreement check on the tiny model: every shipped quantized variant answers the 20
//! fixed prompts through the fused graph (block-quantized weights, shared KV buffer), and the
//! 8-bit variant follows the fp32 model. The tiny model's random weights make greedy decoding
//! chaotic (one flipped token changes everything after it), so the bounds are loose; the
//! SmolLM2 figures come from `cargo xtask bench --anchors` and the converter's `agree`.
#![allow(clippy::unwrap_used)]

mod common;

use ripcord_local_onnx::agreement::{self, Agreement, TOKENS};
use ripcord_local_onnx::{LocalLlama, Variant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quantized_variants_follow_the_fp32_model_on_the_tiny_model() {
    let Some(dir) = common::tiny() else { return };
    let load = |v: Variant| {
        LocalLlama::builder(&dir)
            .variant(v)
            .threads(1)
            .build()
            .unwrap()
    };
    let reference = agreement::answers(&load(Variant::Fp32)).await.unwrap();
    assert_eq!(reference.len(), agreement::prompts().count());
    assert_eq!(reference.len(), 20);
    // The tiny model never emits its end token in 16 steps: every answer is full length.
    assert!(reference.iter().all(|a| a.len() == TOKENS));
    let mut seen = Vec::new();
    for v in [Variant::Q8, Variant::Q4] {
        let got = agreement::answers(&load(v)).await.unwrap();
        let a = Agreement::compare(&reference, &got);
        println!("{v}: {a:?}");
        assert_eq!(a.prompts, 20);
        assert!(got.iter().all(|x| x.len() == TOKENS), "{v}: short answers");
        seen.push((v, a));
    }
    let (_, q8) = &seen[0];
    let (_, q4) = &seen[1];
    // Measured: q8 14/20 first tokens and a mean common prefix of 3.05; q4 2/20 and 0.1.
    // Chance would be about 0 (a vocabulary of 49,152).
    assert!(q8.same_first_token >= 12, "q8: {q8:?}");
    assert!(q8.mean_common_prefix >= 2.0, "q8: {q8:?}");
    assert!(
        q8.mean_common_prefix >= q4.mean_common_prefix,
        "8 bits should agree at least as well as 4: {q8:?} vs {q4:?}"
    );
    // The identity of a variant with itself is exact (greedy is deterministic).
    let again = agreement::answers(&load(Variant::Q8)).await.unwrap();
    let same = Agreement::compare(&again, &again);
    assert_eq!(same.identical, 20);
}
