//! Load-time failures are clear `ModelNotFound` errors naming the path — never a panic.
//!
//! This file is its own test process: the one test that touches ONNX Runtime loads a garbage
//! library *first*, before any good one, which no other test file could guarantee.

mod common;

use std::fs;
use std::path::Path;

use ripcord_core::{ChatModel, ChatRequest, Context, Error, ErrorKind};
use ripcord_local_onnx::{LocalLlama, Variant};

fn assert_unavailable(e: &Error, names: &Path) {
    assert_eq!(e.kind(), ErrorKind::ModelNotFound, "{e}");
    assert!(e.message().starts_with("local model unavailable: "), "{e}");
    assert!(
        e.message().contains(&names.display().to_string()),
        "{e} does not name {}",
        names.display()
    );
}

#[test]
fn missing_folder_and_files_are_named() {
    let Some(tiny) = common::tiny() else { return };
    let scratch = common::temp_dir("nowhere");
    let nowhere = scratch.join("no-such-model");
    assert_unavailable(&LocalLlama::load(&nowhere).unwrap_err(), &nowhere);
    fs::remove_dir_all(&scratch).unwrap();
    for file in ["model.onnx", "tokenizer.json", "config.json"] {
        let dir = common::copy_model(&tiny, "missing");
        fs::remove_file(dir.join(file)).unwrap();
        // Lazy or eager, the files are checked in build().
        let e = LocalLlama::builder(&dir)
            .variant(Variant::Fp32)
            .eager(false)
            .build()
            .unwrap_err();
        assert_unavailable(&e, &dir.join(file));
        fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }
    // Without the default variant's file, the default falls back to model.onnx; a named
    // variant must exist.
    let dir = common::copy_model(&tiny, "no-q8");
    fs::remove_file(dir.join(Variant::Q8.file_name())).unwrap();
    LocalLlama::builder(&dir).eager(false).build().unwrap();
    let e = LocalLlama::builder(&dir)
        .variant(Variant::Q8)
        .eager(false)
        .build()
        .unwrap_err();
    assert_unavailable(&e, &dir.join("model.q8.onnx"));
    fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    let e = LocalLlama::builder(&tiny)
        .model_file("model.fp8.onnx")
        .build()
        .unwrap_err();
    assert_unavailable(&e, &tiny.join("model.fp8.onnx"));
    let e = LocalLlama::builder(&tiny).threads(0).build().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidRequest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_library_and_corrupt_files() {
    let Some(tiny) = common::tiny() else { return };
    let scratch = common::temp_dir("ort");

    // The build refuses `lib`, naming it and saying why.
    let refused = |lib: &Path, why: &str| {
        let e = LocalLlama::builder(&tiny)
            .ort_dylib(lib)
            .build()
            .unwrap_err();
        assert_unavailable(&e, lib);
        assert!(e.message().contains(why), "{e}");
    };
    // A missing library.
    let missing = scratch.join("libonnxruntime.so.0.0.0");
    refused(&missing, "not found");

    // A file that is not a shared library: dlopen fails, cleanly.
    let garbage = scratch.join("libgarbage.so");
    fs::write(&garbage, b"\x7fELF but not really").unwrap();
    refused(&garbage, "cannot load ONNX Runtime");

    // The failure was not remembered: the real library loads afterwards.
    LocalLlama::builder(&tiny).build().unwrap();
    // Once loaded, it serves every model (a process holds one ONNX Runtime).
    LocalLlama::builder(&tiny)
        .ort_dylib(&garbage)
        .build()
        .unwrap();

    // A truncated model file.
    let mut copies = Vec::new();
    let dir = common::copy_model(&tiny, "truncated");
    copies.push(dir.clone());
    let bytes = fs::read(dir.join("model.onnx")).unwrap();
    fs::write(dir.join("model.onnx"), &bytes[..bytes.len() / 3]).unwrap();
    let fp32 = |dir: &Path| LocalLlama::builder(dir).variant(Variant::Fp32).build();
    assert_unavailable(&fp32(&dir).unwrap_err(), &dir.join("model.onnx"));
    // Lazily: the call fails with the same error, and a chain would move on.
    let lazy = LocalLlama::builder(&dir)
        .variant(Variant::Fp32)
        .eager(false)
        .build()
        .unwrap();
    let e = lazy
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap_err();
    assert_unavailable(&e, &dir.join("model.onnx"));
    assert_eq!(e.provider(), Some("local"));

    // A corrupt tokenizer.
    let dir = common::copy_model(&tiny, "badtok");
    copies.push(dir.clone());
    fs::write(dir.join("tokenizer.json"), b"{\"model\": 42}").unwrap();
    let e = fp32(&dir).unwrap_err();
    assert_unavailable(&e, &dir.join("tokenizer.json"));
    assert!(e.message().contains("not a valid tokenizer"), "{e}");

    // A config that disagrees with the graph.
    let dir = common::copy_model(&tiny, "mismatch");
    copies.push(dir.clone());
    let cfg = fs::read_to_string(dir.join("config.json")).unwrap();
    fs::write(
        dir.join("config.json"),
        cfg.replace("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4"),
    )
    .unwrap();
    let e = fp32(&dir).unwrap_err();
    assert_unavailable(&e, &dir.join("model.onnx"));
    assert!(e.message().contains("shape mismatch"), "{e}");
    // The fused variant is checked the same way.
    let e = LocalLlama::builder(&dir)
        .variant(Variant::Q8)
        .build()
        .unwrap_err();
    assert_unavailable(&e, &dir.join("model.q8.onnx"));
    assert!(e.message().contains("shape mismatch"), "{e}");

    fs::remove_dir_all(&scratch).unwrap();
    for dir in copies {
        fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }
}
